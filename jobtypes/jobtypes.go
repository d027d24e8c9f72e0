// Package jobtypes holds jobq's built-in job types for demos and the
// testbed: noop, sleep, flaky, effect and poison.
package jobtypes

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/store"
)

// Built-in job type names.
const (
	Noop   = "noop"
	Sleep  = "sleep"
	Flaky  = "flaky"
	Effect = "effect"
	// Poison SIGKILLs the replica that runs it — the chaos testbed's
	// poison-job scenario. It does so only when the replica's environment
	// has PoisonEnv=1 (set by `jobq chaos`); elsewhere it fails at once,
	// without retries.
	Poison = "poison"
)

// PoisonEnv is the environment variable that arms the poison job type.
const PoisonEnv = "JOBQ_CHAOS_POISON"

// Params are the optional fields the built-in types read from params.
type Params struct {
	// Ms is how long sleep, flaky and effect run, in milliseconds.
	Ms int `json:"ms"`
	// Failures is how many first attempts flaky fails (defaults to 1).
	Failures *int `json:"failures"`
}

// Bounds of the built-in types' params, checked at submit (ValidateParams).
const (
	// MaxMs is the longest run sleep, flaky and effect accept: 24 h.
	MaxMs = 86_400_000
	// MaxFailures is the most first attempts flaky may fail.
	MaxFailures = 1000
)

// ValidateParams checks the params sleep, flaky and effect read: ms an
// integer in [0, MaxMs] and failures an integer in [0, MaxFailures], each
// optional. Other fields are ignored.
func ValidateParams(raw json.RawMessage) (field, rule string) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return "params", "must be a JSON object"
	}
	for _, b := range []struct {
		name string
		max  int64
		unit string
	}{{"ms", MaxMs, " (milliseconds)"}, {"failures", MaxFailures, ""}} {
		v, ok := m[b.name]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || n < 0 || n > b.max {
			return "params." + b.name, fmt.Sprintf("must be an integer in [0, %d]%s, got %.40s", b.max, b.unit, v)
		}
	}
	return "", ""
}

// checked is a built-in handler whose params are validated at submit.
type checked struct{ scheduler.HandlerFunc }

// ValidateParams implements scheduler.ParamsValidator.
func (checked) ValidateParams(raw json.RawMessage) (string, string) { return ValidateParams(raw) }

func parse(job *scheduler.Job) (Params, error) {
	var p Params
	if len(job.Params) > 0 {
		if err := json.Unmarshal(job.Params, &p); err != nil {
			return p, fmt.Errorf("%w: params: %v", scheduler.ErrDiscard, err)
		}
	}
	return p, nil
}

func sleep(ctx context.Context, ms int) error {
	if ms <= 0 {
		return nil
	}
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// Register adds noop, sleep, flaky and effect to reg.
func Register(reg *scheduler.Registry) {
	reg.Register(Noop, scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error { return nil }))
	reg.Register(Sleep, checked{func(ctx context.Context, job *scheduler.Job) error {
		p, err := parse(job)
		if err != nil {
			return err
		}
		return sleep(ctx, p.Ms)
	}})
	reg.Register(Flaky, checked{func(ctx context.Context, job *scheduler.Job) error {
		p, err := parse(job)
		if err != nil {
			return err
		}
		failures := 1
		if p.Failures != nil {
			failures = *p.Failures
		}
		if err := sleep(ctx, p.Ms); err != nil {
			return err
		}
		if job.Attempt <= failures {
			return fmt.Errorf("flaky: attempt %d of the first %d fails by design", job.Attempt, failures)
		}
		return nil
	}})
	reg.Register(Effect, EffectHandler{})
	reg.Register(Poison, scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		if os.Getenv(PoisonEnv) != "1" {
			return fmt.Errorf("%w: poison jobs kill their replica and run only under jobq chaos (%s=1)", scheduler.ErrDiscard, PoisonEnv)
		}
		if err := syscall.Kill(os.Getpid(), syscall.SIGKILL); err != nil {
			return fmt.Errorf("poison: kill own process: %w", err)
		}
		<-ctx.Done() // SIGKILL is not delivered synchronously
		return context.Cause(ctx)
	}))
}

// EffectHandler is the testbed's `effect` type. Work inserts one "non_tx"
// row into job_effect outside any transaction (a side effect that can repeat
// when a replica dies before completing), sleeps params.ms, then inserts one
// "end" row (also outside any transaction) marking when its work ended — the
// chaos checker compares it with the moment the run lost its lease. WorkTx
// inserts one "tx" row inside the transactional completion (exactly once).
type EffectHandler struct{}

// Work records the non-transactional effect, runs for params.ms, and
// records the end of its work. A run cancelled during its sleep (lease
// lost, timeout, cancel) returns before the end marker.
func (EffectHandler) Work(ctx context.Context, job *scheduler.Job) error {
	p, err := parse(job)
	if err != nil {
		return err
	}
	if job.DB == nil {
		return fmt.Errorf("%w: effect needs a database", scheduler.ErrDiscard)
	}
	if err := store.EffectInsert(ctx, job.DB, job.Fence(), "non_tx", job.Owner); err != nil {
		return fmt.Errorf("effect non_tx: %w", err)
	}
	if err := sleep(ctx, p.Ms); err != nil {
		return err
	}
	// The marker records a fact — the work is done — so a cancellation
	// arriving now does not stop its write (nor the success it reports,
	// which the fenced completion judges as before).
	ended := time.Now()
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endMarkerTimeout)
	defer cancel()
	err = store.EffectInsert(ectx, job.DB, job.Fence(), "end", job.Owner)
	if err != nil && store.IsRetryable(err) {
		// The database refuses writes (read-only, a node not ready) or lost
		// the connection: the work is done all the same and the handler
		// succeeds — its outcome write is retried by the scheduler. The
		// marker follows as soon as a write is accepted, back-dated to when
		// the work ended.
		go writeEndMarkerLate(job, ended)
		return nil
	}
	if err != nil {
		return fmt.Errorf("effect end: %w", err)
	}
	return nil
}

// writeEndMarkerLate retries the "end" marker of job's run with capped
// backoff for up to endMarkerTimeout, created_at back-dated to ended.
func writeEndMarkerLate(job *scheduler.Job, ended time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), endMarkerTimeout)
	defer cancel()
	_ = store.RetryPolicy{Initial: 20 * time.Millisecond, Max: 500 * time.Millisecond}.Do(ctx, "effect.end", func() error {
		return store.EffectInsertAgo(ctx, job.DB, job.Fence(), "end", job.Owner, time.Since(ended))
	})
}

// ValidateParams implements scheduler.ParamsValidator.
func (EffectHandler) ValidateParams(raw json.RawMessage) (string, string) { return ValidateParams(raw) }

// endMarkerTimeout bounds the write of the effect type's "end" row.
const endMarkerTimeout = 30 * time.Second

// WorkTx records the transactional effect in the completion's transaction.
func (EffectHandler) WorkTx(ctx context.Context, tx *sql.Tx, job *scheduler.Job) error {
	return store.EffectInsert(ctx, tx, job.Fence(), "tx", job.Owner)
}
