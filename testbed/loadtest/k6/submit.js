// jobq submit load for k6 — constant arrival rate (open model).
//
// The same load as `jobq loadtest --rate R --duration D`: R submits per
// second of job type JOB_TYPE, round-robin across TARGETS, for DURATION.
// k6 measures latency from the actual send; its constant-arrival-rate
// executor starts iterations on schedule only while a VU is free, and counts
// the rest as dropped_iterations. The threshold on dropped_iterations keeps
// the percentiles honest: a run that dropped iterations failed to offer the
// load (coordinated omission), so it fails.
//
//   k6 run -e TARGETS=http://127.0.0.1:8080,http://127.0.0.1:8081 \
//          -e RATE=200 -e DURATION=30s loadtest/k6/submit.js
//
// Environment: TARGETS (comma-separated base URLs; default
// http://127.0.0.1:8080), RATE (submits/s; 100), DURATION (30s), JOB_TYPE
// (noop), PARAMS (JSON object; {}), P99_MS (submit p99 threshold; 200),
// MAX_VUS (1000).
import http from 'k6/http';
import exec from 'k6/execution';
import { check } from 'k6';

const targets = (__ENV.TARGETS || 'http://127.0.0.1:8080').split(',').map((t) => t.trim().replace(/\/+$/, ''));
const rate = parseInt(__ENV.RATE || '100', 10);
const jobType = __ENV.JOB_TYPE || 'noop';
const params = JSON.parse(__ENV.PARAMS || '{}');
const run = `k6-${Date.now()}`;

export const options = {
  scenarios: {
    submits: {
      executor: 'constant-arrival-rate',
      rate: rate,
      timeUnit: '1s',
      duration: __ENV.DURATION || '30s',
      preAllocatedVUs: Math.min(Math.max(rate, 10), 500),
      maxVUs: parseInt(__ENV.MAX_VUS || '1000', 10),
    },
  },
  thresholds: {
    http_req_failed: ['rate<0.001'],
    http_req_duration: [`p(99)<${__ENV.P99_MS || '200'}`],
    dropped_iterations: ['count==0'],
    checks: ['rate>0.999'],
  },
};

export function setup() {
  for (const t of targets) {
    const res = http.get(`${t}/readyz`);
    if (res.status !== 200) {
      throw new Error(`${t}/readyz answered ${res.status}: ${res.body}`);
    }
  }
}

export default function () {
  const i = exec.scenario.iterationInTest;
  const body = JSON.stringify({ job_key: `${run}-${i}`, job_type: jobType, params: params });
  const res = http.post(`${targets[i % targets.length]}/v1/jobs`, body, {
    headers: { 'Content-Type': 'application/json' },
    tags: { name: 'POST /v1/jobs' },
  });
  check(res, { 'submit acknowledged (201)': (r) => r.status === 201 });
}
