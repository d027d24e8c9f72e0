// HTTP/JSON calls of the jobq API that a worker uses (docs/workers.md).
import { randomUUID } from 'node:crypto';

/** ApiError is an error answer of the API: its HTTP status and the body's code, field and message. */
export class ApiError extends Error {
  constructor(status, code, message, field = '') {
    super(`${status} ${code}: ${message}`);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.field = field;
    this.serverMessage = message;
  }

  /** True for 5xx answers (503 while the database is unavailable): the same call may succeed later. */
  get retryable() {
    return this.status >= 500;
  }
}

/** TransportError is a call that got no HTTP answer (refused, reset, timed out, aborted). */
export class TransportError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = 'TransportError';
  }
}

/** Client calls one jobq replica over HTTP/JSON with the global fetch. */
export class Client {
  #base;
  #token;

  /**
   * @param {string} server base URL, e.g. http://127.0.0.1:8080
   * @param {{token?: string, timeoutMs?: number}} [options]
   */
  constructor(server, { token, timeoutMs = 10_000 } = {}) {
    let url;
    try {
      url = new URL(server);
    } catch {
      url = null;
    }
    if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
      throw new TypeError(`server: must be an http:// or https:// URL, got ${JSON.stringify(server)}`);
    }
    this.#base = url.href.replace(/\/+$/, '');
    this.#token = token || undefined;
    this.timeoutMs = timeoutMs;
  }

  submit(jobType, params, { jobKey, priority, maxRetry, runAt, timeoutMs } = {}) {
    const body = { job_key: jobKey ?? randomUUID(), job_type: jobType };
    if (params !== undefined) body.params = params;
    if (priority !== undefined) body.priority = priority;
    if (maxRetry !== undefined) body.max_retry = maxRetry;
    if (runAt !== undefined) body.run_at = runAt instanceof Date ? runAt.toISOString() : runAt;
    if (timeoutMs !== undefined) body.timeout_ms = timeoutMs;
    return this.call('POST', '/v1/jobs', body);
  }

  /**
   * Submits a workflow (docs/workflows.md): each job a POST /v1/jobs body plus depends_on, the
   * job_keys of its parents in the workflow. All jobs are created or none; the same key and body
   * again answer the existing workflow.
   */
  submitWorkflow(workflowKey, jobs) {
    return this.call('POST', '/v1/workflows', { workflow_key: workflowKey, jobs });
  }

  getWorkflow(workflowKey) {
    return this.call('GET', `/v1/workflows/${encodeURIComponent(workflowKey)}`);
  }

  getJob(id) {
    return this.call('GET', `/v1/jobs/${Number(id)}`);
  }

  cancelJob(id) {
    return this.call('POST', `/v1/jobs/${Number(id)}/cancel`, {});
  }

  async fetchJobs({ workerId, jobTypes, maxJobs, waitMs = 20_000, labels, version, signal }) {
    const body = { worker_id: workerId, job_types: jobTypes, max_jobs: maxJobs, wait_ms: waitMs };
    if (labels && Object.keys(labels).length > 0) body.labels = labels;
    if (version) body.version = version;
    const answer = await this.call('POST', '/v1/workers/fetch', body, { signal, timeoutMs: waitMs + this.timeoutMs });
    return answer.jobs ?? [];
  }

  async heartbeat(workerId, taskTokens) {
    const answer = await this.call('POST', '/v1/workers/heartbeat', { worker_id: workerId, task_tokens: taskTokens });
    return answer.results ?? [];
  }

  complete(body) {
    return this.call('POST', '/v1/workers/complete', body);
  }

  async appendLog(taskToken, lines) {
    await this.call('POST', '/v1/workers/log', { task_token: taskToken, lines });
  }

  async reportProgress(taskToken, progress, message = '') {
    await this.call('POST', '/v1/workers/progress', { task_token: taskToken, progress, message });
  }

  /**
   * Sends one request and returns the decoded JSON answer; rejects with ApiError for an error answer
   * and TransportError when no answer came (including an abort through `signal`).
   */
  async call(method, path, body, { signal, timeoutMs } = {}) {
    const headers = { accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (this.#token) headers.authorization = `Bearer ${this.#token}`;
    const signals = [AbortSignal.timeout(timeoutMs ?? this.timeoutMs)];
    if (signal) signals.push(signal);
    let res;
    let text;
    try {
      res = await fetch(this.#base + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: anySignal(signals),
      });
      text = await res.text();
    } catch (err) {
      throw new TransportError(`${method} ${path}: ${err?.cause?.code ?? err?.name ?? 'Error'}: ${err?.message}`, { cause: err });
    }
    let decoded;
    try {
      decoded = text ? JSON.parse(text) : {};
    } catch {
      decoded = undefined;
    }
    const isObject = decoded !== null && typeof decoded === 'object' && !Array.isArray(decoded);
    if (res.ok && isObject) return decoded;
    if (res.ok) throw new ApiError(res.status, 'bad_answer', `${method} ${path}: answer is not a JSON object`);
    const err = isObject ? decoded.error : undefined;
    if (err && typeof err === 'object') {
      throw new ApiError(res.status, String(err.code ?? ''), String(err.message ?? ''), String(err.field ?? ''));
    }
    throw new ApiError(res.status, `http_${res.status}`, text.slice(0, 200).trim() || res.statusText);
  }
}

function anySignal(signals) {
  if (typeof AbortSignal.any === 'function') return AbortSignal.any(signals);
  const controller = new AbortController();
  for (const s of signals) {
    if (s.aborted) {
      controller.abort(s.reason);
      break;
    }
    s.addEventListener('abort', () => controller.abort(s.reason), { once: true });
  }
  return controller.signal;
}
