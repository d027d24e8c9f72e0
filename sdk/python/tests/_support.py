"""Shared by the tests: the import path, a scripted protocol stub, and the replica from JOBQ_SERVER."""

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, List, Optional, Tuple

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

SERVER = os.environ.get("JOBQ_SERVER", "")
TEST_TYPE = os.environ.get("JOBQ_TEST_TYPE", "sdk-test")
NO_SERVER = "JOBQ_SERVER is unset: start a replica with --remote-type sdk-test and set JOBQ_SERVER to its URL"

Answer = Tuple[int, Dict[str, Any]]


class Stub:
    """Stub is a scripted HTTP endpoint: each path answers from a queue of (status, body), the last
    one repeating, and every request body is recorded. It stands in for the replica only where a
    test needs an answer the replica will not give on demand (a 503, a lost connection)."""

    def __init__(self) -> None:
        self.answers: Dict[str, List[Answer]] = {}
        self.requests: List[Tuple[str, Any]] = []
        self.cond = threading.Condition()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"null")
                with stub.cond:
                    stub.requests.append((self.path, body))
                    queue = stub.answers.get(self.path) or [(200, {})]
                    status, answer = queue.pop(0) if len(queue) > 1 else queue[0]
                    stub.cond.notify_all()
                if callable(answer):
                    status, answer = answer(body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except OSError:
                    pass  # the worker closed a long poll it no longer waits for

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def script(self, path: str, *answers: Any) -> None:
        with self.cond:
            self.answers[path] = list(answers)

    def wait_for(self, pred: Callable[[List[Tuple[str, Any]]], bool], timeout: float = 10.0) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: pred(self.requests), timeout)

    def bodies(self, path: str) -> List[Any]:
        with self.cond:
            return [b for p, b in self.requests if p == path]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def job(job_id: int, params: Optional[Dict[str, Any]] = None, job_type: str = "t",
        lease_ms: int = 30000, heartbeat_ms: int = 10000) -> Dict[str, Any]:
    return {"id": job_id, "job_key": f"k{job_id}", "job_type": job_type, "params": params or {},
            "attempt": 1, "lease_ms": lease_ms, "heartbeat_ms": heartbeat_ms,
            "task_token": f"jqt1.{job_id}.1.secret"}
