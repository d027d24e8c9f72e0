package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jobq/jobq/apitype"
)

// Worker defaults (WorkerConfig).
const (
	// WorkerConcurrencyDefault is how many jobs a worker runs at once.
	WorkerConcurrencyDefault = 4
	// WorkerShutdownTimeoutDefault is how long Run lets running jobs finish
	// after its context is cancelled before it cancels and releases them.
	WorkerShutdownTimeoutDefault = 10 * time.Second
	// WorkerPollWaitDefault is a fetch's long-poll wait (wait_ms).
	WorkerPollWaitDefault = 20 * time.Second
	// WorkerCallTimeoutDefault bounds one heartbeat, completion, log or
	// progress call (a fetch gets its poll wait on top).
	WorkerCallTimeoutDefault = 10 * time.Second
	// WorkerAbandonWaitDefault is how long Run waits, after cancelling the
	// jobs still running at the end of the shutdown timeout, for their
	// handlers to return before it releases them anyway.
	WorkerAbandonWaitDefault = 2 * time.Second
	// WorkerPendingCompletionsDefault bounds the finished jobs whose
	// completion waits for its acknowledgement: as many as one completion
	// batch (and one heartbeat) carries.
	WorkerPendingCompletionsDefault = 1000
	// WorkerDrainWaitDefault is how long a draining worker's fetch waits
	// for the slots its last fetch filled (the replica's DrainWait, for the
	// same reason: fewer, fuller claims).
	WorkerDrainWaitDefault = 3 * time.Millisecond
	// WorkerRunQueueDefault is the most fetched jobs a worker queues for a
	// free slot (the replica's RunQueueDefault was 500 too until its claims
	// followed the handlers' time).
	WorkerRunQueueDefault = 500
	// WorkerRunQueueWaitDefault is how long a worker's run queue may stand
	// still before its jobs are given back (the replica's default).
	WorkerRunQueueWaitDefault = 250 * time.Millisecond
)

// The worker protocol's words (docs/workers.md).
const (
	hbRenewed         = "renewed"          // heartbeat: the lease was renewed
	hbCancelRequested = "cancel_requested" // heartbeat: renewed, and the job's cancel was requested
	hbLost            = "lost"             // heartbeat: this attempt no longer holds the job
	outcomeSuccess    = "success"
	outcomeFailure    = "failure"
	outcomeRelease    = "release"
)

// Completion retry backoff: 100 ms doubling to 5 s (docs/workers.md).
const (
	completeBackoffMin = 100 * time.Millisecond
	completeBackoffMax = 5 * time.Second
)

// Causes of a job's context ending, read with context.Cause(ctx) in a
// handler (errors.Is works on them).
var (
	// ErrCancelRequested: the job's cancel was requested (POST
	// /v1/jobs/{id}/cancel). Return an error: the job ends CANCELED.
	ErrCancelRequested = errors.New("jobq: job cancel requested")
	// ErrLeaseLost: this attempt no longer holds the job (its lease ran out
	// and it was rescued, or it was finished elsewhere). Whatever the
	// handler returns is not reported.
	ErrLeaseLost = errors.New("jobq: lease lost")
	// ErrShutdown: the worker is shutting down and the shutdown timeout
	// passed. A handler that returns an error has its job released (given
	// back WAITING without spending a retry); one that returns an output
	// still completes it.
	ErrShutdown = errors.New("jobq: worker shutting down")
	// ErrJobTimeout: the job's timeout_ms passed. The attempt fails.
	ErrJobTimeout = errors.New("jobq: job timeout")
	// ErrNoRetry, wrapped into a handler's error (fmt.Errorf("…: %w",
	// client.ErrNoRetry), or NoRetry(err) to keep err's text), fails the
	// job now instead of retrying it.
	ErrNoRetry = errors.New("no retry")
)

// NoRetry returns err marked so that its job fails now instead of being
// retried (errors.Is(err, ErrNoRetry) holds); its text stays err's.
func NoRetry(err error) error { return noRetryError{err} }

type noRetryError struct{ error }

func (e noRetryError) Unwrap() error        { return e.error }
func (e noRetryError) Is(target error) bool { return target == ErrNoRetry }

// HandlerFunc runs one job. ctx ends when the job's cancel is requested,
// its lease is lost, its timeout passes or the worker shuts down;
// context.Cause(ctx) says which (ErrCancelRequested, ErrLeaseLost,
// ErrJobTimeout, ErrShutdown). A nil error completes the job with output
// (any value encoding/json can marshal, ≤ 65,536 bytes once encoded; nil
// is JSON null); an error fails the attempt, retried with backoff while
// retries are left unless it wraps ErrNoRetry.
type HandlerFunc func(ctx context.Context, job *WorkerJob) (output any, err error)

// WorkerConfig configures a Worker.
type WorkerConfig struct {
	// Server is the base URL of any replica's API, e.g.
	// http://127.0.0.1:8080. Required.
	Server string
	// Servers are further replicas' base URLs. A worker talks to one
	// replica at a time, starting with Server, and moves to the next one
	// in the list (round robin) when a call fails with a network error or
	// a 5xx answer — a replica that died, froze or is cut off. Task tokens
	// are checked in the database, so any replica takes the heartbeats and
	// completions of jobs another handed out. Defaults to none.
	Servers []string
	// Token is the worker token sent as "Authorization: Bearer <token>".
	// Defaults to none (a replica with no tokens configured).
	Token string
	// WorkerID names this worker (1–128 characters); jobs it runs show
	// owner "worker:<WorkerID>". Defaults to "<hostname>-<pid>".
	WorkerID string
	// Labels are up to 16 key/value pairs shown in the console. Defaults to
	// none.
	Labels map[string]string
	// Version is sent with each fetch (≤ 64 characters). Defaults to
	// "jobq-go/<module version>".
	Version string
	// Concurrency is how many jobs run at once; a fetch asks for the free
	// slots only. A job's slot is free again as soon as its handler
	// returns: its completion is sent, and its lease kept by heartbeats,
	// while the slot runs the next job. Defaults to
	// WorkerConcurrencyDefault (4).
	Concurrency int
	// RunQueue is how many fetched jobs may wait, held and heartbeated, for
	// a free slot, so that a worker draining a long queue of short jobs
	// fetches in batches sized by the backlog rather than by the slots that
	// just freed: a fetch asks for the free slots plus the free queue
	// places. The queue is adaptive, as the replica's is: it offers at most
	// as many places as the worker is expected to start within 100ms — the
	// handlers that returned in the last 100ms, capped by Concurrency ×
	// 100ms / their mean run time — so a worker running long jobs fetches
	// no more than its free slots. Queued jobs start in fetch order; the
	// job's Timeout counts from its start. Defaults to
	// WorkerRunQueueDefault (500); negative disables it.
	RunQueue int
	// RunQueueWait is how long the run queue may stand still (no queued job
	// started) before every queued job is given back (released: WAITING,
	// no retry spent, for any worker to fetch), so a worker never sits on
	// jobs it cannot start soon — long jobs fetched right after short ones.
	// Defaults to WorkerRunQueueWaitDefault (250ms).
	RunQueueWait time.Duration
	// PendingCompletions bounds the finished jobs whose completion has not
	// been acknowledged yet; while that many wait, the worker fetches no
	// more jobs. Defaults to WorkerPendingCompletionsDefault (1,000).
	PendingCompletions int
	// ShutdownTimeout is how long Run lets running jobs finish once its
	// context is cancelled; then it cancels them (cause ErrShutdown) and
	// releases those that return an error. Defaults to
	// WorkerShutdownTimeoutDefault (10s).
	ShutdownTimeout time.Duration
	// PollWait is how long one fetch waits on the replica when no job is
	// due (wait_ms, at most 60s). Defaults to WorkerPollWaitDefault (20s).
	PollWait time.Duration
	// DrainWait is how long a draining worker (its last fetch got all the
	// jobs it asked for: the queue is long) waits for as many free slots as
	// that fetch took before it fetches fewer. Slots free one by one as
	// handlers return; fetching at each free slot means many small fetches,
	// each a round trip and a claim transaction that cost as much as a big
	// one. A worker that is not draining fetches as soon as a slot is free.
	// Defaults to WorkerDrainWaitDefault (3ms); negative disables it.
	DrainWait time.Duration
	// HTTP sends the calls. Defaults to a client without an overall timeout
	// (each call has its own deadline).
	HTTP *http.Client
	// Logger receives the worker's logs (component "worker"). Defaults to
	// slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns c with every zero field set to its default.
func (c WorkerConfig) WithDefaults() WorkerConfig {
	if c.WorkerID == "" {
		host, _ := os.Hostname()
		c.WorkerID = fmt.Sprintf("%s-%d", strings.Trim(host, " "), os.Getpid())
		if len(c.WorkerID) > 128 {
			c.WorkerID = c.WorkerID[len(c.WorkerID)-128:]
		}
	}
	if c.Version == "" {
		c.Version = "jobq-go/" + moduleVersion()
	}
	if c.Concurrency <= 0 {
		c.Concurrency = WorkerConcurrencyDefault
	}
	if c.PendingCompletions <= 0 {
		c.PendingCompletions = WorkerPendingCompletionsDefault
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = WorkerShutdownTimeoutDefault
	}
	if c.PollWait <= 0 {
		c.PollWait = WorkerPollWaitDefault
	}
	if c.DrainWait == 0 {
		c.DrainWait = WorkerDrainWaitDefault
	}
	if c.RunQueue == 0 {
		c.RunQueue = WorkerRunQueueDefault
	}
	if c.RunQueueWait <= 0 {
		c.RunQueueWait = WorkerRunQueueWaitDefault
	}
	if c.HTTP == nil {
		c.HTTP = &http.Client{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports the first setting a replica would refuse.
func (c WorkerConfig) Validate() error {
	switch {
	case c.Server == "":
		return errors.New("server: required (a replica's base URL)")
	case utf8.RuneCountInString(c.WorkerID) > 128:
		return errors.New("worker_id: at most 128 characters")
	case len(c.Labels) > 16:
		return errors.New("labels: at most 16 pairs")
	case utf8.RuneCountInString(c.Version) > 64:
		return errors.New("version: at most 64 characters")
	case c.Concurrency > 1000:
		return errors.New("concurrency: at most 1000 (a fetch's max_jobs)")
	case c.RunQueue > 10000:
		return errors.New("run queue: at most 10000")
	case c.PendingCompletions > 100000:
		return errors.New("pending completions: at most 100000")
	case c.PollWait > time.Minute:
		return errors.New("poll wait: at most 60s")
	}
	return nil
}

func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/jobq/jobq" {
				return d.Version
			}
		}
		if bi.Main.Path == "github.com/jobq/jobq" && bi.Main.Version != "" {
			return bi.Main.Version
		}
	}
	return "devel"
}

// Worker runs jobs of remote job types for a replica: it long-polls for
// due jobs, runs each with its registered handler, renews their leases by
// heartbeat and reports each outcome (docs/workers.md, "What a worker
// library does"). Register the handlers, then call Run.
type Worker struct {
	cfg      WorkerConfig
	apis     []*Client    // Server, then Servers
	cur      atomic.Int64 // index into apis of the replica in use
	log      *slog.Logger
	handlers map[string]HandlerFunc
	types    []string

	mu      sync.Mutex
	held    map[string]*heldJob // by task token: fetched and not yet acknowledged
	running int                 // slots taken: jobs fetched whose handler has not returned
	pending int                 // finished jobs whose completion waits for its acknowledgement
	queue   []*heldJob          // fetched jobs waiting for a free slot, in fetch order (worker_queue.go)
	moved   time.Time           // when a queued job last started, or the queue last became non-empty
	recent  recentRuns          // handlers that returned lately: the run queue's size
	closing bool                // Run's context ended: queued jobs are not started
	qWake   chan struct{}       // a job was queued (buffered 1)
	freed   chan struct{}       // a slot was freed or a completion acknowledged (buffered 1)
	hbWake  chan struct{}       // a job was added (buffered 1)
	wg      sync.WaitGroup      // one per held job

	// The completion sender (worker_complete.go).
	outbox   []*completion  // completions not sent yet
	retries  []*sendCall    // calls to send again after their backoff
	sending  int            // completion calls in flight
	sendWake chan struct{}  // the outbox or sending changed (buffered 1)
	sendWG   sync.WaitGroup // one per completion call in flight
	single   atomic.Bool    // a replica lacks the batch route: one call per completion
}

// heldJob is a job this worker holds the lease of: from its fetch until
// its completion is acknowledged (or refused, or given up).
type heldJob struct {
	job        *WorkerJob
	cancel     context.CancelCauseFunc
	ctx        context.Context // the job's context (cancel ends it)
	done       chan struct{}   // closed when the handler returned
	heartbeat  time.Duration
	lease      time.Duration
	deadline   time.Time // local estimate of lease_until: last renewal + lease
	lost       bool      // a heartbeat answered lost: never complete
	released   bool      // completed by Run's shutdown; the handler's result is dropped
	slot       bool      // takes a run slot (running counts it)
	inQueue    bool      // waits in the run queue for a slot
	completing bool      // its completion is pending (pending counts it)
	dropped    bool      // forgotten: wg.Done was called
}

// NewWorker returns a worker for cfg (defaults applied) or the first
// setting Validate refuses.
func NewWorker(cfg WorkerConfig) (*Worker, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var apis []*Client
	for _, s := range append([]string{cfg.Server}, cfg.Servers...) {
		apis = append(apis, &Client{BaseURL: strings.TrimRight(s, "/"), HTTP: cfg.HTTP, Token: cfg.Token})
	}
	return &Worker{
		cfg: cfg, apis: apis, log: cfg.Logger.With("component", "worker", "worker_id", cfg.WorkerID),
		handlers: map[string]HandlerFunc{}, held: map[string]*heldJob{},
		freed: make(chan struct{}, 1), hbWake: make(chan struct{}, 1), sendWake: make(chan struct{}, 1), qWake: make(chan struct{}, 1),
	}, nil
}

// Register makes h run the jobs of jobType (a type the replicas declare
// remote, `jobq serve --remote-type`). Registering a type twice replaces
// its handler. Call it before Run.
func (w *Worker) Register(jobType string, h HandlerFunc) {
	if _, ok := w.handlers[jobType]; !ok {
		w.types = append(w.types, jobType)
	}
	w.handlers[jobType] = h
}

// WorkerJob is one fetched job, handed to a HandlerFunc.
type WorkerJob struct {
	ID         uint64          // job id
	Key        string          // job_key
	Type       string          // job_type
	Params     json.RawMessage // params as submitted (a JSON object)
	Attempt    int             // this run's attempt number (1 on the first run)
	Priority   int             // 0–1000
	RetryTimes int             // retries spent before this attempt
	MaxRetry   int             // retries allowed
	Timeout    time.Duration   // per-attempt timeout, 0 = none
	RunAt      time.Time       // when the job became due
	// Parents are the job's parents in its workflow, each with its status
	// and recorded output (the fetch's "parents"; docs/workflows.md); nil
	// outside workflows.
	Parents []apitype.ParentOutput

	token string
	w     *Worker
}

// Decode unmarshals the job's params into v.
func (j *WorkerJob) Decode(v any) error {
	if err := json.Unmarshal(j.Params, v); err != nil {
		return fmt.Errorf("params: %w", err)
	}
	return nil
}

// Log appends lines to this attempt's log (POST /v1/workers/log): each
// line ≤ 4,096 bytes, ≤ 65,536 bytes per attempt in all (a call past it
// gets an *APIError 413 and appends nothing). After the attempt lost its
// job the answer is an *APIError 409 stale.
func (j *WorkerJob) Log(ctx context.Context, lines ...string) error {
	if len(lines) == 0 {
		return nil
	}
	return j.w.call(ctx, "/v1/workers/log", apitype.LogRequest{TaskToken: j.token, Lines: lines}, nil)
}

// Progress reports this attempt's progress, 0–1, with a message of ≤ 256
// characters (POST /v1/workers/progress); the last report is kept.
func (j *WorkerJob) Progress(ctx context.Context, progress float64, message string) error {
	return j.w.call(ctx, "/v1/workers/progress", apitype.ProgressRequest{TaskToken: j.token, Progress: &progress, Message: message}, nil)
}

// call POSTs body to path with the call timeout.
func (w *Worker) call(ctx context.Context, path string, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, WorkerCallTimeoutDefault)
	defer cancel()
	err := w.do(ctx, path, body, out)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// do POSTs body to path on the replica in use; a network error or a 5xx
// answer moves the worker to the next replica of Server and Servers (the
// call is not repeated here: the caller's retry goes there).
func (w *Worker) do(ctx context.Context, path string, body, out any) error {
	i := w.cur.Load()
	_, err := w.apis[i].do(ctx, http.MethodPost, path, body, out)
	if err == nil || len(w.apis) == 1 || ctx.Err() != nil {
		return err
	}
	var ae *APIError
	if errors.As(err, &ae) && ae.Status < 500 {
		return err
	}
	next := (i + 1) % int64(len(w.apis))
	if w.cur.CompareAndSwap(i, next) {
		w.log.Warn("replica unreachable; moving to the next one", "from", w.apis[i].BaseURL, "to", w.apis[next].BaseURL, "err", err)
	}
	return err
}

// Run fetches and runs jobs until ctx is cancelled, then shuts down
// gracefully: it stops fetching (a fetch in flight is abandoned, and the
// replica returns what it claimed for it), lets running jobs finish for up
// to ShutdownTimeout, cancels the rest (cause ErrShutdown), releases those
// that do not finish, waits for every completion and returns. It returns
// nil after a shutdown, or an error when no handler is registered or a
// replica refuses the fetch itself (400, 401, 403, 404: a configuration to
// fix, such as a type that is not remote or outside the token's scope).
// Network errors and 5xx answers are retried with backoff. Call Run once.
func (w *Worker) Run(ctx context.Context) error {
	if len(w.types) == 0 {
		return errors.New("worker: no job type registered")
	}
	w.log.Info("worker started", "job_types", strings.Join(w.types, ","), "concurrency", w.cfg.Concurrency)
	hbCtx, hbStop := context.WithCancel(context.Background())
	hbDone := make(chan struct{})
	go func() { defer close(hbDone); w.heartbeatLoop(hbCtx) }()
	sendStop, sendDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(sendDone); w.sendLoop(sendStop) }()
	sweepStop, sweepDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(sweepDone); w.sweepLoop(sweepStop) }()

	runErr := w.fetchLoop(ctx)

	w.releaseQueued()
	close(sweepStop)
	<-sweepDone
	w.shutdown()
	close(sendStop)
	<-sendDone
	w.sendWG.Wait()
	hbStop()
	<-hbDone
	w.log.Info("worker stopped")
	return runErr
}

// fetchLoop fetches while there are free slots, until ctx ends.
func (w *Worker) fetchLoop(ctx context.Context) error {
	backoff := completeBackoffMin
	want := 0 // draining: the slots the last fetch filled
	for ctx.Err() == nil {
		free := w.freeSlots()
		if free == 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-w.freed:
			}
			continue
		}
		if free < want && w.cfg.DrainWait > 0 {
			if free = w.waitSlots(ctx, want, w.cfg.DrainWait); free == 0 {
				continue
			}
		}
		jobs, err := w.fetch(ctx, free)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ae *APIError
			if errors.As(err, &ae) && (ae.Status == 400 || ae.Status == 401 || ae.Status == 403 || ae.Status == 404) {
				w.log.Error("fetch refused", "err", err)
				return fmt.Errorf("worker fetch: %w", err)
			}
			w.log.Warn("fetch failed; retrying", "err", err, "backoff", backoff)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, completeBackoffMax)
			continue
		}
		backoff = completeBackoffMin
		want = 0
		if len(jobs) == free {
			want = free
		}
		for _, fj := range jobs {
			w.start(ctx, fj)
		}
	}
	return nil
}

// waitSlots waits up to d for want free slots and returns the free slots
// then.
func (w *Worker) waitSlots(ctx context.Context, want int, d time.Duration) int {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		free := w.freeSlots()
		if free >= want {
			return free
		}
		select {
		case <-ctx.Done():
			return free
		case <-t.C:
			return free
		case <-w.freed:
		}
	}
}

// freeSlots is how many jobs a fetch may ask for: the free run slots plus
// the free run-queue places (at most a fetch's 1,000), or none while
// PendingCompletions completions wait for their acknowledgement.
func (w *Worker) freeSlots() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pending >= w.cfg.PendingCompletions {
		return 0
	}
	free := max(0, w.cfg.Concurrency-w.running) + max(0, w.placesLocked(time.Now())-len(w.queue))
	return min(free, maxFetchJobs)
}

func (w *Worker) fetch(ctx context.Context, maxJobs int) ([]apitype.FetchedJob, error) {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.PollWait+WorkerCallTimeoutDefault)
	defer cancel()
	var resp apitype.FetchResponse
	waitMs := int(w.cfg.PollWait / time.Millisecond)
	err := w.do(ctx, "/v1/workers/fetch", apitype.FetchRequest{
		WorkerID: w.cfg.WorkerID, Labels: w.cfg.Labels, Version: w.cfg.Version, JobTypes: w.types,
		MaxJobs: maxJobs, WaitMs: &waitMs,
	}, &resp)
	return resp.Jobs, err
}

// start takes a slot for fj and runs its handler; a job fetched while the
// worker is already shutting down is released at once.
func (w *Worker) start(runCtx context.Context, fj apitype.FetchedJob) {
	job := &WorkerJob{
		ID: fj.ID, Key: fj.JobKey, Type: fj.JobType, Params: fj.Params, Attempt: fj.Attempt, Priority: fj.Priority,
		RetryTimes: fj.RetryTimes, MaxRetry: fj.MaxRetry, Timeout: time.Duration(fj.TimeoutMs) * time.Millisecond,
		RunAt: fj.RunAt, Parents: fj.Parents, token: fj.TaskToken, w: w,
	}
	lease := time.Duration(fj.LeaseMs) * time.Millisecond
	hb := time.Duration(fj.HeartbeatMs) * time.Millisecond
	if hb <= 0 {
		hb = max(lease/3, time.Second)
	}
	jobCtx, cancel := context.WithCancelCause(context.Background())
	hj := &heldJob{job: job, ctx: jobCtx, cancel: cancel, done: make(chan struct{}), heartbeat: hb, lease: lease,
		deadline: time.Now().Add(lease)}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.held[fj.TaskToken] = hj
	w.wg.Add(1)
	notify(w.hbWake)
	switch {
	case runCtx.Err() != nil:
		close(hj.done)
		w.queueLocked(hj, apitype.CompleteRequest{TaskToken: job.token, Outcome: outcomeRelease, Error: "worker shutting down"})
	case w.running < w.cfg.Concurrency:
		w.runLocked(hj)
	default:
		if len(w.queue) == 0 {
			w.moved = time.Now()
		}
		hj.inQueue = true
		w.queue = append(w.queue, hj)
		notify(w.qWake)
	}
}

// runLocked gives hj a slot and runs its handler (w.mu is held).
func (w *Worker) runLocked(hj *heldJob) {
	hj.slot = true
	w.running++
	go w.runJob(hj.ctx, hj)
}

// runJob runs the handler and reports its outcome.
func (w *Worker) runJob(ctx context.Context, hj *heldJob) {
	job := hj.job
	h := w.handlers[job.Type]
	if job.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, job.Timeout, ErrJobTimeout)
		defer cancel()
	}
	var out any
	var err error
	began := time.Now()
	if h == nil {
		err = fmt.Errorf("no handler for job type %q: %w", job.Type, ErrNoRetry)
	} else {
		out, err = callHandler(ctx, h, job)
	}
	body := outcomeBody(ctx, job.token, out, err)
	close(hj.done)
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.recent.add(now, now.Sub(began))
	switch {
	case hj.released:
		return // Run's shutdown gave it back already
	case hj.lost:
		w.log.Info("job lost its lease; outcome not reported", "job_id", job.ID, "attempt", job.Attempt)
		w.dropLocked(hj)
	default:
		// The slot is free now; the completion goes to the sender, and the
		// job's lease is renewed by heartbeats until it is acknowledged.
		w.queueLocked(hj, body)
	}
}

// outcomeBody is the completion a handler's result asks for.
func outcomeBody(ctx context.Context, token string, out any, err error) apitype.CompleteRequest {
	if err == nil {
		b, merr := json.Marshal(out)
		if merr == nil {
			return apitype.CompleteRequest{TaskToken: token, Outcome: outcomeSuccess, Output: b}
		}
		err = fmt.Errorf("output: %w: %w", merr, ErrNoRetry)
	}
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrShutdown) {
		return apitype.CompleteRequest{TaskToken: token, Outcome: outcomeRelease, Error: "worker shutting down"}
	}
	retry := !errors.Is(err, ErrNoRetry)
	return apitype.CompleteRequest{TaskToken: token, Outcome: outcomeFailure, Error: err.Error(), Retry: &retry}
}

// callHandler runs h, turning a panic into an error.
func callHandler(ctx context.Context, h HandlerFunc, job *WorkerJob) (out any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("handler panic: %v", p)
		}
	}()
	return h(ctx, job)
}

// shutdown waits for the held jobs (running, or waiting for their
// completion's acknowledgement) up to ShutdownTimeout, cancels the running
// ones with ErrShutdown, waits WorkerAbandonWaitDefault more, releases what
// is still running and waits for every completion to be acknowledged,
// refused or given up at its lease deadline.
func (w *Worker) shutdown() {
	all := make(chan struct{})
	go func() { w.wg.Wait(); close(all) }()
	select {
	case <-all:
		return
	case <-time.After(w.cfg.ShutdownTimeout):
	}
	w.mu.Lock()
	running := make([]*heldJob, 0, len(w.held))
	for _, hj := range w.held {
		running = append(running, hj)
	}
	w.mu.Unlock()
	w.log.Info("shutdown timeout passed; cancelling running jobs", "jobs", len(running))
	for _, hj := range running {
		hj.cancel(ErrShutdown)
	}
	abandon := time.After(WorkerAbandonWaitDefault)
	for _, hj := range running {
		select {
		case <-hj.done:
			continue
		case <-abandon:
		}
		w.mu.Lock()
		skip := hj.lost || hj.released
		select {
		case <-hj.done:
			skip = true // returned meanwhile: runJob reports it
		default:
		}
		if !skip {
			hj.released = true
			w.log.Warn("handler did not return after cancel; releasing its job", "job_id", hj.job.ID)
			w.queueLocked(hj, apitype.CompleteRequest{TaskToken: hj.job.token, Outcome: outcomeRelease, Error: "worker shutting down"})
		}
		w.mu.Unlock()
	}
	<-all
}

// heartbeatLoop renews every held lease in one call per beat, at the
// smallest heartbeat_ms of the held jobs.
func (w *Worker) heartbeatLoop(ctx context.Context) {
	last := time.Now()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		every := w.heartbeatEvery()
		if every > 0 {
			timer.Reset(max(time.Until(last.Add(every)), 0))
		} else {
			timer.Reset(time.Hour)
		}
		select {
		case <-ctx.Done():
			return
		case <-w.hbWake:
			if every == 0 {
				last = time.Now() // a fresh lease: first beat one interval from now
			}
		case <-timer.C:
			if every > 0 {
				last = time.Now()
				w.beat(ctx)
			}
		}
	}
}

func (w *Worker) heartbeatEvery() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var every time.Duration
	for _, hj := range w.held {
		if !hj.lost && (every == 0 || hj.heartbeat < every) {
			every = hj.heartbeat
		}
	}
	return every
}

// beat sends one heartbeat for the held tokens (1,000 per call) and acts
// on each answer.
func (w *Worker) beat(ctx context.Context) {
	w.mu.Lock()
	var jobs []*heldJob
	for _, hj := range w.held {
		if !hj.lost && !hj.released {
			jobs = append(jobs, hj)
		}
	}
	w.mu.Unlock()
	for len(jobs) > 0 {
		n := min(len(jobs), 1000)
		w.beatSome(ctx, jobs[:n])
		jobs = jobs[n:]
	}
}

func (w *Worker) beatSome(ctx context.Context, jobs []*heldJob) {
	req := apitype.HeartbeatRequest{WorkerID: w.cfg.WorkerID, TaskTokens: make([]string, len(jobs))}
	for i, hj := range jobs {
		req.TaskTokens[i] = hj.job.token
	}
	sent := time.Now()
	var resp apitype.HeartbeatResponse
	if err := w.call(ctx, "/v1/workers/heartbeat", req, &resp); err != nil {
		if ctx.Err() == nil {
			w.log.Warn("heartbeat failed", "jobs", len(jobs), "err", err)
		}
		return
	}
	if len(resp.Results) != len(jobs) {
		w.log.Warn("heartbeat answer has the wrong number of results", "want", len(jobs), "got", len(resp.Results))
	}
	for i, r := range resp.Results {
		if i >= len(jobs) {
			break
		}
		hj := jobs[i]
		w.mu.Lock()
		switch r.State {
		case hbRenewed, hbCancelRequested:
			hj.deadline = sent.Add(hj.lease)
		case hbLost:
			hj.lost = true
		}
		completing, dropped := hj.completing, hj.dropped
		w.mu.Unlock()
		switch {
		case dropped: // its completion was answered while this heartbeat was out
		case r.State == hbCancelRequested:
			hj.cancel(ErrCancelRequested)
		case r.State == hbLost && completing:
			// Its completion was sent or is about to be: most often it was
			// applied while this heartbeat was out. One not sent yet is
			// dropped.
			w.log.Debug("heartbeat answered lost for a job whose completion is pending", "job_id", hj.job.ID, "attempt", hj.job.Attempt)
			w.wakeSender()
		case r.State == hbLost:
			w.log.Warn("job lost its lease; cancelling it", "job_id", hj.job.ID, "attempt", hj.job.Attempt)
			hj.cancel(ErrLeaseLost)
		}
	}
}
