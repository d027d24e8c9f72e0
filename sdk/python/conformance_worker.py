"""The conformance worker of docs/workers.md, run by jobq's conformance suite.

Run from the repository root: ``python3 sdk/python/conformance_worker.py``. It uses the library in
sdk/python/src (not an installed copy) and reads its settings from the environment.
"""

import logging
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "src"))

from jobq import Cancelled, JobContext, JobFailed, Worker  # noqa: E402


def handle(ctx: JobContext) -> object:
    p = ctx.params if isinstance(ctx.params, dict) else {}
    action = p.get("action")
    if action == "succeed":
        return p.get("output")
    if action == "fail":
        raise JobFailed(str(p.get("error", "")), retry=p.get("retry", True) is not False)
    if action == "sleep":
        ms = int(p.get("ms", 0))
        ctx.sleep(ms / 1000)
        return {"slept": ms}
    if action == "block":
        ctx.cancelled.wait()
        raise Cancelled(ctx.cancel_reason or "")
    if action == "log":
        lines = [str(line) for line in p.get("lines") or []]
        if lines:
            ctx.log(*lines)
        if "progress" in p:
            ctx.progress(float(p["progress"]), str(p.get("message", "")))
        return {"logged": len(lines)}
    if action == "big_output":
        return {"data": "x" * int(p.get("bytes", 0))}
    raise JobFailed(f"params.action: unknown action {action!r}", retry=False)


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "")
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        usage(f"{name}: must be a non-negative integer, got {raw!r}")
    return value


def usage(message: str) -> None:
    print(message, file=sys.stderr)
    sys.exit(2)


def main() -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    server = os.environ.get("JOBQ_SERVER", "")
    if not server:
        usage("JOBQ_SERVER: must be set to the replica's base URL")
    types = [t.strip() for t in os.environ.get("JOBQ_TYPES", "conformance").split(",") if t.strip()]
    concurrency = env_int("JOBQ_CONCURRENCY", 4)
    if concurrency < 1:
        usage("JOBQ_CONCURRENCY: must be at least 1")
    try:
        worker = Worker(
            server,
            token=os.environ.get("JOBQ_WORKER_TOKEN") or None,
            worker_id=os.environ.get("JOBQ_WORKER_ID") or None,
            concurrency=concurrency,
            shutdown_timeout=env_int("JOBQ_SHUTDOWN_TIMEOUT_MS", 10000) / 1000,
        )
    except ValueError as exc:
        usage(str(exc))
    for job_type in types:
        worker.register(job_type, handle)
    worker.run()


if __name__ == "__main__":
    main()
