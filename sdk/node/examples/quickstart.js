// Quick start: a worker for job type "resize" (start the replica with --remote-type resize).
import { Client, Worker } from '../src/index.js'; // '@jobq/worker' once installed

const server = process.env.JOBQ_SERVER ?? 'http://127.0.0.1:8080';
const worker = new Worker({ server, concurrency: 4 });

worker.handle('resize', async (ctx) => {
  await ctx.log(`resizing ${ctx.jobKey} to ${ctx.params.cpus} cpus`);
  await ctx.progress(0.5, 'disks resized');
  ctx.throwIfCancelled(); // stop here if the job was cancelled or its lease lost
  return { cpus: ctx.params.cpus };
});

await new Client(server).submit('resize', { cpus: 4 }, { jobKey: 'vm-42' });
await worker.run(); // until SIGTERM or Ctrl-C: running jobs finish, unfinished ones are released
