// Package jobtypes holds the testbed's job types, effect and poison. They
// are not part of the product: a replica registers them only when the
// testbed asks (RegisterTestbed: `jobq serve` with JOBQ_TESTBED=1, as the
// chaos harness, the demo and tests start it; cmd/jobq passes it to
// app.Config.RegisterFunc).
package jobtypes

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/jobq/jobq"
	builtin "github.com/jobq/jobq/jobtypes"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/store"
	"github.com/jobq/jobq/storeerr"
)

// The testbed's job types.
const (
	// Effect records its side effects in job_effect (EffectHandler).
	Effect = "effect"
	// Poison SIGKILLs the replica that runs it — the chaos testbed's
	// poison-job scenario. It does so only when the replica's environment
	// has PoisonEnv=1 (set by `jobq chaos`); elsewhere it fails at once,
	// without retries.
	Poison = "poison"
	// EffectLimited is Effect under another name: the chaos testbed's
	// rate-limited job type (a rate limit binds a job type, so the limited
	// share of a workload needs a type of its own).
	EffectLimited = "effect-limited"
)

// TestbedEnv, set to "1" in a replica's environment, makes `jobq serve`
// register the testbed's job types (RegisterTestbed). The chaos harness and
// the demo set it on the replicas they start.
const TestbedEnv = "JOBQ_TESTBED"

// PoisonEnv is the environment variable that arms the poison job type.
const PoisonEnv = "JOBQ_CHAOS_POISON"

// effectTableDDL creates the testbed's effect table: the effect type writes
// one 'tx' row inside its transactional completion and one 'non_tx' row
// outside it (and an 'end' marker), so both kinds of duplicate can be
// counted. It is the testbed's, not the product schema's (migration 008
// drops it from the product schema).
const effectTableDDL = `CREATE TABLE IF NOT EXISTS job_effect (
    id         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    job_id     BIGINT UNSIGNED NOT NULL,
    attempt    INT          NOT NULL,
    kind       VARCHAR(8)   CHARACTER SET ascii NOT NULL,
    owner      VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    created_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (id),
    KEY idx_job (job_id, kind)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`

// RegisterTestbed creates job_effect in db if it is missing and adds the
// effect type (writing to db) and the poison type to reg. Call it after the
// migrations ran.
func RegisterTestbed(ctx context.Context, reg *scheduler.Registry, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, effectTableDDL); err != nil {
		return fmt.Errorf("testbed: create job_effect: %w", err)
	}
	reg.Register(Effect, EffectHandler{DB: db})
	reg.Register(EffectLimited, EffectHandler{DB: db})
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
	return nil
}

// execer is a *sql.DB or a *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// effectInsert writes one effect row of kind ("tx", "non_tx" or "end") for
// run f, stamped with the database clock.
func effectInsert(ctx context.Context, db execer, f jobq.Fence, kind, owner string) error {
	_, err := db.ExecContext(ctx, "INSERT INTO job_effect (job_id, attempt, kind, owner, created_at) VALUES (?, ?, ?, ?, NOW(6))",
		f.ID, f.Attempt, kind, owner)
	return err
}

// EffectHandler is the testbed's `effect` type. Work inserts one "non_tx"
// row into job_effect outside any transaction (a side effect that can repeat
// when a replica dies before completing), sleeps params.ms, then inserts one
// "end" row (also outside any transaction) marking when its work ended — the
// chaos checker compares it with the moment the run lost its lease. WorkTx
// inserts one "tx" row inside the transactional completion (exactly once).
type EffectHandler struct {
	// DB is where the non-transactional rows are written.
	DB *sql.DB
}

// Work records the non-transactional effect, runs for params.ms, and
// records the end of its work. A run cancelled during its sleep (lease
// lost, timeout, cancel) returns before the end marker.
//
// The end marker's created_at is when the sleep ended on the database
// clock, not when the marker's INSERT ran: it is read as NOW(6) just
// before the sleep (the anchor) plus the local monotonic time from the
// anchor's answer to the sleep's end. So a slow INSERT — a busy database,
// a wait for a pooled connection, a starved replica — does not move it, and
// no replica clock reading is sent (only a duration). It is never later
// than the true end, and earlier by at most the anchor's round trip.
func (h EffectHandler) Work(ctx context.Context, job *scheduler.Job) error {
	p, err := parse(job)
	if err != nil {
		return err
	}
	if err := effectInsert(ctx, h.DB, job.Fence(), "non_tx", job.Owner); err != nil {
		return fmt.Errorf("effect non_tx: %w", err)
	}
	var anchor time.Time
	if err := h.DB.QueryRowContext(ctx, "SELECT NOW(6)").Scan(&anchor); err != nil {
		return fmt.Errorf("effect clock anchor: %w", err)
	}
	anchoredAt := time.Now()
	if err := sleep(ctx, p.Ms); err != nil {
		return err
	}
	// The marker records a fact — the work is done — so a cancellation
	// arriving now does not stop its write (nor the success it reports,
	// which the fenced completion judges as before).
	endedDB := anchor.Add(time.Since(anchoredAt))
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endMarkerTimeout)
	defer cancel()
	err = h.insertEnd(ectx, job, endedDB)
	if err != nil && store.IsRetryable(err) {
		// The database refuses writes (read-only, a node not ready) or lost
		// the connection: the work is done all the same and the handler
		// succeeds — the scheduler retries its outcome write. The marker
		// follows as soon as a write is accepted, with the same time.
		go h.writeEndMarkerLate(job, endedDB)
		return nil
	}
	if err != nil {
		return fmt.Errorf("effect end: %w", err)
	}
	return nil
}

// insertEnd writes the "end" row of job's run with created_at endedDB (a
// database-clock time, see Work).
func (h EffectHandler) insertEnd(ctx context.Context, job *scheduler.Job, endedDB time.Time) error {
	f := job.Fence()
	_, err := h.DB.ExecContext(ctx, "INSERT INTO job_effect (job_id, attempt, kind, owner, created_at) VALUES (?, ?, 'end', ?, ?)",
		f.ID, f.Attempt, job.Owner, endedDB)
	return err
}

// writeEndMarkerLate retries the "end" row of job's run with capped backoff
// for up to endMarkerTimeout.
func (h EffectHandler) writeEndMarkerLate(job *scheduler.Job, endedDB time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), endMarkerTimeout)
	defer cancel()
	_ = storeerr.RetryPolicy{Initial: 20 * time.Millisecond, Max: 500 * time.Millisecond}.Do(ctx, "effect.end", func() error {
		return store.Mark(h.insertEnd(ctx, job, endedDB))
	})
}

// ValidateParams implements scheduler.ParamsValidator.
func (EffectHandler) ValidateParams(raw json.RawMessage) (string, string) {
	return builtin.ValidateFields(raw, "ms")
}

// endMarkerTimeout bounds the write of the effect type's "end" row.
const endMarkerTimeout = 30 * time.Second

// WorkTx records the transactional effect in the completion's transaction.
func (EffectHandler) WorkTx(ctx context.Context, tx jobq.Tx, job *scheduler.Job) error {
	return effectInsert(ctx, tx, job.Fence(), "tx", job.Owner)
}

// parse reads the params the effect type reads (ms), as the built-in types
// do: a body that is not a params object discards the job.
func parse(job *scheduler.Job) (builtin.Params, error) {
	var p builtin.Params
	if len(job.Params) > 0 {
		if err := json.Unmarshal(job.Params, &p); err != nil {
			return p, fmt.Errorf("%w: params: %v", scheduler.ErrDiscard, err)
		}
	}
	return p, nil
}

// sleep waits ms milliseconds or until ctx ends (its cause).
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
