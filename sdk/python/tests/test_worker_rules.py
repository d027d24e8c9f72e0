"""The worker's protocol rules (docs/workers.md, "What a worker library does") against a scripted stub,
for the answers a replica does not give on demand: 503s, 413s, cancel requests and lost leases."""

import threading
import time
import unittest

from _support import Stub, job

from jobq import Cancelled, JobContext, JobFailed, Worker


def idle(body):
    time.sleep(0.05)
    return 200, {"jobs": []}


class WorkerRulesTest(unittest.TestCase):
    def setUp(self) -> None:
        self.stub = Stub()
        self.addCleanup(self.stub.close)

    def worker(self, handler, concurrency: int = 2, shutdown_timeout: float = 5.0) -> Worker:
        w = Worker(self.stub.url, worker_id="test-1", concurrency=concurrency,
                   shutdown_timeout=shutdown_timeout, wait_ms=100)
        w.register("t", handler)
        return w

    def serve(self, *jobs) -> None:
        self.stub.script("/v1/workers/fetch", *[(200, {"jobs": [j]}) for j in jobs], (200, idle))

    def completes(self):
        return self.stub.bodies("/v1/workers/complete")

    def test_completion_retried_with_the_same_body_until_applied(self) -> None:
        self.serve(job(1))
        self.stub.script("/v1/workers/complete", (503, {"error": {"code": "unavailable", "message": "db"}}),
                         (503, {"error": {"code": "unavailable", "message": "db"}}),
                         (200, {"result": "applied", "job_id": 1, "attempt": 1, "status": "SUCCESS"}))
        w = self.worker(lambda ctx: {"ip": "10.0.0.7"})
        w.start()
        self.addCleanup(w.stop)
        self.assertTrue(self.stub.wait_for(lambda r: len([p for p, _ in r if p == "/v1/workers/complete"]) == 3))
        want = {"task_token": "jqt1.1.1.secret", "outcome": "success", "output": {"ip": "10.0.0.7"}}
        self.assertEqual(self.completes(), [want, want, want])

    def test_stale_ends_the_retries(self) -> None:
        self.serve(job(2))
        self.stub.script("/v1/workers/complete",
                         (409, {"error": {"code": "stale", "field": "task_token", "message": "stale"}}))
        done = threading.Event()

        def handler(ctx: JobContext):
            done.set()
            raise JobFailed("boom", retry=False)

        w = self.worker(handler)
        w.start()
        self.assertTrue(self.stub.wait_for(lambda r: any(p == "/v1/workers/complete" for p, _ in r)))
        w.stop()
        self.assertEqual(self.completes(), [{"task_token": "jqt1.2.1.secret", "outcome": "failure",
                                             "error": "boom", "retry": False}])

    def test_refused_output_is_reported_as_a_failure(self) -> None:
        self.serve(job(3))
        msg = "output: must be at most 65536 bytes, got 70000"
        self.stub.script("/v1/workers/complete",
                         (413, {"error": {"code": "too_large", "field": "output", "message": msg}}),
                         (200, {"result": "applied", "job_id": 3, "attempt": 1, "status": "SCHEDULED"}))
        w = self.worker(lambda ctx: {"data": "x" * 70000})
        w.start()
        self.addCleanup(w.stop)
        self.assertTrue(self.stub.wait_for(lambda r: len([p for p, _ in r if p == "/v1/workers/complete"]) == 2))
        self.assertEqual(self.completes()[1], {"task_token": "jqt1.3.1.secret", "outcome": "failure", "error": msg})

    def test_cancel_requested_reaches_the_work(self) -> None:
        self.serve(job(4, heartbeat_ms=50))
        self.stub.script("/v1/workers/heartbeat",
                         (200, {"results": [{"job_id": 4, "attempt": 1, "state": "cancel_requested"}]}))
        reasons = []

        def handler(ctx: JobContext):
            ctx.cancelled.wait(10)
            reasons.append(ctx.cancel_reason)
            ctx.raise_if_cancelled()

        w = self.worker(handler)
        w.start()
        self.addCleanup(w.stop)
        self.assertTrue(self.stub.wait_for(lambda r: any(p == "/v1/workers/complete" for p, _ in r)))
        self.assertEqual(reasons, ["cancel_requested"])
        self.assertEqual(self.completes(), [{"task_token": "jqt1.4.1.secret", "outcome": "failure",
                                             "error": "canceled", "retry": True}])

    def test_lost_lease_cancels_and_never_completes(self) -> None:
        self.serve(job(5, heartbeat_ms=50))
        self.stub.script("/v1/workers/heartbeat", (200, {"results": [{"job_id": 5, "attempt": 1, "state": "lost"}]}))
        ended = threading.Event()

        def handler(ctx: JobContext):
            ctx.cancelled.wait(10)
            ended.set()
            return {"late": True}

        w = self.worker(handler)
        w.start()
        self.assertTrue(ended.wait(10))
        w.stop()
        self.assertEqual(self.completes(), [])

    def test_fetch_asks_for_free_slots_only(self) -> None:
        release = threading.Event()
        self.serve(job(6))
        w = self.worker(lambda ctx: release.wait(10) and {}, concurrency=2)
        w.start()
        self.addCleanup(w.stop)
        self.assertTrue(self.stub.wait_for(lambda r: len([p for p, _ in r if p == "/v1/workers/fetch"]) >= 3))
        fetches = self.stub.bodies("/v1/workers/fetch")
        self.assertEqual(fetches[0]["max_jobs"], 2)
        self.assertEqual({f["max_jobs"] for f in fetches[1:]}, {1})
        self.assertEqual(fetches[0]["job_types"], ["t"])
        self.assertEqual(fetches[0]["worker_id"], "test-1")
        release.set()

    def test_shutdown_releases_unfinished_work(self) -> None:
        self.serve(job(7), job(8))
        started = threading.Semaphore(0)
        finished = []

        def handler(ctx: JobContext):
            started.release()
            if ctx.id == 7:
                return {"quick": True}
            ctx.cancelled.wait(10)
            finished.append(ctx.cancel_reason)
            raise Cancelled()

        w = self.worker(handler, shutdown_timeout=0.3)
        w.start()
        self.assertTrue(started.acquire(timeout=10) and started.acquire(timeout=10))
        w.stop()
        by_token = {b["task_token"]: b for b in self.completes()}
        self.assertEqual(by_token["jqt1.7.1.secret"]["outcome"], "success")
        self.assertEqual(by_token["jqt1.8.1.secret"],
                         {"task_token": "jqt1.8.1.secret", "outcome": "release", "error": "worker shutting down"})
        self.assertEqual(len(self.completes()), 2)


if __name__ == "__main__":
    unittest.main()
