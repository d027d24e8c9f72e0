"""Quick start: a worker for job type "resize" (start the replica with --remote-type resize)."""

import logging
import os

from jobq import Client, JobContext, Worker

logging.basicConfig(level=logging.INFO)  # the worker's start and stop lines
server = os.environ.get("JOBQ_SERVER", "http://127.0.0.1:8080")
worker = Worker(server, concurrency=4)


@worker.handler("resize")
def resize(ctx: JobContext) -> dict:
    ctx.log(f"resizing {ctx.job_key} to {ctx.params['cpus']} cpus")
    ctx.progress(0.5, "disks resized")
    ctx.raise_if_cancelled()  # stop here if the job was cancelled or its lease lost
    return {"cpus": ctx.params["cpus"]}


Client(server).submit("resize", {"cpus": 4}, job_key="vm-42")
worker.run()  # until SIGTERM or Ctrl-C: running jobs finish, unfinished ones are released
