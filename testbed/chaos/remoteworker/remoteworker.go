// Package remoteworker is the chaos testbed's Go worker (`jobq chaos-worker`):
// client.Worker running the testbed's remote workloads, remote-effect and
// remote-flaky, and the per-job command `jobq work` runs for them
// (`jobq chaos-worker --exec`). Each run posts its "non_tx" effect before
// its work and its "end" marker after it to the harness's effect recorder
// (JOBQ_CHAOS_EFFECT_URL), which writes them to job_effect on the database
// clock, so the checker counts a remote run's repeated effects and its work
// after a lost lease as it does for the replicas' own handlers.
package remoteworker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq/client"
)

// The remote job types of the chaos workload.
const (
	// Effect records a non_tx effect, sleeps params.ms, records its end.
	Effect = "remote-effect"
	// Flaky is Effect, then fails its first params.failures attempts.
	Flaky = "remote-flaky"
)

// Types are the remote job types, as --remote-type takes them.
var Types = []string{Effect, Flaky}

// Noop is the bench's remote job type: the Go worker and --exec return at
// once, recording nothing.
const Noop = "rnoop"

// Env names the settings of a testbed worker.
const (
	EnvServer      = "JOBQ_SERVER"  // base URL of the first replica
	EnvServers     = "JOBQ_SERVERS" // further replicas, comma-separated (Go worker only)
	EnvWorkerID    = "JOBQ_WORKER_ID"
	EnvTypes       = "JOBQ_TYPES"
	EnvConcurrency = "JOBQ_CONCURRENCY"
	EnvEffectURL   = "JOBQ_CHAOS_EFFECT_URL"
)

// EffectRecord is the body the workers POST to the effect recorder.
type EffectRecord struct {
	JobID   uint64 `json:"job_id"`
	Attempt int    `json:"attempt"`
	Kind    string `json:"kind"` // non_tx or end
	Owner   string `json:"owner"`
}

type params struct {
	Ms       int  `json:"ms"`
	Failures *int `json:"failures"`
}

var hc = &http.Client{Timeout: 10 * time.Second}

func record(ctx context.Context, url string, r EffectRecord) error {
	b, _ := json.Marshal(r)
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("effect %s: %w", r.Kind, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("effect %s: HTTP %d", r.Kind, resp.StatusCode)
	}
	return nil
}

// work runs one job: non_tx effect, sleep (cut short by ctx), end marker,
// then the flaky failure when the attempt is one of the first failures.
func work(ctx context.Context, url, owner string, id uint64, attempt int, jobType string, raw []byte) (any, error) {
	var p params
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, client.NoRetry(fmt.Errorf("params: %w", err))
		}
	}
	if err := record(ctx, url, EffectRecord{JobID: id, Attempt: attempt, Kind: "non_tx", Owner: owner}); err != nil {
		return nil, err
	}
	t := time.NewTimer(time.Duration(p.Ms) * time.Millisecond)
	select {
	case <-ctx.Done():
		t.Stop()
		return nil, context.Cause(ctx)
	case <-t.C:
	}
	if err := record(ctx, url, EffectRecord{JobID: id, Attempt: attempt, Kind: "end", Owner: owner}); err != nil {
		return nil, err
	}
	failures := 1
	if p.Failures != nil {
		failures = *p.Failures
	}
	if jobType == Flaky && attempt <= failures {
		return nil, fmt.Errorf("flaky: attempt %d of the first %d fails by design", attempt, failures)
	}
	return map[string]int{"ms": p.Ms}, nil
}

// Run is the Go worker: client.Worker with Server, Servers (failover),
// the worker id, types and concurrency from the environment, until ctx ends.
func Run(ctx context.Context, log *slog.Logger) error {
	url, id := os.Getenv(EnvEffectURL), os.Getenv(EnvWorkerID)
	if (url == "" && os.Getenv(EnvTypes) != Noop) || id == "" || os.Getenv(EnvServer) == "" {
		return fmt.Errorf("chaos-worker: %s, %s and %s are required", EnvServer, EnvWorkerID, EnvEffectURL)
	}
	conc, _ := strconv.Atoi(os.Getenv(EnvConcurrency))
	var servers []string
	if s := os.Getenv(EnvServers); s != "" {
		servers = strings.Split(s, ",")
	}
	w, err := client.NewWorker(client.WorkerConfig{Server: os.Getenv(EnvServer), Servers: servers, WorkerID: id,
		Concurrency: conc, ShutdownTimeout: 2 * time.Second, PollWait: 5 * time.Second, Logger: log})
	if err != nil {
		return err
	}
	owner := "worker:" + id
	for _, t := range strings.Split(cmpOr(os.Getenv(EnvTypes), strings.Join(Types, ",")), ",") {
		w.Register(t, func(ctx context.Context, job *client.WorkerJob) (any, error) {
			if job.Type == Noop {
				return nil, nil
			}
			return work(ctx, url, owner, job.ID, job.Attempt, job.Type, job.Params)
		})
	}
	return w.Run(ctx)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Exec is the per-job command of `jobq work` (`jobq chaos-worker --exec`):
// the job from JOBQ_JOB_ID, JOBQ_ATTEMPT, JOBQ_JOB_TYPE and JOBQ_PARAMS, the
// owner from JOBQ_WORKER_ID (jobq work's own environment). It prints the
// output as JSON on stdout; a failure is an error (exit 1: retried).
func Exec(ctx context.Context) error {
	if os.Getenv("JOBQ_JOB_TYPE") == Noop {
		_, err := os.Stdout.WriteString("null\n")
		return err
	}
	id, err1 := strconv.ParseUint(os.Getenv("JOBQ_JOB_ID"), 10, 64)
	attempt, err2 := strconv.Atoi(os.Getenv("JOBQ_ATTEMPT"))
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("chaos-worker --exec: JOBQ_JOB_ID and JOBQ_ATTEMPT: %w", err)
	}
	out, err := work(ctx, os.Getenv(EnvEffectURL), "worker:"+os.Getenv(EnvWorkerID), id, attempt,
		os.Getenv("JOBQ_JOB_TYPE"), []byte(os.Getenv("JOBQ_PARAMS")))
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}
