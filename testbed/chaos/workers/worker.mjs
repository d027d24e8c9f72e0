// The chaos testbed's Node worker: the library in sdk/node/src running the testbed's remote
// workloads (remote-effect, remote-flaky) under `jobq chaos --executor remote`. Settings as
// worker.py: JOBQ_SERVER, JOBQ_WORKER_ID, JOBQ_TYPES, JOBQ_CONCURRENCY, JOBQ_CHAOS_EFFECT_URL.
import { JobFailed, Worker } from '../../../sdk/node/src/index.js';

const effectURL = process.env.JOBQ_CHAOS_EFFECT_URL;
const workerId = process.env.JOBQ_WORKER_ID;

async function effect(ctx, kind) {
  const res = await fetch(effectURL, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ job_id: ctx.id, attempt: ctx.attempt, kind, owner: `worker:${workerId}` }),
    signal: AbortSignal.timeout(10_000),
  });
  await res.text();
  if (!res.ok) throw new Error(`effect ${kind}: HTTP ${res.status}`);
}

async function handle(ctx) {
  const p = ctx.params && typeof ctx.params === 'object' ? ctx.params : {};
  const ms = Number(p.ms ?? 0);
  await effect(ctx, 'non_tx');
  await ctx.sleep(ms);
  if (ctx.signal.aborted) throw new JobFailed(`canceled: ${ctx.cancelReason ?? ''}`);
  await effect(ctx, 'end');
  if (ctx.jobType === 'remote-flaky' && ctx.attempt <= Number(p.failures ?? 1)) {
    throw new JobFailed(`flaky: attempt ${ctx.attempt} fails by design`);
  }
  return { ms };
}

const worker = new Worker({
  server: process.env.JOBQ_SERVER,
  workerId,
  concurrency: Number(process.env.JOBQ_CONCURRENCY ?? 8),
  shutdownTimeoutMs: 2000,
  logger: { info: (m) => console.error(m), warn: (m) => console.error(m), error: (m) => console.error(m) },
});
for (const t of process.env.JOBQ_TYPES.split(',')) worker.handle(t, handle);
await worker.run();
process.exit(0);
