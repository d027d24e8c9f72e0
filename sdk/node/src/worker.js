// The worker runtime: fetch loop, heartbeats, completion retries and graceful shutdown.
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { ApiError, Client, TransportError } from './client.js';

export const VERSION = '0.1.0';

// Completion retries: backoff from 100 ms doubling to 5 s (docs/workers.md, rule 3).
const BACKOFF_FIRST_MS = 100;
const BACKOFF_MAX_MS = 5_000;

// A fetch answered with one of these is a configuration error (a job type that is not remote, a wrong or
// missing token, no worker protocol on that server): every retry would get the same, so the worker stops.
const FETCH_REFUSED = new Set([400, 401, 403, 404]);

// The attempt's log takes lines of at most 4,096 bytes and 65,536 bytes in all; a handler's stack is cut
// to fit in a quarter of that, keeping its start (the error and the innermost frames).
const LOG_LINE_BYTES = 4_096;
const TRACE_LOG_BYTES = 16_384;

/** The failure's error for a thrown value: its type and message (`TypeError: …`). */
export function errorText(err) {
  if (!(err instanceof Error)) return String(err);
  const name = err.name && err.name !== 'Error' ? err.name : err.constructor?.name || 'Error';
  return err.message ? `${name}: ${err.message}` : name;
}

/** The start of text within limit bytes of UTF-8. */
function cut(text, limit) {
  const b = Buffer.from(text, 'utf8');
  return b.length <= limit ? text : b.subarray(0, limit).toString('utf8').replace(/\uFFFD$/, '');
}

/** A thrown value's stack as log lines: each ≤ 4,096 bytes, ≤ 16 KiB in all, the start kept. */
export function traceLines(err) {
  const text = err instanceof Error && typeof err.stack === 'string' ? err.stack : errorText(err);
  const kept = [];
  let total = 0;
  for (const line of text.split('\n').map((l) => cut(l, LOG_LINE_BYTES))) {
    total += Buffer.byteLength(line) + 1;
    if (total > TRACE_LOG_BYTES) {
      kept.push('… (stack trace cut)');
      break;
    }
    kept.push(line);
  }
  return kept;
}

/** The completion fields for a handler's output: a success, or a failure without retry when the output
 * cannot be encoded as JSON (every attempt would give the same). */
function outputOutcome(output) {
  let encoded;
  try {
    encoded = JSON.stringify(output ?? null);
  } catch (err) {
    return { outcome: 'failure', error: `output: must be JSON-serializable: ${errorText(err)}`, retry: false };
  }
  return { outcome: 'success', output: JSON.parse(encoded ?? 'null') };
}

/**
 * Throw JobFailed from a handler to fail the job with this message; `retry: false` fails it now.
 * Any other error fails the job with retry.
 */
export class JobFailed extends Error {
  constructor(message, { retry = true } = {}) {
    super(message);
    this.name = 'JobFailed';
    this.retry = retry;
  }
}

/** Cancelled is thrown by JobContext.throwIfCancelled and sleep once the job's work must stop. */
export class Cancelled extends JobFailed {
  constructor(reason = '') {
    super('canceled');
    this.name = 'Cancelled';
    this.reason = reason;
  }
}

/** JobContext is what a handler gets: the job, an AbortSignal, and the attempt's log and progress. */
export class JobContext {
  #token;
  #client;
  #controller = new AbortController();

  constructor(job, client, logger) {
    this.job = job;
    this.id = job.id;
    this.jobKey = job.job_key;
    this.jobType = job.job_type;
    this.params = job.params ?? {};
    this.attempt = job.attempt;
    // A workflow job's parents as the fetch answered them (job_id, job_key, status, output), by job_key.
    this.parents = Object.fromEntries((job.parents ?? []).map((p) => [p.job_key, p]));
    this.#token = job.task_token;
    this.#client = client;
    this.logger = logger;
  }

  /** Aborted when the job's cancel is requested, its lease is lost, or the shutdown timeout ran out. */
  get signal() {
    return this.#controller.signal;
  }

  get cancelled() {
    return this.#controller.signal.aborted;
  }

  /** Why the work must stop: 'cancel_requested', 'lost' or 'shutdown'; undefined while it may go on. */
  get cancelReason() {
    return this.cancelled ? this.#controller.signal.reason.reason : undefined;
  }

  throwIfCancelled() {
    if (this.cancelled) throw new Cancelled(this.cancelReason);
  }

  /** Resolves after `ms`, or rejects with Cancelled as soon as the job is cancelled. */
  async sleep(ms) {
    try {
      await sleep(ms, undefined, { signal: this.signal });
    } catch (err) {
      if (this.cancelled) throw new Cancelled(this.cancelReason);
      throw err;
    }
  }

  /** Appends lines to this attempt's log; a log that cannot be written is logged, not thrown. */
  async log(...lines) {
    const split = lines.flatMap((l) => String(l).split('\n'));
    if (split.length === 0) return;
    try {
      await this.#client.appendLog(this.#token, split);
    } catch (err) {
      this.logger.warn(`job ${this.id} attempt ${this.attempt}: log not written: ${err.message}`);
    }
  }

  /** Reports this attempt's progress (0–1) and a message; the replica keeps the last report. */
  async progress(progress, message = '') {
    try {
      await this.#client.reportProgress(this.#token, Number(progress), String(message));
    } catch (err) {
      this.logger.warn(`job ${this.id} attempt ${this.attempt}: progress not written: ${err.message}`);
    }
  }

  get _token() {
    return this.#token;
  }

  _cancel(reason) {
    if (!this.cancelled) this.#controller.abort(new Cancelled(reason));
  }
}

/**
 * Worker pulls jobs of its registered job types from a jobq replica and runs at most `concurrency`
 * of them at once; it never fetches more than it can start.
 */
export class Worker {
  #handlers = new Map();
  #runs = new Map(); // task token → run
  #slotFreed = null;
  #fetchAbort = new AbortController();
  #fetchLoop = null;
  #heartbeatTimer = null;
  #stopping = false;
  #stopped = null;
  #refused = null; // the ApiError of a fetch refused as a configuration error
  #apis; // one Client per replica: server, or each of its list
  #urls;
  #cur = 0; // index into #apis of the replica in use
  #api;

  /**
   * `server` is a replica's base URL or a list of them: the worker talks to one at a time and moves to
   * the next one (round robin) when a call gets no answer or a 5xx answer; heartbeats and completions
   * of held jobs go there too (task tokens are checked in the database, valid at every replica).
   * @param {{server: string | string[], token?: string, workerId?: string, concurrency?: number,
   *   shutdownTimeoutMs?: number, labels?: Record<string,string>, waitMs?: number,
   *   client?: Client, logger?: Pick<Console,'info'|'warn'|'error'>}} options
   */
  constructor({ server, token, workerId, concurrency = 4, shutdownTimeoutMs = 10_000, labels = {}, waitMs = 20_000, client, logger = console }) {
    if (!Number.isInteger(concurrency) || concurrency < 1) {
      throw new RangeError(`concurrency: must be an integer of at least 1, got ${concurrency}`);
    }
    this.#urls = client ? ['(client)'] : Array.isArray(server) ? [...server] : [server];
    if (this.#urls.length === 0) throw new TypeError("server: required (a replica's base URL, or a list of them)");
    this.#apis = client ? [client] : this.#urls.map((s) => new Client(s, { token }));
    this.client = this.#apis[0];
    const call = (name) => (...args) => this.#call(name, args);
    this.#api = {
      fetchJobs: call('fetchJobs'), heartbeat: call('heartbeat'), complete: call('complete'),
      appendLog: call('appendLog'), reportProgress: call('reportProgress'),
    };
    this.workerId = workerId || `${hostname()}-${process.pid}`;
    this.concurrency = concurrency;
    this.shutdownTimeoutMs = shutdownTimeoutMs;
    this.labels = labels;
    this.waitMs = waitMs;
    this.logger = logger;
  }

  /** Calls one Client method on the replica in use; no answer or a 5xx moves to the next replica (the
   * call is not repeated here: the caller's retry goes there). */
  async #call(name, args) {
    const i = this.#cur;
    try {
      return await this.#apis[i][name](...args);
    } catch (err) {
      const fault = err instanceof TransportError || (err instanceof ApiError && err.retryable);
      const stopping = name === 'fetchJobs' && this.#fetchAbort.signal.aborted;
      if (fault && !stopping && this.#apis.length > 1 && this.#cur === i) {
        this.#cur = (i + 1) % this.#apis.length;
        this.logger.warn(`replica ${this.#urls[i]} unreachable; moving to ${this.#urls[this.#cur]}: ${err.message}`);
      }
      throw err;
    }
  }

  /** Registers `fn(ctx) → output` (sync or async) as the handler of `jobType`; the output must be JSON. */
  handle(jobType, fn) {
    if (this.#fetchLoop) throw new Error('handle: the worker has already started');
    if (this.#handlers.has(jobType)) throw new Error(`jobType: ${JSON.stringify(jobType)} already has a handler`);
    this.#handlers.set(jobType, fn);
    return this;
  }

  /** Starts fetching and heartbeating. */
  start() {
    if (this.#handlers.size === 0) throw new Error('start: no handler registered');
    if (this.#fetchLoop) throw new Error('start: already started');
    this.logger.info(`worker ${this.workerId} started: job_types=${[...this.#handlers.keys()].sort().join(',')} ` +
      `concurrency=${this.concurrency} replicas=${this.#urls.join(',')}`);
    this.#fetchLoop = this.#fetchJobs();
    this.#scheduleHeartbeat();
  }

  /**
   * Starts, waits for SIGTERM or SIGINT (or stop()), then shuts down gracefully. A fetch answered 400,
   * 401, 403 or 404 (a job type the replica does not run remotely, a token it refuses) would be answered
   * the same at every retry: the worker logs it once, shuts down as on SIGTERM (running jobs finish or
   * are released) and the promise rejects with that ApiError. Network errors and 5xx answers are retried
   * with backoff.
   */
  async run({ signals = ['SIGTERM', 'SIGINT'] } = {}) {
    const onSignal = () => this.stop();
    for (const s of signals) process.once(s, onSignal);
    try {
      this.start();
      await this.#fetchLoop;
      await this.stop();
    } finally {
      for (const s of signals) process.off(s, onSignal);
    }
    if (this.#refused) throw this.#refused;
  }

  /** The fetch refusal (an ApiError with status 400, 401, 403 or 404) that stopped fetching, or null. */
  get error() {
    return this.#refused;
  }

  /**
   * Stops fetching, lets running jobs finish for up to `timeoutMs` (default shutdownTimeoutMs), then
   * cancels the rest and releases their jobs. Resolves when done; calling it again returns the same promise.
   */
  stop(timeoutMs = this.shutdownTimeoutMs) {
    this.#stopped ??= this.#shutdown(timeoutMs);
    return this.#stopped;
  }

  async #shutdown(timeoutMs) {
    this.logger.info(`worker ${this.workerId}: stopping (shutdown timeout ${timeoutMs} ms)`);
    this.#stopping = true;
    this.#fetchAbort.abort();
    this.#wakeFetch();
    await this.#fetchLoop;
    const running = () => [...this.#runs.values()].filter((r) => r.state !== 'releasing');
    const deadline = sleep(timeoutMs, 'timeout', { ref: false });
    while (running().length > 0) {
      if ((await Promise.race([Promise.race(running().map((r) => r.done)), deadline])) === 'timeout') break;
    }
    const releases = [];
    for (const run of this.#runs.values()) {
      if (run.claim('releasing')) {
        run.ctx._cancel('shutdown');
        releases.push(this.#finishAfter(run, this.#release(run)));
      }
    }
    await Promise.all(releases);
    clearTimeout(this.#heartbeatTimer);
    this.#heartbeatTimer = null;
    this.logger.info(`worker ${this.workerId} stopped`);
  }

  #wakeFetch() {
    const wake = this.#slotFreed;
    this.#slotFreed = null;
    wake?.resolve();
  }

  async #fetchJobs() {
    const jobTypes = [...this.#handlers.keys()].sort();
    let pause = BACKOFF_FIRST_MS;
    while (!this.#stopping) {
      if (this.#runs.size >= this.concurrency) {
        this.#slotFreed ??= Promise.withResolvers ? Promise.withResolvers() : resolvers();
        await this.#slotFreed.promise;
        continue;
      }
      let jobs;
      try {
        jobs = await this.#api.fetchJobs({
          workerId: this.workerId, jobTypes, maxJobs: Math.min(this.concurrency - this.#runs.size, 1_000), waitMs: this.waitMs,
          labels: this.labels, version: `jobq-node/${VERSION}`, signal: this.#fetchAbort.signal,
        });
      } catch (err) {
        if (this.#stopping) break;
        if (err instanceof ApiError && FETCH_REFUSED.has(err.status)) {
          this.logger.error(`worker ${this.workerId}: fetch refused, stopping: ${err.message}`);
          this.#refused = err;
          break;
        }
        this.logger.warn(`worker ${this.workerId}: fetch failed (next try in ${pause} ms): ${err.message}`);
        await sleep(pause, undefined, { signal: this.#fetchAbort.signal }).catch(() => {});
        pause = Math.min(pause * 2, BACKOFF_MAX_MS);
        continue;
      }
      pause = BACKOFF_FIRST_MS;
      // The lease starts at the claim, which a long poll makes just before its answer: time it from the answer.
      const received = performance.now();
      for (const job of jobs) this.#start(job, received);
    }
  }

  #start(job, sent) {
    const ctx = new JobContext(job, this.#api, this.logger);
    const lease = job.lease_ms || 30_000;
    const run = {
      ctx, token: job.task_token, lease, heartbeat: job.heartbeat_ms || lease / 3,
      deadline: sent + lease, lost: false, state: 'running',
      claim(state) {
        if (this.state !== 'running') return false;
        this.state = state;
        return true;
      },
    };
    this.#runs.set(run.token, run);
    if (this.#stopping && run.claim('releasing')) {
      run.done = this.#finishAfter(run, this.#release(run));
      return;
    }
    run.done = this.#execute(run);
  }

  async #execute(run) {
    const { ctx } = run;
    const body = { task_token: run.token };
    try {
      const output = await this.#handlers.get(ctx.jobType)(ctx);
      Object.assign(body, outputOutcome(output));
    } catch (err) {
      if (err instanceof JobFailed) Object.assign(body, { outcome: 'failure', error: err.message, retry: err.retry });
      else {
        Object.assign(body, { outcome: 'failure', error: errorText(err) });
        const trace = traceLines(err);
        this.logger.error(`job ${ctx.id} attempt ${ctx.attempt}: handler threw ${body.error}\n${trace.join('\n')}`);
        if (!run.lost) await ctx.log(...trace);
      }
    }
    if (!run.claim('completing')) return; // released by the shutdown: its result is not reported
    if (run.lost) {
      this.logger.info(`job ${ctx.id} attempt ${ctx.attempt}: lease lost, outcome not reported`);
      this.#done(run);
      return;
    }
    await this.#finishAfter(run, this.#send(run, body));
  }

  async #finishAfter(run, promise) {
    try {
      await promise;
    } finally {
      this.#done(run);
    }
  }

  #done(run) {
    this.#runs.delete(run.token);
    this.#wakeFetch();
  }

  #release(run) {
    return this.#send(run, { task_token: run.token, outcome: 'release', error: 'worker shutting down' });
  }

  /** Sends a completion, the same body on every retry, until the lease deadline. */
  async #send(run, body) {
    const { ctx } = run;
    let delay = BACKOFF_FIRST_MS;
    for (;;) {
      let err;
      try {
        await this.#api.complete(body);
        return;
      } catch (e) {
        err = e;
      }
      if (err instanceof ApiError) {
        if (err.status === 409) {
          this.logger.info(`job ${ctx.id} attempt ${ctx.attempt}: ${body.outcome} not applied: ${err.message}`);
          return;
        }
        if ((err.status === 400 || err.status === 413) && body.outcome === 'success') {
          // The same output is refused on every attempt: no retry.
          this.logger.warn(`job ${ctx.id} attempt ${ctx.attempt}: output refused, reported as failure without retry: ${err.serverMessage}`);
          body = { task_token: run.token, outcome: 'failure', error: err.serverMessage, retry: false };
          continue;
        }
        if (!err.retryable) {
          this.logger.error(`job ${ctx.id} attempt ${ctx.attempt}: ${body.outcome} refused: ${err.message}`);
          return;
        }
      }
      if (run.lost || performance.now() + delay > run.deadline) {
        this.logger.warn(`job ${ctx.id} attempt ${ctx.attempt}: ${body.outcome} not delivered before the lease deadline: ${err.message}`);
        return;
      }
      await sleep(delay);
      delay = Math.min(delay * 2, BACKOFF_MAX_MS);
    }
  }

  #scheduleHeartbeat() {
    const beats = [...this.#runs.values()].map((r) => r.heartbeat);
    const interval = beats.length > 0 ? Math.min(...beats) : 1_000;
    this.#heartbeatTimer = setTimeout(async () => {
      const runs = [...this.#runs.values()].filter((r) => !r.lost);
      for (let i = 0; i < runs.length; i += 1_000) await this.#heartbeat(runs.slice(i, i + 1_000)); // ≤ 1,000 tokens a call
      if (this.#heartbeatTimer !== null) this.#scheduleHeartbeat();
    }, interval);
  }

  async #heartbeat(runs) {
    const sent = performance.now();
    let results;
    try {
      results = await this.#api.heartbeat(this.workerId, runs.map((r) => r.token));
    } catch (err) {
      // Not a loss: the database decides. The outcome is still sent when the work ends, and the
      // replica answers 409 stale if the lease was rescued meanwhile.
      this.logger.warn(`worker ${this.workerId}: heartbeat failed: ${err.message}`);
      return;
    }
    runs.forEach((run, i) => {
      const state = results[i]?.state;
      if (state === 'renewed' || state === 'cancel_requested') run.deadline = sent + run.lease;
      if (state === 'cancel_requested') run.ctx._cancel('cancel_requested');
      else if (state === 'lost') this.#lose(run);
    });
  }

  #lose(run) {
    if (!run.lost) {
      run.lost = true;
      this.logger.warn(`job ${run.ctx.id} attempt ${run.ctx.attempt}: lost its lease: cancelling its work`);
    }
    run.ctx._cancel('lost');
  }
}

function resolvers() {
  let resolve;
  const promise = new Promise((r) => {
    resolve = r;
  });
  return { promise, resolve };
}
