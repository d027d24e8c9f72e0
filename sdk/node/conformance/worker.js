// The conformance worker of docs/workers.md, run by jobq's conformance suite:
//   node sdk/node/conformance/worker.js
// It uses the library in sdk/node/src and reads its settings from the environment.
import { Cancelled, JobFailed, Worker } from '../src/index.js';

function usage(message) {
  process.stderr.write(`${message}\n`);
  process.exit(2);
}

function envInt(name, fallback) {
  const raw = process.env[name] ?? '';
  if (raw === '') return fallback;
  if (!/^\d+$/.test(raw)) usage(`${name}: must be a non-negative integer, got ${JSON.stringify(raw)}`);
  return Number(raw);
}

async function handle(ctx) {
  const p = ctx.params && typeof ctx.params === 'object' ? ctx.params : {};
  switch (p.action) {
    case 'succeed':
      return p.output ?? null;
    case 'fail':
      throw new JobFailed(String(p.error ?? ''), { retry: p.retry !== false });
    case 'sleep':
      await ctx.sleep(Number(p.ms ?? 0));
      return { slept: Number(p.ms ?? 0) };
    case 'block':
      await new Promise((resolve) => {
        if (ctx.signal.aborted) resolve();
        ctx.signal.addEventListener('abort', resolve, { once: true });
      });
      throw new Cancelled(ctx.cancelReason);
    case 'log': {
      const lines = (p.lines ?? []).map(String);
      if (lines.length > 0) await ctx.log(...lines);
      if (p.progress !== undefined) await ctx.progress(Number(p.progress), String(p.message ?? ''));
      return { logged: lines.length };
    }
    case 'big_output':
      return { data: 'x'.repeat(Number(p.bytes ?? 0)) };
    default:
      throw new JobFailed(`params.action: unknown action ${JSON.stringify(p.action)}`, { retry: false });
  }
}

const server = process.env.JOBQ_SERVER ?? '';
if (!server) usage("JOBQ_SERVER: must be set to the replica's base URL");
const types = (process.env.JOBQ_TYPES || 'conformance').split(',').map((t) => t.trim()).filter(Boolean);
const concurrency = envInt('JOBQ_CONCURRENCY', 4);
if (concurrency < 1) usage('JOBQ_CONCURRENCY: must be at least 1');
let worker;
try {
  worker = new Worker({
    server,
    token: process.env.JOBQ_WORKER_TOKEN || undefined,
    workerId: process.env.JOBQ_WORKER_ID || undefined,
    concurrency,
    shutdownTimeoutMs: envInt('JOBQ_SHUTDOWN_TIMEOUT_MS', 10_000),
    logger: { info: (m) => console.error(m), warn: (m) => console.error(m), error: (m) => console.error(m) },
  });
} catch (err) {
  usage(err.message);
}
for (const t of types) worker.handle(t, handle);
try {
  await worker.run();
} catch (err) {
  console.error(`worker stopped: ${err.message}`);
  process.exit(1);
}
process.exit(0);
