// The worker's protocol rules (docs/workers.md, "What a worker library does") against a scripted stub.
import { test, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Cancelled, JobFailed, Worker } from '../src/index.js';
import { createServer } from 'node:net';
import { once } from 'node:events';
import { Stub, job, quiet } from './stub.js';

let stub;
const idle = async () => {
  await sleep(50);
  return [200, { jobs: [] }];
};
const count = (path) => (r) => r.filter(([p]) => p === path).length;
const COMPLETE = '/v1/workers/complete';

beforeEach(async () => {
  stub = await new Stub().start();
});
afterEach(() => stub.close());

function worker(handler, { concurrency = 2, shutdownTimeoutMs = 5_000 } = {}) {
  return new Worker({ server: stub.url, workerId: 'test-1', concurrency, shutdownTimeoutMs, waitMs: 100, logger: quiet })
    .handle('t', handler);
}

function serve(...jobs) {
  stub.script('/v1/workers/fetch', ...jobs.map((j) => [200, { jobs: [j] }]), [200, idle]);
}

test('completion is retried with the same body until applied', async () => {
  serve(job(1));
  const unavailable = [503, { error: { code: 'unavailable', message: 'db' } }];
  stub.script(COMPLETE, unavailable, unavailable, [200, { result: 'applied', job_id: 1, attempt: 1, status: 'SUCCESS' }]);
  const w = worker(async () => ({ ip: '10.0.0.7' }));
  w.start();
  await stub.waitFor((r) => count(COMPLETE)(r) === 3);
  await w.stop();
  const want = { task_token: 'jqt1.1.1.secret', outcome: 'success', output: { ip: '10.0.0.7' } };
  assert.deepEqual(stub.bodies(COMPLETE), [want, want, want]);
});

test('409 stale ends the retries', async () => {
  serve(job(2));
  stub.script(COMPLETE, [409, { error: { code: 'stale', field: 'task_token', message: 'stale' } }]);
  const w = worker(() => {
    throw new JobFailed('boom', { retry: false });
  });
  w.start();
  await stub.waitFor((r) => count(COMPLETE)(r) === 1);
  await w.stop();
  assert.deepEqual(stub.bodies(COMPLETE), [{ task_token: 'jqt1.2.1.secret', outcome: 'failure', error: 'boom', retry: false }]);
});

test('a refused output is reported as a failure with the server message', async () => {
  serve(job(3));
  const msg = 'output: must be at most 65536 bytes, got 70000';
  stub.script(COMPLETE, [413, { error: { code: 'too_large', field: 'output', message: msg } }],
    [200, { result: 'applied', job_id: 3, attempt: 1, status: 'SCHEDULED' }]);
  const w = worker(() => ({ data: 'x'.repeat(70_000) }));
  w.start();
  await stub.waitFor((r) => count(COMPLETE)(r) === 2);
  await w.stop();
  assert.deepEqual(stub.bodies(COMPLETE)[1], { task_token: 'jqt1.3.1.secret', outcome: 'failure', error: msg, retry: false });
});

for (const [name, output, want] of [
  ['a BigInt', { n: 1n }, /^output: must be JSON-serializable: TypeError: .*BigInt/],
  ['a cycle', (() => { const o = {}; o.self = o; return o; })(), /^output: must be JSON-serializable: TypeError: .*circular/],
]) {
  test(`an output with ${name} fails without retry`, async () => {
    serve(job(9));
    const w = worker(() => output);
    w.start();
    await stub.waitFor((r) => count(COMPLETE)(r) === 1);
    await w.stop();
    const [body] = stub.bodies(COMPLETE);
    assert.equal(body.outcome, 'failure');
    assert.equal(body.retry, false);
    assert.match(body.error, want);
  });
}

function recorder() {
  const lines = { info: [], warn: [], error: [] };
  return { lines, info: (m) => lines.info.push(m), warn: (m) => lines.warn.push(m), error: (m) => lines.error.push(m) };
}

test('a thrown error gives its type in the error and its stack in the log', async () => {
  serve(job(10));
  const logger = recorder();
  const w = new Worker({ server: stub.url, workerId: 'test-1', waitMs: 100, logger })
    .handle('t', function resize(ctx) { return ctx.params.disk.cpus; });
  w.start();
  await stub.waitFor((r) => count(COMPLETE)(r) === 1);
  await w.stop();
  const [body] = stub.bodies(COMPLETE);
  assert.equal(body.error, "TypeError: Cannot read properties of undefined (reading 'cpus')");
  const lines = stub.bodies('/v1/workers/log').flatMap((b) => b.lines);
  assert.equal(lines[0], body.error);
  assert.match(lines[1], /at resize /);
  assert.match(logger.lines.error.join('\n'), /at resize /);
  assert.match(logger.lines.info[0], /^worker test-1 started: job_types=t concurrency=4 replicas=http/);
  assert.equal(logger.lines.info.at(-1), 'worker test-1 stopped');
});

test('a stack in the log is bounded', async () => {
  serve(job(11));
  const w = worker(() => {
    const err = new RangeError('y'.repeat(10_000));
    err.stack = `RangeError: ${'y'.repeat(10_000)}\n` + '    at frame (file.js:1:1)\n'.repeat(2_000);
    throw err;
  });
  w.start();
  await stub.waitFor((r) => count(COMPLETE)(r) === 1);
  await w.stop();
  const lines = stub.bodies('/v1/workers/log').flatMap((b) => b.lines);
  assert.ok(Math.max(...lines.map((l) => Buffer.byteLength(l))) <= 4_096);
  assert.ok(lines.reduce((n, l) => n + Buffer.byteLength(l) + 1, 0) <= 16_384 + 64);
  assert.ok(stub.bodies(COMPLETE)[0].error.startsWith('RangeError: yyy'));
});

test('a dead replica first in the list is skipped', async () => {
  const srv = createServer().listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const dead = `http://127.0.0.1:${srv.address().port}`;
  srv.close();
  serve(job(12));
  const logger = recorder();
  const w = new Worker({ server: [dead, stub.url], workerId: 'test-1', waitMs: 100, logger }).handle('t', () => ({ ok: true }));
  w.start();
  await stub.waitFor((r) => count(COMPLETE)(r) === 1);
  await w.stop();
  assert.deepEqual(stub.bodies(COMPLETE)[0].output, { ok: true });
  assert.ok(logger.lines.warn.some((m) => m.includes(`moving to ${stub.url}`)), logger.lines.warn.join('\n'));
});

test('cancel_requested aborts the signal and the job fails as canceled', async () => {
  serve(job(4, { heartbeatMs: 50 }));
  stub.script('/v1/workers/heartbeat', [200, { results: [{ job_id: 4, attempt: 1, state: 'cancel_requested' }]}]);
  const reasons = [];
  const w = worker(async (ctx) => {
    await ctx.sleep(10_000).catch((err) => {
      reasons.push(ctx.cancelReason);
      throw err;
    });
  });
  w.start();
  await stub.waitFor((r) => count(COMPLETE)(r) === 1);
  await w.stop();
  assert.deepEqual(reasons, ['cancel_requested']);
  assert.deepEqual(stub.bodies(COMPLETE), [{ task_token: 'jqt1.4.1.secret', outcome: 'failure', error: 'canceled', retry: true }]);
});

test('a lost lease aborts the work and the outcome is never sent', async () => {
  serve(job(5, { heartbeatMs: 50 }));
  stub.script('/v1/workers/heartbeat', [200, { results: [{ job_id: 5, attempt: 1, state: 'lost' }]}]);
  let ended;
  const done = new Promise((r) => { ended = r; });
  const w = worker(async (ctx) => {
    await new Promise((r) => ctx.signal.addEventListener('abort', r));
    ended(ctx.cancelReason);
    return { late: true };
  });
  w.start();
  assert.equal(await done, 'lost');
  await w.stop();
  assert.deepEqual(stub.bodies(COMPLETE), []);
});

test('a fetch asks for the free slots only', async () => {
  serve(job(6));
  let release;
  const held = new Promise((r) => { release = r; });
  const w = worker(() => held, { concurrency: 2 });
  w.start();
  await stub.waitFor((r) => count('/v1/workers/fetch')(r) >= 3);
  const fetches = stub.bodies('/v1/workers/fetch');
  assert.equal(fetches[0].max_jobs, 2);
  assert.deepEqual(new Set(fetches.slice(1).map((f) => f.max_jobs)), new Set([1]));
  assert.deepEqual(fetches[0].job_types, ['t']);
  assert.equal(fetches[0].worker_id, 'test-1');
  release({});
  await w.stop();
});

test('shutdown lets quick work finish and releases the rest', async () => {
  serve(job(7), job(8));
  let started = 0;
  const w = worker(async (ctx) => {
    started++;
    if (ctx.id === 7) return { quick: true };
    await new Promise((r) => ctx.signal.addEventListener('abort', r));
    throw new Cancelled(ctx.cancelReason);
  }, { shutdownTimeoutMs: 300 });
  w.start();
  await stub.waitFor(() => started === 2 && stub.bodies(COMPLETE).length === 1);
  await w.stop();
  const byToken = Object.fromEntries(stub.bodies(COMPLETE).map((b) => [b.task_token, b]));
  assert.equal(byToken['jqt1.7.1.secret'].outcome, 'success');
  assert.deepEqual(byToken['jqt1.8.1.secret'], { task_token: 'jqt1.8.1.secret', outcome: 'release', error: 'worker shutting down' });
  assert.equal(stub.bodies(COMPLETE).length, 2);
});

test('a fetch refused with 400 stops the worker: the running job finishes and run() rejects', async () => {
  const refused = [400, { error: { code: 'invalid_argument', field: 'job_types', message: '"t" is not a remote job type' } }];
  stub.script('/v1/workers/fetch', [200, { jobs: [job(20)] }], refused);
  const errors = [];
  const w = new Worker({ server: stub.url, workerId: 'test-1', concurrency: 2, shutdownTimeoutMs: 5_000, waitMs: 100,
    logger: { ...quiet, error: (m) => errors.push(m) } }).handle('t', async () => {
    await sleep(300);
    return { done: true };
  });
  await assert.rejects(w.run({ signals: [] }), (err) => err.status === 400 && /not a remote job type/.test(err.message));
  assert.equal(w.error?.status, 400);
  assert.equal(count('/v1/workers/fetch')(stub.requests), 2, 'the refused fetch is not retried');
  assert.deepEqual(stub.bodies(COMPLETE), [{ task_token: 'jqt1.20.1.secret', outcome: 'success', output: { done: true } }]);
  assert.equal(errors.filter((m) => m.includes('not a remote job type')).length, 1, 'the refusal is logged once');
});

test('a fetch answered 503 is retried with backoff', async () => {
  const unavailable = [503, { error: { code: 'unavailable', message: 'db' } }];
  stub.script('/v1/workers/fetch', unavailable, unavailable, [200, idle]);
  const w = worker(() => ({}));
  w.start();
  await stub.waitFor((r) => count('/v1/workers/fetch')(r) >= 4);
  await w.stop();
  assert.equal(w.error, null);
});
