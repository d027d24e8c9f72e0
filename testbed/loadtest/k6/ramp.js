// jobq submit ramp for k6 — ramping arrival rate (open model).
//
// The k6 counterpart of `jobq loadtest --stages 50:10s,100:10s,200:10s`:
// STAGES is the same RATE:DURATION list. k6 ramps linearly to each stage's
// rate, where jobq loadtest holds each rate as a step, so set the first
// stage short if you want steps. After the submits, a short sampler reads
// the newest jobs back (GET /v1/jobs) and reports pickup as a Trend: the
// DB-clock interval create_time → started_at (no clock offset involved).
//
//   k6 run -e TARGETS=http://127.0.0.1:8080 -e STAGES=50:10s,100:10s,200:10s loadtest/k6/ramp.js
//
// Environment: TARGETS, STAGES (50:10s,100:10s,200:10s), JOB_TYPE (noop),
// P99_MS (submit p99 threshold; 200), PICKUP_P99_MS (1000), MAX_VUS (1000).
import http from 'k6/http';
import exec from 'k6/execution';
import { check, sleep } from 'k6';
import { Trend } from 'k6/metrics';

const targets = (__ENV.TARGETS || 'http://127.0.0.1:8080').split(',').map((t) => t.trim().replace(/\/+$/, ''));
const stages = (__ENV.STAGES || '50:10s,100:10s,200:10s').split(',').map((s) => {
  const [rate, duration] = s.split(':');
  return { target: parseInt(rate, 10), duration: duration };
});
const jobType = __ENV.JOB_TYPE || 'noop';
const run = `k6r-${Date.now()}`;
const peak = Math.max(...stages.map((s) => s.target));
const pickup = new Trend('jobq_pickup', true);

export const options = {
  scenarios: {
    submits: {
      executor: 'ramping-arrival-rate',
      startRate: stages[0].target,
      timeUnit: '1s',
      stages: stages,
      preAllocatedVUs: Math.min(Math.max(peak, 10), 500),
      maxVUs: parseInt(__ENV.MAX_VUS || '1000', 10),
      exec: 'submit',
    },
  },
  thresholds: {
    'http_req_failed{name:POST /v1/jobs}': ['rate<0.001'],
    'http_req_duration{name:POST /v1/jobs}': [`p(99)<${__ENV.P99_MS || '200'}`],
    dropped_iterations: ['count==0'],
    jobq_pickup: [`p(99)<${__ENV.PICKUP_P99_MS || '1000'}`],
  },
};

export function submit() {
  const i = exec.scenario.iterationInTest;
  const body = JSON.stringify({ job_key: `${run}-${i}`, job_type: jobType, params: {} });
  const res = http.post(`${targets[i % targets.length]}/v1/jobs`, body, {
    headers: { 'Content-Type': 'application/json' },
    tags: { name: 'POST /v1/jobs' },
  });
  check(res, { 'submit acknowledged (201)': (r) => r.status === 201 });
}

// teardown samples the newest 200 jobs of this run (GET /v1/jobs, newest
// first) after letting the replicas drain, and records their pickup.
export function teardown() {
  sleep(2);
  const res = http.get(`${targets[0]}/v1/jobs?job_type=${encodeURIComponent(jobType)}&limit=200`, {
    tags: { name: 'GET /v1/jobs' },
  });
  if (res.status !== 200) {
    return;
  }
  for (const job of res.json('jobs') || []) {
    if (job.job_key.startsWith(run) && job.started_at) {
      pickup.add(ms(job.started_at) - ms(job.create_time));
    }
  }
}

// ms parses an RFC 3339 time with up to nanoseconds into epoch milliseconds.
function ms(t) {
  return Date.parse(t.replace(/(\.\d{3})\d+/, '$1'));
}
