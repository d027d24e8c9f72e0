package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"time"

	"github.com/jobq/jobq"
)

// Job is what a handler receives: one run (attempt) of one job — the
// claimed job row, plus its timeout and this replica's id. A handler may set
// the run's output (SetOutput), append to the attempt's log (Log) and report
// its progress (Progress); all three are kept per attempt and shown by the
// API (job_run.go).
type Job struct {
	jobq.ClaimedJob
	Timeout time.Duration // 0: no per-job timeout
	Owner   string        // this replica

	report runReporter // nil outside a scheduler (tests)
	outMu  sync.Mutex
	output json.RawMessage
	spawn  *jobq.Spawn // Spawn's jobs, written with the success

	parents       parentReader // nil outside a scheduler or without the read
	spawnValidate SpawnValidateFunc
}

// Fence returns the run's fencing token.
func (j *Job) Fence() jobq.Fence { return jobq.Fence{ID: j.ID, Attempt: j.Attempt} }

// Handler runs jobs of one job type. Work gets a context that is cancelled
// on the job's timeout, when the run loses its lease, when the job's cancel
// is requested, and on hard shutdown (context.Cause tells which). A nil
// return completes the job; an error fails the attempt (retried with backoff
// while retry_times < max_retry); an error wrapping ErrDiscard fails the job
// at once.
type Handler interface {
	Work(ctx context.Context, job *Job) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, job *Job) error

// Work calls f.
func (f HandlerFunc) Work(ctx context.Context, job *Job) error { return f(ctx, job) }

// TxHandler is a Handler with transactional completion: after Work returns
// nil, WorkTx runs inside the transaction that commits the fenced
// completion, so its writes commit exactly once — or not at all when the run
// was stale. An error from WorkTx rolls both back and fails the attempt.
// tx is a jobq.Tx (ExecContext, QueryContext, QueryRowContext); on the
// MySQL store it is a *sql.Tx.
type TxHandler interface {
	Handler
	WorkTx(ctx context.Context, tx jobq.Tx, job *Job) error
}

var (
	// ErrDiscard, wrapped in a handler's error, fails the job without retry.
	ErrDiscard = errors.New("jobq: discard job")
	// ErrLeaseLost is the context cause when a run lost its lease (rescued,
	// re-claimed elsewhere, or renewals failed until the lease ran out).
	ErrLeaseLost = errors.New("jobq: lease lost")
	// ErrCancelRequested is the context cause when the job's cancel was requested.
	ErrCancelRequested = errors.New("jobq: cancel requested")
	// ErrShutdown is the context cause on hard shutdown.
	ErrShutdown = errors.New("jobq: scheduler shutting down")
	// ErrJobTimeout is the context cause when timeout_ms elapsed.
	ErrJobTimeout = errors.New("jobq: job timeout")
	// ErrNoHandler fails a run whose job_type has no handler on this replica.
	ErrNoHandler = errors.New("jobq: no handler registered for job type")
)

// PanicError is the attempt error when a handler panicked.
type PanicError struct{ Value any }

func (e *PanicError) Error() string { return fmt.Sprintf("handler panic: %v", e.Value) }

// Registry maps job types to handlers. It is safe for concurrent use.
type Registry struct {
	mu sync.RWMutex
	m  map[string]Handler
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{m: map[string]Handler{}} }

// Register adds h for jobType, replacing any earlier handler. It panics
// when h has a WorkTx method that does not implement TxHandler (an old
// signature taking *sql.Tx, say): such a handler would silently lose its
// transactional completion.
func (r *Registry) Register(jobType string, h Handler) {
	if _, isTx := h.(TxHandler); !isTx && h != nil {
		if m, ok := reflect.TypeOf(h).MethodByName("WorkTx"); ok {
			panic(fmt.Sprintf("scheduler: handler %T for job type %q has WorkTx %s, which does not implement TxHandler "+
				"(want WorkTx(ctx context.Context, tx jobq.Tx, job *scheduler.Job) error)", h, jobType, m.Type))
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[jobType] = h
}

// Lookup returns the handler for jobType.
func (r *Registry) Lookup(jobType string) (Handler, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	h, ok := r.m[jobType]
	return h, ok
}

// ParamsValidator is implemented by handlers that check a job's params when
// it is submitted, so a job its handler cannot run is refused with a 400
// instead of failing (or misbehaving) later.
type ParamsValidator interface {
	// ValidateParams returns the offending field ("params.ms") and the rule
	// it breaks, or "", "" when params (a JSON object) are valid.
	ValidateParams(params json.RawMessage) (field, rule string)
}

// ValidateParams checks params with jobType's handler when it is a
// ParamsValidator; "", "" when they are valid or the handler does not check.
func (r *Registry) ValidateParams(jobType string, params json.RawMessage) (field, rule string) {
	h, ok := r.Lookup(jobType)
	if v, isV := h.(ParamsValidator); ok && isV {
		return v.ValidateParams(params)
	}
	return "", ""
}

// Types returns the registered job types, sorted.
func (r *Registry) Types() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.m))
	for t := range r.m {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}
