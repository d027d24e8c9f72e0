"""The worker's protocol rules (docs/workers.md, "What a worker library does") against a scripted stub,
for the answers a replica does not give on demand: 503s, 413s, cancel requests and lost leases."""

import threading
import time
import unittest

from _support import Stub, job

from jobq import APIError, Cancelled, JobContext, JobFailed, Worker


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
        self.assertEqual(self.completes()[1], {"task_token": "jqt1.3.1.secret", "outcome": "failure", "error": msg,
                                               "retry": False})

    def test_unserializable_output_fails_without_retry(self) -> None:
        self.serve(job(9))
        w = self.worker(lambda ctx: {"x": object()})
        w.start()
        self.addCleanup(w.stop)
        self.assertTrue(self.stub.wait_for(lambda r: any(p == "/v1/workers/complete" for p, _ in r)))
        body = self.completes()[0]
        self.assertEqual((body["outcome"], body["retry"]), ("failure", False))
        self.assertTrue(body["error"].startswith("output: must be JSON-serializable: TypeError: "), body["error"])

    def test_exception_type_in_error_and_trace_in_log(self) -> None:
        self.serve(job(10))

        def handler(ctx: JobContext):
            return {"cpus": ctx.params["cpus"]}

        w = self.worker(handler)
        w.start()
        self.addCleanup(w.stop)
        with self.assertLogs("jobq.worker", "ERROR") as logs:
            self.assertTrue(self.stub.wait_for(lambda r: any(p == "/v1/workers/complete" for p, _ in r)))
        self.assertEqual(self.completes()[0]["error"], "KeyError: 'cpus'")
        lines = [line for b in self.stub.bodies("/v1/workers/log") for line in b["lines"]]
        self.assertEqual(lines[0], "Traceback (most recent call last):")
        self.assertIn("in handler", "\n".join(lines))
        self.assertEqual(lines[-1], "KeyError: 'cpus'")
        self.assertIn("Traceback", "\n".join(logs.output))

    def test_stack_trace_in_the_log_is_bounded(self) -> None:
        self.serve(job(11))

        def deep(n: int):
            if n == 0:
                raise ValueError("y" * 10000)
            return deep(n - 1)

        w = self.worker(lambda ctx: deep(400))
        w.start()
        self.addCleanup(w.stop)
        with self.assertLogs("jobq.worker", "ERROR"):
            self.assertTrue(self.stub.wait_for(lambda r: any(p == "/v1/workers/complete" for p, _ in r)))
        lines = [line for b in self.stub.bodies("/v1/workers/log") for line in b["lines"]]
        self.assertLessEqual(max(len(line.encode()) for line in lines), 4096)
        self.assertLessEqual(sum(len(line.encode()) + 1 for line in lines), 16384 + 64)
        self.assertTrue(lines[-1].endswith("yyy"))
        self.assertTrue(self.completes()[0]["error"].startswith("ValueError: yyy"))

    def test_a_dead_replica_first_in_the_list_is_skipped(self) -> None:
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
        s.close()
        self.serve(job(12))
        w = Worker([dead, self.stub.url], worker_id="test-1", wait_ms=100)
        w.register("t", lambda ctx: {"ok": True})
        with self.assertLogs("jobq.worker", "INFO") as logs:
            w.start()
            self.assertTrue(self.stub.wait_for(lambda r: any(p == "/v1/workers/complete" for p, _ in r)))
            w.stop()
        self.assertEqual(self.completes()[0]["output"], {"ok": True})
        text = "\n".join(logs.output)
        self.assertIn("started", text)
        self.assertIn("moving to " + self.stub.url, text)
        self.assertIn("stopped", text)

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

    def test_refused_fetch_stops_the_worker_and_run_raises(self) -> None:
        refused = (400, {"error": {"code": "invalid_argument", "field": "job_types",
                                   "message": "\"t\" is not a remote job type"}})
        self.stub.script("/v1/workers/fetch", (200, {"jobs": [job(20)]}), refused)

        def handler(ctx: JobContext):
            time.sleep(0.3)
            return {"done": True}

        w = self.worker(handler)
        with self.assertLogs("jobq.worker", level="ERROR") as logs, self.assertRaises(APIError) as raised:
            w.run(install_signal_handlers=False)
        self.assertEqual(raised.exception.status, 400)
        self.assertIn("not a remote job type", str(raised.exception))
        self.assertIs(w.error, raised.exception)
        self.assertEqual(len(self.stub.bodies("/v1/workers/fetch")), 2, "the refused fetch is not retried")
        self.assertEqual(self.completes(), [{"task_token": "jqt1.20.1.secret", "outcome": "success",
                                             "output": {"done": True}}])
        self.assertEqual(len([r for r in logs.output if "not a remote job type" in r]), 1)

    def test_unavailable_fetch_is_retried(self) -> None:
        unavailable = (503, {"error": {"code": "unavailable", "message": "db"}})
        self.stub.script("/v1/workers/fetch", unavailable, unavailable, (200, idle))
        w = self.worker(lambda ctx: {})
        w.start()
        self.addCleanup(w.stop)
        self.assertTrue(self.stub.wait_for(lambda r: len([p for p, _ in r if p == "/v1/workers/fetch"]) >= 4))
        self.assertIsNone(w.error)

if __name__ == "__main__":
    unittest.main()
