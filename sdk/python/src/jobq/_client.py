"""HTTP/JSON calls of the jobq API that a worker uses (docs/workers.md)."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import urllib.parse
import uuid
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set

__all__ = ["APIError", "Client", "TransportError"]


class APIError(Exception):
    """APIError is an error answer of the API: its HTTP status and the body's code, field and message."""

    def __init__(self, status: int, code: str, message: str, field: str = "") -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.field = field
        self.message = message

    @property
    def retryable(self) -> bool:
        """True for 5xx answers (503 while the database is unavailable): the same call may succeed later."""
        return self.status >= 500


class TransportError(Exception):
    """TransportError is a call that got no HTTP answer (refused, reset, timed out, aborted)."""


class Client:
    """Client calls one jobq replica over HTTP/JSON.

    ``server`` is the base URL (``http://127.0.0.1:8080``); ``token`` is a worker or admin bearer token,
    or None where the replica has no credentials configured. A Client is safe to share between threads:
    every call opens its own connection.
    """

    def __init__(self, server: str, token: Optional[str] = None, timeout: float = 10.0) -> None:
        url = urllib.parse.urlsplit(server)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"server: must be an http:// or https:// URL, got {server!r}")
        self._scheme = url.scheme
        self._host = url.hostname
        self._port = url.port
        self._prefix = url.path.rstrip("/")
        self._token = token
        self.timeout = timeout
        self._lock = threading.Lock()
        self._open: Dict[int, http.client.HTTPConnection] = {}
        self._aborted: Set[int] = set()

    # -- jobs -------------------------------------------------------------------------------------

    def submit(
        self,
        job_type: str,
        params: Optional[Mapping[str, Any]] = None,
        *,
        job_key: Optional[str] = None,
        priority: Optional[int] = None,
        max_retry: Optional[int] = None,
        run_at: Optional[str] = None,
        timeout_ms: Optional[int] = None,
    ) -> Dict[str, Any]:
        """Submit one job and return it as the API answers (``id``, ``status``, …).

        ``job_key`` defaults to a random UUID; submitting the same key and body again returns the
        existing job (idempotent submit). ``run_at`` is RFC 3339 with an offset.
        """
        body: Dict[str, Any] = {"job_key": job_key or uuid.uuid4().hex, "job_type": job_type}
        if params is not None:
            body["params"] = dict(params)
        for name, value in (("priority", priority), ("max_retry", max_retry), ("run_at", run_at),
                            ("timeout_ms", timeout_ms)):
            if value is not None:
                body[name] = value
        return self.call("POST", "/v1/jobs", body)

    def submit_workflow(self, workflow_key: str, jobs: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
        """Submit a workflow (docs/workflows.md) and return it as the API answers.

        Each job is a ``POST /v1/jobs`` body (``job_key``, ``job_type``, ``params``, …) plus
        ``depends_on``: the ``job_key``\ s of its parents in the workflow (strings, or
        ``{"job_key": …, "on_parent_failure": "run"}``). All jobs are created or none; the same key
        and body again returns the existing workflow.
        """
        return self.call("POST", "/v1/workflows", {"workflow_key": workflow_key, "jobs": [dict(j) for j in jobs]})

    def get_workflow(self, workflow_key: str) -> Dict[str, Any]:
        """Return the workflow with its jobs, edges and ``status`` (APIError 404 when there is none)."""
        return self.call("GET", "/v1/workflows/" + urllib.parse.quote(workflow_key, safe=""))

    def get_job(self, job_id: int) -> Dict[str, Any]:
        """Return the job with this id (APIError 404 when there is none)."""
        return self.call("GET", f"/v1/jobs/{int(job_id)}")

    def cancel_job(self, job_id: int) -> Dict[str, Any]:
        """Cancel the job: a waiting job ends CANCELED, a running one gets a cancel request."""
        return self.call("POST", f"/v1/jobs/{int(job_id)}/cancel", {})

    # -- worker calls -----------------------------------------------------------------------------

    def fetch(self, worker_id: str, job_types: Sequence[str], max_jobs: int, wait_ms: int = 20000,
              labels: Optional[Mapping[str, str]] = None, version: Optional[str] = None,
              abort_key: Optional[int] = None) -> List[Dict[str, Any]]:
        """Long-poll for up to ``max_jobs`` due jobs; returns them (an empty list after ``wait_ms``).

        ``abort_key`` lets another thread end the wait with ``abort(abort_key)``: the connection is
        closed, so the replica returns what it claimed for this call to WAITING.
        """
        body: Dict[str, Any] = {"worker_id": worker_id, "job_types": list(job_types),
                                "max_jobs": max_jobs, "wait_ms": wait_ms}
        if labels:
            body["labels"] = dict(labels)
        if version:
            body["version"] = version
        answer = self.call("POST", "/v1/workers/fetch", body, timeout=wait_ms / 1000 + self.timeout,
                           abort_key=abort_key)
        return list(answer.get("jobs") or [])

    def heartbeat(self, worker_id: str, task_tokens: Sequence[str]) -> List[Dict[str, Any]]:
        """Renew the leases of these task tokens in one call; one result per token, in order."""
        answer = self.call("POST", "/v1/workers/heartbeat",
                           {"worker_id": worker_id, "task_tokens": list(task_tokens)})
        return list(answer.get("results") or [])

    def complete(self, body: Mapping[str, Any]) -> Dict[str, Any]:
        """Send one completion body (``task_token``, ``outcome`` and its fields) once."""
        return self.call("POST", "/v1/workers/complete", body)

    def append_log(self, task_token: str, lines: Sequence[str]) -> None:
        """Append lines to the attempt's log."""
        self.call("POST", "/v1/workers/log", {"task_token": task_token, "lines": list(lines)})

    def report_progress(self, task_token: str, progress: float, message: str = "") -> None:
        """Report the attempt's progress (0–1) with a message; the last report is kept."""
        self.call("POST", "/v1/workers/progress",
                  {"task_token": task_token, "progress": progress, "message": message})

    # -- transport --------------------------------------------------------------------------------

    def abort(self, abort_key: int) -> None:
        """End the call started with this ``abort_key`` and every later one (TransportError)."""
        with self._lock:
            self._aborted.add(abort_key)
            conn = self._open.get(abort_key)
        if conn is not None and conn.sock is not None:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def call(self, method: str, path: str, body: Any = None, timeout: Optional[float] = None,
             abort_key: Optional[int] = None) -> Dict[str, Any]:
        """Send one request and return the decoded JSON answer.

        Raises APIError for an error answer and TransportError when no answer came.
        """
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self._token:
            headers["Authorization"] = "Bearer " + self._token
        cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
        conn = cls(self._host, self._port, timeout=timeout or self.timeout)
        if abort_key is not None:
            with self._lock:
                self._open[abort_key] = conn
        try:
            if abort_key is not None:
                conn.connect()
                with self._lock:  # abort() before the connection existed: nothing to shut down
                    if abort_key in self._aborted:
                        raise ConnectionAbortedError("aborted")
            conn.request(method, self._prefix + path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
            status = resp.status
        except (OSError, http.client.HTTPException) as exc:
            raise TransportError(f"{method} {path}: {exc.__class__.__name__}: {exc}") from exc
        finally:
            if abort_key is not None:
                with self._lock:
                    self._open.pop(abort_key, None)
            conn.close()
        try:
            decoded = json.loads(raw) if raw else {}
        except ValueError:
            decoded = None
        if 200 <= status < 300 and isinstance(decoded, dict):
            return decoded
        if 200 <= status < 300:
            raise APIError(status, "bad_answer", f"{method} {path}: answer is not a JSON object")
        err = decoded.get("error") if isinstance(decoded, dict) else None
        if isinstance(err, dict):
            raise APIError(status, str(err.get("code", "")), str(err.get("message", "")),
                           str(err.get("field", "") or ""))
        text = raw[:200].decode("utf-8", "replace").strip()
        raise APIError(status, "http_" + str(status), text or http.client.responses.get(status, ""))
