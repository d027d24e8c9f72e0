// The worker runtime: fetch loop, heartbeats, completion retries and graceful shutdown.
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { ApiError, Client } from './client.js';

export const VERSION = '0.1.0';

// Completion retries: backoff from 100 ms doubling to 5 s (docs/workers.md, rule 3).
const BACKOFF_FIRST_MS = 100;
const BACKOFF_MAX_MS = 5_000;

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

  /**
   * @param {{server: string, token?: string, workerId?: string, concurrency?: number,
   *   shutdownTimeoutMs?: number, labels?: Record<string,string>, waitMs?: number,
   *   client?: Client, logger?: Pick<Console,'info'|'warn'|'error'>}} options
   */
  constructor({ server, token, workerId, concurrency = 4, shutdownTimeoutMs = 10_000, labels = {}, waitMs = 20_000, client, logger = console }) {
    if (!Number.isInteger(concurrency) || concurrency < 1) {
      throw new RangeError(`concurrency: must be an integer of at least 1, got ${concurrency}`);
    }
    this.client = client ?? new Client(server, { token });
    this.workerId = workerId || `${hostname()}-${process.pid}`;
    this.concurrency = concurrency;
    this.shutdownTimeoutMs = shutdownTimeoutMs;
    this.labels = labels;
    this.waitMs = waitMs;
    this.logger = logger;
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
    this.#fetchLoop = this.#fetchJobs();
    this.#scheduleHeartbeat();
  }

  /** Starts, waits for SIGTERM or SIGINT (or stop()), then shuts down gracefully. */
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
        jobs = await this.client.fetchJobs({
          workerId: this.workerId, jobTypes, maxJobs: Math.min(this.concurrency - this.#runs.size, 1_000), waitMs: this.waitMs,
          labels: this.labels, version: `jobq-node/${VERSION}`, signal: this.#fetchAbort.signal,
        });
      } catch (err) {
        if (this.#stopping) break;
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
    const ctx = new JobContext(job, this.client, this.logger);
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
      const encoded = JSON.stringify(output ?? null);
      Object.assign(body, { outcome: 'success', output: JSON.parse(encoded) });
    } catch (err) {
      if (err instanceof JobFailed) Object.assign(body, { outcome: 'failure', error: err.message, retry: err.retry });
      else Object.assign(body, { outcome: 'failure', error: err?.message || String(err) });
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
        await this.client.complete(body);
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
          this.logger.warn(`job ${ctx.id} attempt ${ctx.attempt}: output refused, reported as failure: ${err.serverMessage}`);
          body = { task_token: run.token, outcome: 'failure', error: err.serverMessage };
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
      results = await this.client.heartbeat(this.workerId, runs.map((r) => r.token));
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
