// jobq worker library: run jobs of a jobq scheduler in a Node process (docs/workers.md).
export { ApiError, Client, TransportError } from './client.js';
export { Cancelled, JobContext, JobFailed, VERSION, Worker } from './worker.js';
