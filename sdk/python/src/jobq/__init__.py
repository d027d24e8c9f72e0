"""jobq worker library: run jobs of a jobq scheduler in a Python process.

    from jobq import Worker

    worker = Worker("http://127.0.0.1:8080", concurrency=4)

    @worker.handler("resize")
    def resize(ctx):
        ctx.log(f"resizing to {ctx.params['cpus']} cpus")
        return {"ok": True}

    worker.run()  # until SIGTERM or SIGINT

The protocol is described in jobq's docs/workers.md.
"""

from ._client import APIError, Client, TransportError
from ._worker import VERSION, Cancelled, JobContext, JobFailed, Worker

__all__ = ["APIError", "Cancelled", "Client", "JobContext", "JobFailed", "TransportError", "VERSION", "Worker"]
__version__ = VERSION
