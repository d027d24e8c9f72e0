// A scripted HTTP endpoint for the answers a replica gives only under faults (503, 413, lost leases).
import { createServer } from 'node:http';
import { once } from 'node:events';

export class Stub {
  answers = new Map();
  requests = [];
  #waiters = [];

  async start() {
    this.server = createServer(async (req, res) => {
      let raw = '';
      for await (const chunk of req) raw += chunk;
      const body = raw ? JSON.parse(raw) : null;
      this.requests.push([req.url, body]);
      for (const w of [...this.#waiters]) w();
      const queue = this.answers.get(req.url) ?? [[200, {}]];
      let [status, answer] = queue.length > 1 ? queue.shift() : queue[0];
      if (typeof answer === 'function') [status, answer] = await answer(body);
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
    });
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    this.url = `http://127.0.0.1:${this.server.address().port}`;
    return this;
  }

  script(path, ...answers) {
    this.answers.set(path, answers);
  }

  bodies(path) {
    return this.requests.filter(([p]) => p === path).map(([, b]) => b);
  }

  /** Resolves once pred(requests) holds; rejects after timeoutMs. */
  waitFor(pred, timeoutMs = 10_000) {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (!pred(this.requests)) return;
        this.#waiters = this.#waiters.filter((w) => w !== check);
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => reject(new Error('stub: condition not met in time')), timeoutMs);
      this.#waiters.push(check);
      check();
    });
  }

  async close() {
    this.server.closeAllConnections();
    this.server.close();
  }
}

export function job(id, { params = {}, jobType = 't', leaseMs = 30_000, heartbeatMs = 10_000 } = {}) {
  return {
    id, job_key: `k${id}`, job_type: jobType, params, attempt: 1,
    lease_ms: leaseMs, heartbeat_ms: heartbeatMs, task_token: `jqt1.${id}.1.secret`,
  };
}

export const quiet = { info() {}, warn() {}, error() {} };
