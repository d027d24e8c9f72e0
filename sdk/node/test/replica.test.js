// The library against a real replica: JOBQ_SERVER names one started with --remote-type sdk-test
// (JOBQ_TEST_TYPE overrides the type) and no credentials. Skipped when JOBQ_SERVER is unset.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { ApiError, Cancelled, Client, JobFailed, Worker } from '../src/index.js';
import { quiet } from './stub.js';

const SERVER = process.env.JOBQ_SERVER ?? '';
const TYPE = process.env.JOBQ_TEST_TYPE || 'sdk-test';
const skip = SERVER ? false : 'JOBQ_SERVER is unset: start a replica with --remote-type sdk-test and set JOBQ_SERVER to its URL';
const TERMINAL = ['SUCCESS', 'FAILED', 'CANCELED'];

function setup() {
  const client = new Client(SERVER);
  let started;
  const running = new Promise((r) => { started = r; });
  const worker = new Worker({ server: SERVER, workerId: `node-test-${randomUUID().slice(0, 8)}`, concurrency: 4,
    shutdownTimeoutMs: 2_000, waitMs: 1_000, logger: quiet });
  const parentsSeen = {};
  worker.handle(TYPE, async (ctx) => {
    started();
    const p = ctx.params;
    parentsSeen[ctx.jobKey] = Object.fromEntries(Object.entries(ctx.parents).map(([k, v]) => [k, v.output]));
    if (p.action === 'succeed') {
      await ctx.log('line one', 'line two');
      await ctx.progress(0.5, 'half way');
      return p.output;
    }
    if (p.action === 'fail') throw new JobFailed(p.error, { retry: false });
    await new Promise((r) => ctx.signal.addEventListener('abort', r));
    throw new Cancelled(ctx.cancelReason);
  });
  const submit = (params) => client.submit(TYPE, params, { maxRetry: 0 });
  // Polls the API: the replica offers no push for a job's status over HTTP.
  async function waitStatus(id, statuses = TERMINAL, timeoutMs = 30_000) {
    const end = Date.now() + timeoutMs;
    let got;
    while (Date.now() < end) {
      got = await client.getJob(id);
      if (statuses.includes(got.status)) return got;
      await sleep(50);
    }
    assert.fail(`job ${id} did not reach ${statuses}: ${JSON.stringify(got)}`);
  }
  return { client, worker, running, submit, waitStatus, parentsSeen };
}

test('success, failure and submit', { skip }, async () => {
  const { worker, submit, waitStatus } = setup();
  const ok = await submit({ action: 'succeed', output: { ip: '10.0.0.7' } });
  const bad = await submit({ action: 'fail', error: 'quota exceeded' });
  worker.start();
  try {
    assert.equal((await waitStatus(ok.id)).status, 'SUCCESS');
    const failed = await waitStatus(bad.id);
    assert.equal(failed.status, 'FAILED');
    assert.match(failed.last_error, /quota exceeded/);
  } finally {
    await worker.stop();
  }
});

test('a cancel reaches a running job', { skip }, async () => {
  const { client, worker, running, submit, waitStatus } = setup();
  const job = await submit({ action: 'block' });
  worker.start();
  try {
    await running;
    await client.cancelJob(job.id);
    assert.equal((await waitStatus(job.id)).status, 'CANCELED');
  } finally {
    await worker.stop();
  }
});

test('shutdown releases running work', { skip }, async () => {
  const { client, worker, running, submit } = setup();
  const job = await submit({ action: 'block' });
  worker.start();
  await running;
  await worker.stop(200);
  const got = await client.getJob(job.id);
  assert.equal(got.status, 'WAITING');
  assert.equal(got.retry_times, 0);
  await client.cancelJob(job.id);
});

test('a dead replica in the list is skipped', { skip }, async () => {
  const { createServer } = await import('node:net');
  const srv = createServer().listen(0, '127.0.0.1');
  await new Promise((r) => srv.once('listening', r));
  const dead = `http://127.0.0.1:${srv.address().port}`;
  srv.close();
  const { client, submit, waitStatus } = setup();
  const worker = new Worker({ server: [dead, SERVER], workerId: `node-test-${randomUUID().slice(0, 8)}`,
    shutdownTimeoutMs: 2_000, waitMs: 1_000, logger: quiet }).handle(TYPE, (ctx) => ctx.params.output);
  const jobs = [];
  for (let i = 0; i < 3; i++) jobs.push(await submit({ action: 'succeed', output: { n: i } }));
  worker.start();
  try {
    for (const [i, j] of jobs.entries()) {
      const got = await waitStatus(j.id);
      assert.deepEqual([got.status, got.output], ['SUCCESS', { n: i }]);
    }
  } finally {
    await worker.stop();
  }
  void client;
});

test('a thrown error is recorded with its type', { skip }, async () => {
  const { submit, waitStatus } = setup();
  const worker = new Worker({ server: SERVER, workerId: `node-test-${randomUUID().slice(0, 8)}`,
    shutdownTimeoutMs: 2_000, waitMs: 1_000, logger: quiet }).handle(TYPE, (ctx) => ctx.params.disk.cpus);
  const j = await submit({ action: 'crash' });
  worker.start();
  try {
    const got = await waitStatus(j.id);
    assert.deepEqual([got.status, got.last_error], ['FAILED', "TypeError: Cannot read properties of undefined (reading 'cpus')"]);
  } finally {
    await worker.stop();
  }
});

test('a bad submit names the field', { skip }, async () => {
  const client = new Client(SERVER);
  await assert.rejects(client.submit(TYPE, {}, { priority: 5000 }), (err) => {
    assert.ok(err instanceof ApiError);
    assert.equal(err.status, 400);
    assert.equal(err.field, 'priority');
    return true;
  });
});

test('a workflow child reads its parent\'s output', { skip }, async () => {
  const { client, worker, parentsSeen } = setup();
  const key = `node-wf-${randomUUID().slice(0, 8)}`;
  const wf = await client.submitWorkflow(key, [
    { job_key: `${key}-a`, job_type: TYPE, max_retry: 0, params: { action: 'succeed', output: { from: `${key}-a` } } },
    { job_key: `${key}-b`, job_type: TYPE, max_retry: 0, params: { action: 'succeed' }, depends_on: [`${key}-a`] },
  ]);
  assert.deepEqual(wf.jobs.map((j) => j.status), ['WAITING', 'BLOCKED']);
  worker.start();
  try {
    const end = Date.now() + 30_000;
    while (Date.now() < end && (await client.getWorkflow(key)).status === 'RUNNING') await sleep(50);
    assert.equal((await client.getWorkflow(key)).status, 'SUCCESS');
    assert.deepEqual(parentsSeen[`${key}-b`], { [`${key}-a`]: { from: `${key}-a` } });
  } finally {
    await worker.stop();
  }
});
