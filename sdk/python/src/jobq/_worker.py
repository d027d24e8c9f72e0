"""The worker runtime: fetch loop, heartbeats, completion retries and graceful shutdown."""

from __future__ import annotations

import itertools
import json
import logging
import os
import signal
import socket
import threading
import time
import traceback
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from ._client import APIError, Client, TransportError

__all__ = ["Cancelled", "JobContext", "JobFailed", "Worker", "VERSION"]

VERSION = "0.1.0"
log = logging.getLogger("jobq.worker")

# Completion retries: backoff from 100 ms doubling to 5 s (docs/workers.md, rule 3).
_BACKOFF_FIRST = 0.1
_BACKOFF_MAX = 5.0

# A fetch answered with one of these is a configuration error (a job type that is not remote, a wrong or
# missing token, no worker protocol on that server): every retry would get the same, so the worker stops.
_FETCH_REFUSED = (400, 401, 403, 404)

# MAX_OUTPUT_BYTES is the largest output the replica takes: its JSON encoding, in bytes (docs/workers.md).
MAX_OUTPUT_BYTES = 65536
# The attempt's log takes lines of at most 4,096 bytes and 65,536 bytes in all; a handler's stack trace
# is cut to fit in a quarter of that, keeping its end (the innermost frames and the exception).
_LOG_LINE_BYTES = 4096
_TRACE_LOG_BYTES = 16384


class JobFailed(Exception):
    """Raise JobFailed from a handler to fail the job with this message.

    ``retry=False`` fails the job now; otherwise the replica retries it with backoff while its
    retry budget lasts. Any other exception fails the job with ``retry=True``.
    """

    def __init__(self, message: str, retry: bool = True) -> None:
        super().__init__(message)
        self.message = message
        self.retry = retry


class Cancelled(JobFailed):
    """Cancelled is raised by ``JobContext.raise_if_cancelled`` once the job's work must stop.

    A handler that lets it propagate fails the job with ``"canceled"``; a job whose cancel was
    requested then ends CANCELED.
    """

    def __init__(self, reason: str = "") -> None:
        super().__init__("canceled", retry=True)
        self.reason = reason


Handler = Callable[["JobContext"], Any]


class JobContext:
    """JobContext is what a handler gets: the job and the means to cooperate with the worker.

    ``cancelled`` is a ``threading.Event`` set when the work must stop: the job's cancel was
    requested, its lease was lost, or the worker's shutdown timeout ran out. ``cancel_reason`` then
    says which (``"cancel_requested"``, ``"lost"``, ``"shutdown"``).
    """

    def __init__(self, job: Mapping[str, Any], client: Client) -> None:
        self.job: Dict[str, Any] = dict(job)
        self.id: int = int(job["id"])
        self.job_key: str = str(job.get("job_key", ""))
        self.job_type: str = str(job["job_type"])
        self.params: Any = job.get("params") if job.get("params") is not None else {}
        self.attempt: int = int(job.get("attempt", 0))
        # parents: a workflow job's parents as the fetch answered them (job_id, job_key, status,
        # output), by job_key; empty outside workflows.
        self.parents: Dict[str, Dict[str, Any]] = {str(p.get("job_key")): dict(p) for p in job.get("parents") or []}
        self.cancelled = threading.Event()
        self.cancel_reason: Optional[str] = None
        self._token = str(job["task_token"])
        self._client = client

    def __repr__(self) -> str:  # never shows the task token
        return f"JobContext(id={self.id}, job_type={self.job_type!r}, attempt={self.attempt})"

    def raise_if_cancelled(self) -> None:
        """Raise Cancelled if the job's work must stop."""
        if self.cancelled.is_set():
            raise Cancelled(self.cancel_reason or "")

    def sleep(self, seconds: float) -> None:
        """Sleep for ``seconds``, raising Cancelled as soon as the job is cancelled."""
        if self.cancelled.wait(seconds):
            raise Cancelled(self.cancel_reason or "")

    def log(self, *lines: str) -> None:
        """Append lines to this attempt's log (a line with newlines becomes several lines).

        A log that cannot be written (stale attempt, over the per-attempt limit, replica
        unreachable) is reported through the ``jobq.worker`` logger and does not fail the job.
        """
        split = [part for line in lines for part in str(line).split("\n")]
        if not split:
            return
        try:
            self._client.append_log(self._token, split)
        except (APIError, TransportError) as exc:
            log.warning("job %d attempt %d: log not written: %s", self.id, self.attempt, exc)

    def progress(self, progress: float, message: str = "") -> None:
        """Report this attempt's progress (0–1) and a message; the replica keeps the last report."""
        try:
            self._client.report_progress(self._token, float(progress), message)
        except (APIError, TransportError) as exc:
            log.warning("job %d attempt %d: progress not written: %s", self.id, self.attempt, exc)

    def _cancel(self, reason: str) -> None:
        if not self.cancelled.is_set():
            self.cancel_reason = reason
            self.cancelled.set()


class _Run:
    """One fetched job held by this worker, from fetch to its completion."""

    def __init__(self, job: Mapping[str, Any], ctx: JobContext, sent: float) -> None:
        self.ctx = ctx
        self.token = ctx._token
        self.lease = float(job.get("lease_ms") or 30000) / 1000
        self.heartbeat = float(job.get("heartbeat_ms") or self.lease * 1000 / 3) / 1000
        self.deadline = sent + self.lease  # local monotonic clock, from the fetch answer's arrival
        self.lost = False
        self.state = "running"  # running → completing (the handler ended) or releasing (shutdown)
        self.lock = threading.Lock()

    def claim(self, state: str) -> bool:
        with self.lock:
            if self.state != "running":
                return False
            self.state = state
            return True


class _Replicas:
    """_Replicas talks to one replica at a time, starting with the first URL, and moves to the next one
    (round robin) when a call gets no answer or a 5xx answer; the failed call is not repeated here, the
    caller's retry goes to the next replica. Task tokens are checked in the database, so any replica
    takes the heartbeats, logs and completions of a job another one handed out."""

    def __init__(self, clients: Sequence[Client]) -> None:
        self.clients = list(clients)
        self._cur = 0
        self._lock = threading.Lock()

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            i = self._cur
        try:
            return getattr(self.clients[i], name)(*args, **kwargs)
        except (APIError, TransportError) as exc:
            aborted = kwargs.get("abort_key") in self.clients[i]._aborted  # the worker's stop, not a fault
            if len(self.clients) > 1 and not aborted and (isinstance(exc, TransportError) or exc.retryable):
                with self._lock:
                    if self._cur == i:
                        self._cur = (i + 1) % len(self.clients)
                        log.warning("replica %s unreachable; moving to %s: %s", _base(self.clients[i]),
                                    _base(self.clients[self._cur]), exc)
            raise

    def fetch(self, *args: Any, **kwargs: Any) -> List[Dict[str, Any]]:
        return self._call("fetch", *args, **kwargs)

    def heartbeat(self, *args: Any, **kwargs: Any) -> List[Dict[str, Any]]:
        return self._call("heartbeat", *args, **kwargs)

    def complete(self, *args: Any, **kwargs: Any) -> Dict[str, Any]:
        return self._call("complete", *args, **kwargs)

    def append_log(self, *args: Any, **kwargs: Any) -> None:
        self._call("append_log", *args, **kwargs)

    def report_progress(self, *args: Any, **kwargs: Any) -> None:
        self._call("report_progress", *args, **kwargs)

    def abort(self, abort_key: int) -> None:
        for c in self.clients:
            c.abort(abort_key)


def _base(c: Client) -> str:
    return f"{c._scheme}://{c._host}" + (f":{c._port}" if c._port else "") + c._prefix


def _cut(text: str, limit: int) -> str:
    """The end of text within limit bytes of UTF-8 (the start of a line is cut, not its end)."""
    b = text.encode("utf-8", "replace")
    return text if len(b) <= limit else b[-limit:].decode("utf-8", "ignore")


def _trace_lines(exc: BaseException) -> List[str]:
    """The exception's stack trace as log lines: each ≤ 4,096 bytes, ≤ 16 KiB in all, ending kept."""
    lines = [_cut(line, _LOG_LINE_BYTES) for chunk in traceback.format_exception(type(exc), exc, exc.__traceback__)
             for line in chunk.rstrip("\n").split("\n")]
    kept: List[str] = []
    total = 0
    for line in reversed(lines):
        total += len(line.encode("utf-8", "replace")) + 1
        if total > _TRACE_LOG_BYTES:
            kept.append("… (stack trace cut)")
            break
        kept.append(line)
    return kept[::-1]


def _error_text(exc: BaseException) -> str:
    """The failure's error for an exception: its type and message, as Python prints them
    (``KeyError: 'cpus'``, ``json.decoder.JSONDecodeError: …``)."""
    t = type(exc)
    name = t.__qualname__ if t.__module__ in ("builtins", "__main__") else f"{t.__module__}.{t.__qualname__}"
    text = str(exc)
    return f"{name}: {text}" if text else name


class Worker:
    """Worker pulls jobs of its registered job types from a jobq replica and runs them in threads.

    ``server`` is a replica's base URL, or a list of them: the worker talks to one at a time and moves to
    the next one when a call gets no answer or a 5xx answer (a replica that died, froze or is cut off).
    Register one handler per job type (``@worker.handler("resize")``), then ``run()`` until SIGTERM or
    SIGINT, or ``start()`` and later ``stop()``. At most ``concurrency`` jobs run at once and the worker
    never fetches more than it can start. ``shutdown_timeout`` (seconds) is how long ``stop`` lets
    running jobs finish before it cancels them and releases their jobs to other workers.
    """

    def __init__(
        self,
        server: Union[str, Sequence[str]],
        *,
        token: Optional[str] = None,
        worker_id: Optional[str] = None,
        concurrency: int = 4,
        shutdown_timeout: float = 10.0,
        labels: Optional[Mapping[str, str]] = None,
        wait_ms: int = 20000,
        client: Optional[Client] = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency: must be at least 1, got {concurrency}")
        servers = [server] if isinstance(server, str) else list(server)
        if not servers and client is None:
            raise ValueError("server: required (a replica's base URL, or a list of them)")
        clients = [client] if client is not None else [Client(s, token) for s in servers]
        self.client = clients[0]
        self._api = _Replicas(clients)
        self.worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}"
        self.concurrency = concurrency
        self.shutdown_timeout = shutdown_timeout
        self.labels = dict(labels or {})
        self.wait_ms = wait_ms
        self._handlers: Dict[str, Handler] = {}
        self._runs: Dict[str, _Run] = {}
        self._cond = threading.Condition()
        self._stopping = threading.Event()
        self._closed = threading.Event()
        self._stop_requested = threading.Event()
        self._refused: Optional[APIError] = None
        self._fetch_key = next(_keys)
        self._threads: List[threading.Thread] = []
        self._started = False

    # -- registration -----------------------------------------------------------------------------

    def handler(self, job_type: str) -> Callable[[Handler], Handler]:
        """Decorator registering the function as the handler of ``job_type``."""

        def register(fn: Handler) -> Handler:
            self.register(job_type, fn)
            return fn

        return register

    def register(self, job_type: str, fn: Handler) -> None:
        """Register ``fn(ctx) -> output`` as the handler of ``job_type``; the output must be JSON."""
        if self._started:
            raise RuntimeError("register: the worker has already started")
        if job_type in self._handlers:
            raise ValueError(f"job_type: {job_type!r} already has a handler")
        self._handlers[job_type] = fn

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        """Start fetching and heartbeating in background threads."""
        if not self._handlers:
            raise RuntimeError("start: no handler registered")
        if self._started:
            raise RuntimeError("start: already started")
        self._started = True
        log.info("worker %s started: job_types=%s concurrency=%d replicas=%s", self.worker_id,
                 ",".join(sorted(self._handlers)), self.concurrency,
                 ",".join(_base(c) for c in self._api.clients))
        for name, target in (("jobq-fetch", self._fetch_loop), ("jobq-heartbeat", self._heartbeat_loop)):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)

    @property
    def error(self) -> Optional[APIError]:
        """The fetch refusal (400, 401, 403 or 404: a configuration error) that stopped the worker's
        fetching, or None. ``run()`` raises it after shutting down."""
        return self._refused

    def run(self, install_signal_handlers: bool = True) -> None:
        """Start, block until SIGTERM or SIGINT (or ``request_stop()``), then shut down gracefully.

        A fetch answered 400, 401, 403 or 404 (a job type the replica does not run remotely, a token it
        refuses) would be answered the same at every retry: the worker logs it once, shuts down as on
        SIGTERM (running jobs finish or are released) and ``run()`` raises that ``APIError``. Network
        errors and 5xx answers are retried with backoff."""
        previous = {}
        if install_signal_handlers and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, lambda signum, frame: self._stop_requested.set())
        try:
            self.start()
            while not self._stop_requested.wait(1.0):
                pass
            log.info("worker %s: stopping (shutdown timeout %.1fs)", self.worker_id, self.shutdown_timeout)
            self.stop()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if self._refused is not None:
            raise self._refused

    def request_stop(self) -> None:
        """Make ``run()`` return after a graceful shutdown; safe from any thread or signal handler."""
        self._stop_requested.set()

    def stop(self, timeout: Optional[float] = None) -> None:
        """Stop fetching, let running jobs finish for up to ``timeout`` seconds (default
        ``shutdown_timeout``), then cancel the rest and release their jobs. Blocks until done."""
        timeout = self.shutdown_timeout if timeout is None else timeout
        self._stopping.set()
        self._api.abort(self._fetch_key)
        with self._cond:
            self._cond.notify_all()
        if self._threads:
            self._threads[0].join()
        end = time.monotonic() + timeout
        with self._cond:
            while self._running() and time.monotonic() < end:
                self._cond.wait(end - time.monotonic())
            left = [r for r in self._runs.values() if r.state == "running"]
        releases = []
        for run in left:
            if run.claim("releasing"):
                run.ctx._cancel("shutdown")
                t = threading.Thread(target=self._release, args=(run, "worker shutting down"), daemon=True)
                t.start()
                releases.append(t)
        for t in releases:
            t.join()
        self._closed.set()
        with self._cond:
            self._cond.notify_all()
        for t in self._threads[1:]:
            t.join()
        if self._started:
            log.info("worker %s stopped", self.worker_id)

    def _running(self) -> bool:
        return any(r.state != "releasing" for r in self._runs.values())

    # -- fetch ------------------------------------------------------------------------------------

    def _fetch_loop(self) -> None:
        types = sorted(self._handlers)
        pause = _BACKOFF_FIRST
        while not self._stopping.is_set():
            with self._cond:
                while len(self._runs) >= self.concurrency and not self._stopping.is_set():
                    self._cond.wait()
                free = self.concurrency - len(self._runs)
            if self._stopping.is_set():
                break
            try:
                jobs = self._api.fetch(self.worker_id, types, min(free, 1000), self.wait_ms, self.labels,
                                         f"jobq-python/{VERSION}", abort_key=self._fetch_key)
            except (APIError, TransportError) as exc:
                if self._stopping.is_set():
                    break
                if isinstance(exc, APIError) and exc.status in _FETCH_REFUSED:
                    log.error("worker %s: fetch refused, stopping: %s", self.worker_id, exc)
                    self._refused = exc
                    self._stop_requested.set()
                    break
                log.warning("worker %s: fetch failed (next try in %.1fs): %s", self.worker_id, pause, exc)
                self._stopping.wait(pause)
                pause = min(pause * 2, _BACKOFF_MAX)
                continue
            pause = _BACKOFF_FIRST
            received = time.monotonic()  # the claim happened before its answer: a long poll may wait wait_ms first
            for job in jobs:
                self._start(job, received)

    def _start(self, job: Mapping[str, Any], sent: float) -> None:
        run = _Run(job, JobContext(job, self._api), sent)  # type: ignore[arg-type]
        with self._cond:
            self._runs[run.token] = run
            self._cond.notify_all()
        if self._stopping.is_set() and run.claim("releasing"):
            self._finish_after(self._release, run, "worker shutting down")
            return
        threading.Thread(target=self._execute, args=(run,), name=f"jobq-job-{run.ctx.id}",
                         daemon=True).start()

    # -- run and complete -------------------------------------------------------------------------

    def _execute(self, run: _Run) -> None:
        ctx = run.ctx
        body: Dict[str, Any] = {"task_token": run.token}
        try:
            output = self._handlers[ctx.job_type](ctx)
        except JobFailed as exc:
            body.update(outcome="failure", error=exc.message, retry=exc.retry)
        except Exception as exc:  # a handler's error fails its job, it does not stop the worker
            body.update(outcome="failure", error=_error_text(exc))
            trace = _trace_lines(exc)
            log.error("job %d attempt %d: handler raised %s\n%s", ctx.id, ctx.attempt, body["error"],
                      "\n".join(trace))
            if not run.lost:
                ctx.log(*trace)
        else:
            body.update(_output_outcome(output))
        if not run.claim("completing"):
            return  # released by the shutdown: its result is not reported
        if run.lost:
            log.info("job %d attempt %d: lease lost, outcome not reported", ctx.id, ctx.attempt)
            self._done(run)
            return
        self._finish_after(self._complete, run, body)

    def _finish_after(self, fn: Callable[..., None], run: _Run, arg: Any) -> None:
        try:
            fn(run, arg)
        finally:
            self._done(run)

    def _release(self, run: _Run, reason: str) -> None:
        self._send(run, {"task_token": run.token, "outcome": "release", "error": reason})

    def _complete(self, run: _Run, body: Dict[str, Any]) -> None:
        self._send(run, body)

    def _send(self, run: _Run, body: Dict[str, Any]) -> None:
        """Send a completion, the same body on every retry, until the lease deadline."""
        ctx = run.ctx
        delay = _BACKOFF_FIRST
        while True:
            try:
                answer = self._api.complete(body)
                log.debug("job %d attempt %d: %s applied, status %s", ctx.id, ctx.attempt,
                          body["outcome"], answer.get("status"))
                return
            except APIError as exc:
                if exc.status == 409:
                    log.info("job %d attempt %d: %s not applied: %s", ctx.id, ctx.attempt, body["outcome"], exc)
                    return
                if exc.status in (400, 413) and body["outcome"] == "success":
                    # The same output is refused on every attempt: no retry.
                    log.warning("job %d attempt %d: output refused, reported as failure without retry: %s",
                                ctx.id, ctx.attempt, exc.message)
                    body = {"task_token": run.token, "outcome": "failure", "error": exc.message, "retry": False}
                    continue
                if not exc.retryable:
                    log.error("job %d attempt %d: %s refused: %s", ctx.id, ctx.attempt, body["outcome"], exc)
                    return
                err: Exception = exc
            except TransportError as exc:
                err = exc
            if run.lost or time.monotonic() + delay > run.deadline:
                log.warning("job %d attempt %d: %s not delivered before the lease deadline: %s",
                            ctx.id, ctx.attempt, body["outcome"], err)
                return
            time.sleep(delay)
            delay = min(delay * 2, _BACKOFF_MAX)

    def _done(self, run: _Run) -> None:
        with self._cond:
            self._runs.pop(run.token, None)
            self._cond.notify_all()

    # -- heartbeat --------------------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        while True:
            with self._cond:
                runs = list(self._runs.values())
            interval = min((r.heartbeat for r in runs), default=1.0)
            if self._closed.wait(interval):
                return
            with self._cond:
                runs = [r for r in self._runs.values() if not r.lost]
            for i in range(0, len(runs), 1000):  # at most 1,000 tokens a call
                self._heartbeat(runs[i:i + 1000])

    def _heartbeat(self, runs: Sequence[_Run]) -> None:
        sent = time.monotonic()
        try:
            results = self._api.heartbeat(self.worker_id, [r.token for r in runs])
        except (APIError, TransportError) as exc:
            # Not a loss: the database decides. The outcome is still sent when the work ends, and
            # the replica answers 409 stale if the lease was rescued meanwhile.
            log.warning("worker %s: heartbeat failed: %s", self.worker_id, exc)
            return
        for run, result in zip(runs, results):
            state = result.get("state")
            if state in ("renewed", "cancel_requested"):
                run.deadline = sent + run.lease
            if state == "cancel_requested":
                run.ctx._cancel("cancel_requested")
            elif state == "lost":
                self._lose(run, "the attempt no longer holds the job")

    def _lose(self, run: _Run, why: str) -> None:
        if not run.lost:
            run.lost = True
            log.warning("job %d attempt %d: lost (%s): cancelling its work", run.ctx.id, run.ctx.attempt, why)
        run.ctx._cancel("lost")


def _output_outcome(output: Any) -> Dict[str, Any]:
    """The completion fields for a handler's output: a success, or a failure without retry when the
    output is not JSON (every attempt would give the same)."""
    try:
        encoded = json.dumps(output, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        return {"outcome": "failure", "retry": False, "error": "output: must be JSON-serializable: " + _error_text(exc)}
    return {"outcome": "success", "output": json.loads(encoded)}


_keys = itertools.count(1)
