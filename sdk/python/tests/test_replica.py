"""The library against a real replica: JOBQ_SERVER names one started with --remote-type sdk-test
(JOBQ_TEST_TYPE overrides the type) and no credentials. Skipped when JOBQ_SERVER is unset."""

import threading
import time
import unittest
import uuid

from _support import NO_SERVER, SERVER, TEST_TYPE

from jobq import APIError, Client, JobContext, JobFailed, Worker

TERMINAL = {"SUCCESS", "FAILED", "CANCELED"}


@unittest.skipUnless(SERVER, NO_SERVER)
class ReplicaTest(unittest.TestCase):
    def setUp(self) -> None:
        self.client = Client(SERVER)
        self.worker = Worker(SERVER, worker_id=f"py-test-{uuid.uuid4().hex[:8]}", concurrency=4,
                             shutdown_timeout=2.0, wait_ms=1000)
        self.started = threading.Event()
        self.parents_seen = {}
        self.worker.register(TEST_TYPE, self.handle)

    def handle(self, ctx: JobContext):
        p = ctx.params
        self.parents_seen[ctx.job_key] = {k: parent.get("output") for k, parent in ctx.parents.items()}
        self.started.set()
        if p.get("action") == "succeed":
            ctx.log("line one", "line two")
            ctx.progress(0.5, "half way")
            return p.get("output")
        if p.get("action") == "fail":
            raise JobFailed(p["error"], retry=False)
        ctx.cancelled.wait(30)
        ctx.raise_if_cancelled()
        return {"never": True}

    def submit(self, **params):
        return self.client.submit(TEST_TYPE, params, max_retry=0)

    def wait_status(self, job_id: int, statuses=TERMINAL, timeout: float = 30.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            got = self.client.get_job(job_id)
            if got["status"] in statuses:
                return got
            time.sleep(0.05)  # polling the API: the replica offers no push for a job's status over HTTP
        self.fail(f"job {job_id} did not reach {statuses}: {got}")

    def test_success_failure_and_submit(self) -> None:
        ok = self.submit(action="succeed", output={"ip": "10.0.0.7"})
        bad = self.submit(action="fail", error="quota exceeded")
        self.worker.start()
        self.addCleanup(self.worker.stop)
        done = self.wait_status(ok["id"])
        self.assertEqual(done["status"], "SUCCESS")
        failed = self.wait_status(bad["id"])
        self.assertEqual(failed["status"], "FAILED")
        self.assertIn("quota exceeded", failed["last_error"])

    def test_cancel_reaches_a_running_job(self) -> None:
        job = self.submit(action="block")
        self.worker.start()
        self.addCleanup(self.worker.stop)
        self.wait_status(job["id"], {"RUNNING"})
        self.assertTrue(self.started.wait(10))
        self.client.cancel_job(job["id"])
        self.assertEqual(self.wait_status(job["id"])["status"], "CANCELED")

    def test_shutdown_releases_running_work(self) -> None:
        job = self.submit(action="block")
        self.worker.start()
        self.wait_status(job["id"], {"RUNNING"})
        self.assertTrue(self.started.wait(10))
        self.worker.stop(timeout=0.2)
        got = self.client.get_job(job["id"])
        self.assertEqual(got["status"], "WAITING")
        self.assertEqual(got["retry_times"], 0)
        self.client.cancel_job(job["id"])

    def test_workflow_child_reads_its_parent_output(self) -> None:
        key = f"py-wf-{uuid.uuid4().hex[:8]}"
        wf = self.client.submit_workflow(key, [
            {"job_key": key + "-a", "job_type": TEST_TYPE, "max_retry": 0,
             "params": {"action": "succeed", "output": {"from": key + "-a"}}},
            {"job_key": key + "-b", "job_type": TEST_TYPE, "max_retry": 0, "params": {"action": "succeed"},
             "depends_on": [key + "-a"]},
        ])
        self.assertEqual([j["status"] for j in wf["jobs"]], ["WAITING", "BLOCKED"])
        self.worker.start()
        self.addCleanup(self.worker.stop)
        end = time.monotonic() + 30
        while time.monotonic() < end and self.client.get_workflow(key)["status"] == "RUNNING":
            time.sleep(0.05)  # polling the API, as wait_status does
        self.assertEqual(self.client.get_workflow(key)["status"], "SUCCESS")
        self.assertEqual(self.parents_seen[key + "-b"], {key + "-a": {"from": key + "-a"}})

    def test_a_dead_replica_in_the_list_is_skipped(self) -> None:
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
        s.close()
        self.worker = Worker([dead, SERVER], worker_id=f"py-test-{uuid.uuid4().hex[:8]}", shutdown_timeout=2.0,
                             wait_ms=1000)
        self.worker.register(TEST_TYPE, self.handle)
        jobs = [self.submit(action="succeed", output={"n": i}) for i in range(3)]
        self.worker.start()
        self.addCleanup(self.worker.stop)
        for i, j in enumerate(jobs):
            got = self.wait_status(j["id"])
            self.assertEqual((got["status"], got["output"]), ("SUCCESS", {"n": i}))

    def test_handler_exception_type_and_trace(self) -> None:
        self.worker = Worker(SERVER, worker_id=f"py-test-{uuid.uuid4().hex[:8]}", shutdown_timeout=2.0, wait_ms=1000)
        self.worker.register(TEST_TYPE, lambda ctx: ctx.params["cpus"])
        j = self.submit(action="crash")
        self.worker.start()
        self.addCleanup(self.worker.stop)
        with self.assertLogs("jobq.worker", "ERROR"):
            got = self.wait_status(j["id"])
        self.assertEqual((got["status"], got["last_error"]), ("FAILED", "KeyError: 'cpus'"))

    def test_bad_submit_names_the_field(self) -> None:
        with self.assertRaises(APIError) as err:
            self.client.submit(TEST_TYPE, {}, priority=5000)
        self.assertEqual((err.exception.status, err.exception.field), (400, "priority"))


if __name__ == "__main__":
    unittest.main()
