// Type declarations of @jobq/worker (hand-written; the library is plain ESM JavaScript).

/** A job as the replica hands it to a worker (POST /v1/workers/fetch). */
export interface FetchedJob {
  id: number;
  job_key: string;
  job_type: string;
  params: any;
  attempt: number;
  priority: number;
  retry_times: number;
  max_retry: number;
  timeout_ms: number;
  run_at: string;
  lease_until: string;
  lease_ms: number;
  heartbeat_ms: number;
  task_token: string;
}

/** A job as the API answers it (GET /v1/jobs/{id}). */
export interface Job {
  id: number;
  job_key: string;
  job_type: string;
  params: any;
  status: 'SCHEDULED' | 'WAITING' | 'RUNNING' | 'SUCCESS' | 'FAILED' | 'CANCELED' | string;
  priority: number;
  retry_times: number;
  max_retry: number;
  attempt: number;
  last_error?: string;
  [field: string]: unknown;
}

export interface HeartbeatResult {
  job_id: number;
  attempt: number;
  state: 'renewed' | 'cancel_requested' | 'lost';
  lease_until?: string;
}

export type CompleteBody =
  | { task_token: string; outcome: 'success'; output?: unknown }
  | { task_token: string; outcome: 'failure'; error: string; retry?: boolean }
  | { task_token: string; outcome: 'release'; error?: string };

export interface CompleteAnswer {
  result: 'applied';
  job_id: number;
  attempt: number;
  status: string;
}

/** An error answer of the API: its HTTP status and the body's code, field and message. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly field: string;
  readonly serverMessage: string;
  /** True for 5xx answers: the same call may succeed later. */
  readonly retryable: boolean;
}

/** A call that got no HTTP answer (refused, reset, timed out, aborted). */
export class TransportError extends Error {}

export interface SubmitOptions {
  /** Defaults to a random UUID. The same key and body again returns the existing job. */
  jobKey?: string;
  priority?: number;
  maxRetry?: number;
  runAt?: string | Date;
  timeoutMs?: number;
}

/** One job of a workflow submit: a POST /v1/jobs body plus its parents' job_keys. */
export interface WorkflowJob {
  job_key: string;
  job_type: string;
  params?: Record<string, unknown>;
  priority?: number;
  max_retry?: number;
  timeout_ms?: number;
  depends_on?: (string | { job_key: string; on_parent_failure?: 'cancel' | 'run' })[];
}

/** A workflow as GET /v1/workflows/{key} answers it. */
export interface Workflow {
  id: number;
  workflow_key: string;
  status: 'RUNNING' | 'SUCCESS' | 'FAILED' | 'CANCELED';
  counts: Record<string, number>;
  jobs: (Job & { depends_on: string[]; blocked_parents: number })[];
  edges: { parent: string; child: string; on_parent_failure: string }[];
  [field: string]: unknown;
}

/** A parent of a fetched workflow job. */
export interface ParentOutput {
  job_id: number;
  job_key: string;
  status: string;
  output?: unknown;
}

/** Calls one jobq replica over HTTP/JSON. */
export class Client {
  constructor(server: string, options?: { token?: string; timeoutMs?: number });
  timeoutMs: number;
  submit(jobType: string, params?: Record<string, unknown>, options?: SubmitOptions): Promise<Job>;
  /** Submits a workflow: jobs with depends_on (docs/workflows.md); all or none. */
  submitWorkflow(workflowKey: string, jobs: WorkflowJob[]): Promise<Workflow>;
  getWorkflow(workflowKey: string): Promise<Workflow>;
  getJob(id: number): Promise<Job>;
  cancelJob(id: number): Promise<Job>;
  fetchJobs(request: {
    workerId: string;
    jobTypes: string[];
    maxJobs: number;
    waitMs?: number;
    labels?: Record<string, string>;
    version?: string;
    signal?: AbortSignal;
  }): Promise<FetchedJob[]>;
  heartbeat(workerId: string, taskTokens: string[]): Promise<HeartbeatResult[]>;
  complete(body: CompleteBody): Promise<CompleteAnswer>;
  appendLog(taskToken: string, lines: string[]): Promise<void>;
  reportProgress(taskToken: string, progress: number, message?: string): Promise<void>;
  call(method: string, path: string, body?: unknown, options?: { signal?: AbortSignal; timeoutMs?: number }): Promise<any>;
}

/** Throw from a handler to fail the job with this message; `retry: false` fails it now. */
export class JobFailed extends Error {
  constructor(message: string, options?: { retry?: boolean });
  readonly retry: boolean;
}

export type CancelReason = 'cancel_requested' | 'lost' | 'shutdown';

/** Thrown by JobContext.throwIfCancelled and JobContext.sleep once the job's work must stop. */
export class Cancelled extends JobFailed {
  constructor(reason?: CancelReason | '');
  readonly reason: CancelReason | '';
}

/** What a handler gets: the job, an AbortSignal, and the attempt's log and progress. */
export class JobContext<P = any> {
  readonly job: FetchedJob;
  readonly id: number;
  readonly jobKey: string;
  readonly jobType: string;
  readonly params: P;
  readonly attempt: number;
  /** A workflow job's parents (job_id, job_key, status, output) by job_key; empty outside workflows. */
  readonly parents: Record<string, ParentOutput>;
  /** Aborted when the job's cancel is requested, its lease is lost, or the shutdown timeout ran out. */
  readonly signal: AbortSignal;
  readonly cancelled: boolean;
  readonly cancelReason: CancelReason | undefined;
  throwIfCancelled(): void;
  /** Resolves after `ms`, or rejects with Cancelled as soon as the job is cancelled. */
  sleep(ms: number): Promise<void>;
  /** Appends lines to this attempt's log; a failure to write is logged, not thrown. */
  log(...lines: string[]): Promise<void>;
  /** Reports this attempt's progress (0–1) and a message. */
  progress(progress: number, message?: string): Promise<void>;
}

export type Handler<P = any, O = unknown> = (ctx: JobContext<P>) => O | Promise<O>;

export interface WorkerOptions {
  /**
   * The replica's base URL, e.g. http://127.0.0.1:8080, or a list of replicas' URLs: the worker talks to
   * one at a time and moves to the next one when a call gets no answer or a 5xx answer.
   */
  server: string | string[];
  /** A worker (or admin) token; none where the replica has no credentials configured. */
  token?: string;
  /** Names the worker (owner `worker:<workerId>`). Defaults to `<hostname>-<pid>`. */
  workerId?: string;
  /** Jobs run at once. Defaults to 4. */
  concurrency?: number;
  /** How long stop() lets running jobs finish before it cancels and releases them. Defaults to 10,000. */
  shutdownTimeoutMs?: number;
  labels?: Record<string, string>;
  /** Long-poll wait of a fetch. Defaults to 20,000. */
  waitMs?: number;
  client?: Client;
  logger?: Pick<Console, 'info' | 'warn' | 'error'>;
}

export const VERSION: string;

/** Pulls jobs of its registered job types and runs at most `concurrency` at once. */
export class Worker {
  constructor(options: WorkerOptions);
  readonly client: Client;
  readonly workerId: string;
  readonly concurrency: number;
  shutdownTimeoutMs: number;
  /** Registers the handler of a job type; its return value is the job's output (JSON). */
  handle<P = any, O = unknown>(jobType: string, handler: Handler<P, O>): this;
  start(): void;
  /**
   * Starts, waits for one of `signals` (default SIGTERM, SIGINT) or stop(), then shuts down gracefully.
   * Rejects with the ApiError of a fetch answered 400, 401, 403 or 404 (a configuration error: a job type
   * the replica does not run remotely, a refused token), after the same graceful shutdown.
   */
  run(options?: { signals?: string[] }): Promise<void>;
  /** The fetch refusal (status 400, 401, 403 or 404) that stopped fetching, or null. */
  readonly error: ApiError | null;
  /** Stops fetching, lets running jobs finish up to `timeoutMs`, then cancels and releases the rest. */
  stop(timeoutMs?: number): Promise<void>;
}
