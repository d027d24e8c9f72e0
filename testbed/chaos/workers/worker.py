"""The chaos testbed's Python worker: the library in sdk/python/src running the testbed's
remote workloads (remote-effect, remote-flaky) under `jobq chaos --executor remote`.

Settings from the environment: JOBQ_SERVER, JOBQ_WORKER_ID, JOBQ_TYPES, JOBQ_CONCURRENCY and
JOBQ_CHAOS_EFFECT_URL, the harness's effect recorder: each run posts its "non_tx" effect before its
work and its "end" marker after it, so the checker counts repeated effects as it does for the
replicas' own handlers.
"""

import json
import logging
import os
import sys
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "sdk", "python", "src"))

from jobq import JobContext, JobFailed, Worker  # noqa: E402

EFFECT_URL = os.environ["JOBQ_CHAOS_EFFECT_URL"]
WORKER_ID = os.environ["JOBQ_WORKER_ID"]


def effect(ctx: JobContext, kind: str) -> None:
    body = json.dumps({"job_id": ctx.id, "attempt": ctx.attempt, "kind": kind,
                       "owner": "worker:" + WORKER_ID}).encode()
    req = urllib.request.Request(EFFECT_URL, data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        resp.read()


def handle(ctx: JobContext) -> object:
    p = ctx.params if isinstance(ctx.params, dict) else {}
    ms = int(p.get("ms", 0))
    effect(ctx, "non_tx")
    ctx.sleep(ms / 1000)
    if ctx.cancelled.is_set():
        raise JobFailed("canceled: " + str(ctx.cancel_reason or ""))
    effect(ctx, "end")
    if ctx.job_type == "remote-flaky" and ctx.attempt <= int(p.get("failures", 1)):
        raise JobFailed(f"flaky: attempt {ctx.attempt} fails by design")
    return {"ms": ms}


def main() -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    worker = Worker(os.environ["JOBQ_SERVER"], worker_id=WORKER_ID,
                    concurrency=int(os.environ.get("JOBQ_CONCURRENCY", "8")), shutdown_timeout=2)
    for t in os.environ["JOBQ_TYPES"].split(","):
        worker.register(t, handle)
    worker.run()


if __name__ == "__main__":
    main()
