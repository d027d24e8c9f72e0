package scheduler

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jobq/jobq"
)

// RemoteStore is what remote workers need from the store besides Store:
// the fetch claim, task-token reads, fenced renewals, logs and progress.
// The MySQL adapter (*store.Store) implements it.
type RemoteStore interface {
	JobClaimRemote(ctx context.Context, p jobq.RemoteClaimParams) ([]jobq.ClaimedJob, error)
	JobTokenStates(ctx context.Context, ids []uint64) ([]jobq.TokenState, error)
	LeaseRenewFenced(ctx context.Context, runs []jobq.Fence, lease time.Duration) ([]jobq.LeaseRenewal, error)
	JobCompleteMany(ctx context.Context, cs []jobq.Completion) ([]bool, error)
	JobLogAppend(ctx context.Context, f jobq.Fence, lines []string, check func(jobq.TokenState) error) error
	JobProgressSet(ctx context.Context, r jobq.RunReport, check func(jobq.TokenState) error) error
	ExecutionOutcome(ctx context.Context, f jobq.Fence) (jobq.Outcome, error)
	WorkerRunsInFlight(ctx context.Context) ([]jobq.WorkerRuns, error)
}

// Errors of the remote executor (transports map them to HTTP/gRPC codes).
var (
	// ErrTokenForbidden: the task token's secret is wrong, or its job's type
	// is outside the caller's scope. Nothing changed.
	ErrTokenForbidden = errors.New("jobq: task token refused")
	// ErrTokenStale: the token's attempt no longer holds the job. Nothing changed.
	ErrTokenStale = errors.New("jobq: task token is stale")
	// ErrOutcomeConflict: a different outcome was already applied for the attempt.
	ErrOutcomeConflict = errors.New("jobq: a different outcome was already applied")
	// ErrTokenMalformed: the task token cannot be parsed.
	ErrTokenMalformed = errors.New("jobq: task token is malformed")
	// ErrLogFull: the lines would take the attempt's log past jobq.MaxLogBytes.
	ErrLogFull = jobq.ErrLogFull
)

// RemoteScanInterval is the default Config.RemoteScanInterval: the longest
// a waiting fetch goes without its own claim.
const RemoteScanInterval = time.Second

// remoteExecutor is the executor of lane 1: it runs claimed jobs of the
// remote job types on remote workers. A worker's fetch claims them exactly
// as the scanner claims for the handler pool (same lease, attempt+1, owner
// 'worker:<id>') and hands each to the dispatcher (dispatchFetched), which
// routes it here (execute: into the fetch's answer, with its task token);
// the worker's heartbeats renew their leases, and its completion is written
// by the same fenced store path (JobCompleteMany) as an in-process
// handler's and ends the run through the dispatcher's finishRun. The
// rescuer and the metrics see no difference. Only the secret of the task
// token, drawn at claim time, is the remote executor's own.
type remoteExecutor struct {
	store RemoteStore
	cfg   Config
	types map[string]bool
	retry dbRetrier
	log   *slog.Logger
	// events hands the remote events (EventFetched, EventFetchClaimed,
	// EventRemoteHeartbeat, EventRemoteCompleted) to the scheduler.
	events emitter
	// wake is fired by submits, promotions and retries on this replica: a
	// waiting fetch claims at once.
	wake *broadcast
	// d is the dispatcher: a job a fetch claimed goes to it
	// (dispatchFetched), which routes it to execute; a run's end is counted
	// by its finishRun once the outcome was written (or refused), the same
	// as for a handler's run.
	d *dispatcher
	// capped reports whether a job type has a concurrency limit in this
	// replica's view (limitedClaimer): a run of it that ends frees a place
	// a waiting fetch may claim at once. Nil: none has.
	capped  func(jobType string) bool
	workers *workerBook
	// completions batches concurrent remote completions.
	completions completionBatcher
	// stopped ends waiting fetches (stop).
	stopped  chan struct{}
	stopOnce sync.Once
}

// fetchAnswer is the answer of one fetch: the jobs it claimed, each with
// its task token, as execute hands them over.
type fetchAnswer struct {
	owner string // 'worker:<id>'
	nonce []byte // the lease nonce the claim stored: the task tokens' key
	jobs  []FetchedJob
}

// execute hands r, a job a fetch claimed, to the fetching worker: into the
// fetch's answer with its task token. The worker ends the run with one
// completion (Complete, or the rescuer after its lease), written by
// flushCompletions and counted by finishRun. A run without a fetch (not
// routed here: a replica's claims read lane 0 only) is released unstarted
// through the dispatcher, like a run the handler pool dropped.
func (x *remoteExecutor) execute(r *run) {
	f, cj := r.fetch, r.job.ClaimedJob
	if f == nil {
		x.d.settle(r, nil, releaseUnstarted(r.job, "released: no remote worker fetched it"))
		return
	}
	f.jobs = append(f.jobs, FetchedJob{ClaimedJob: cj, TaskToken: taskToken(cj.Fence(), f.nonce),
		Lease: x.cfg.Lease, Heartbeat: x.cfg.HeartbeatInterval})
}

// stop ends the waiting fetches (they answer with no job) and makes new
// ones answer at once: the replica is stopping.
func (x *remoteExecutor) stop() { x.stopOnce.Do(func() { close(x.stopped) }) }

// Remote is the remote executor's face to the service package: the worker
// protocol of docs/workers.md, after the service checked the request.
type Remote struct{ x *remoteExecutor }

// Remote returns the remote executor (nil when no job type is remote).
func (s *Scheduler) Remote() *Remote {
	if s.disp.remote == nil {
		return nil
	}
	return &Remote{x: s.disp.remote}
}

// FetchParams is one worker's fetch.
type FetchParams struct {
	WorkerID string
	Labels   map[string]string
	Version  string
	Types    []string
	MaxJobs  int
	Wait     time.Duration
}

// FetchedJob is one job a fetch claimed for a worker, with its task token.
type FetchedJob struct {
	jobq.ClaimedJob
	TaskToken string
	Lease     time.Duration
	Heartbeat time.Duration
	// Parents are a workflow job's parents and their outputs.
	Parents []jobq.ParentOutput
}

// IsRemote reports whether jobType is declared remote.
func (r *Remote) IsRemote(jobType string) bool { return r.x.types[jobType] }

// Types returns the declared remote job types, sorted.
func (r *Remote) Types() []string { return slices.Sorted(maps.Keys(r.x.types)) }

// Lease returns the lease a fetch gives.
func (r *Remote) Lease() time.Duration { return r.x.cfg.Lease }

// Fetch claims up to p.MaxJobs due jobs of p.Types for worker p.WorkerID,
// waiting up to p.Wait for one: it claims at once, then again whenever a
// submit, promotion or retry on this replica wakes it and at least every
// RemoteScanInterval, until it took a job, p.Wait passed (no job: nil),
// ctx ended or the replica stops. Jobs claimed for a fetch whose ctx ended
// (the client went away) are released without spending a retry.
func (r *Remote) Fetch(ctx context.Context, p FetchParams) (jobs []FetchedJob, err error) {
	x := r.x
	start := time.Now()
	defer func() {
		result := "empty"
		switch {
		case ctx.Err() != nil:
			result = "canceled"
		case err != nil:
			result = "error"
		case len(jobs) > 0:
			result = "jobs"
		}
		x.events.emit(Event{Kind: EventFetched, Result: result, Duration: time.Since(start), N: len(jobs), Err: err})
	}()
	return r.fetch(ctx, p, start)
}

func (r *Remote) fetch(ctx context.Context, p FetchParams, start time.Time) ([]FetchedJob, error) {
	x := r.x
	x.workers.seen(p, start, true)
	deadline := start.Add(p.Wait)
	owner := jobq.WorkerOwnerPrefix + p.WorkerID
	for {
		woken := x.wake.wait() // before the claim: no wake-up can fall between
		nonce := make([]byte, 16)
		if _, err := rand.Read(nonce); err != nil {
			return nil, fmt.Errorf("fetch: nonce: %w", err)
		}
		jobs, err := withRetryV(ctx, x.retry, "fetch.claim", claimMaxAttempts, func() ([]jobq.ClaimedJob, error) {
			return x.store.JobClaimRemote(ctx, jobq.RemoteClaimParams{Owner: owner, Types: p.Types, Limit: p.MaxJobs, Lease: x.cfg.Lease, Nonce: nonce})
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
		if len(jobs) > 0 {
			x.events.emit(Event{Kind: EventFetchClaimed, Jobs: jobs})
			if ctx.Err() != nil {
				r.releaseClaimed(jobs, "released: the fetch's client went away")
				return nil, ctx.Err()
			}
			f := &fetchAnswer{owner: owner, nonce: nonce, jobs: make([]FetchedJob, 0, len(jobs))}
			for _, j := range jobs {
				x.d.dispatchFetched(j, f)
			}
			r.addParents(ctx, f.jobs)
			x.workers.took(p.WorkerID, len(jobs))
			return f.jobs, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, nil
		}
		t := time.NewTimer(min(left, jittered(x.cfg.RemoteScanInterval, x.cfg.RemoteScanInterval/5)))
		select {
		case <-woken:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-x.stopped:
			t.Stop()
			return nil, nil
		}
		t.Stop()
	}
}

// Release gives back jobs a fetch returned but the transport could not
// deliver (its answer could not be written): WAITING, no retry spent.
func (r *Remote) Release(jobs []FetchedJob) {
	cj := make([]jobq.ClaimedJob, len(jobs))
	for i, j := range jobs {
		cj[i] = j.ClaimedJob
	}
	r.releaseClaimed(cj, "released: the fetch's answer could not be delivered")
}

func (r *Remote) releaseClaimed(jobs []jobq.ClaimedJob, why string) {
	x := r.x
	cs := make([]jobq.Completion, len(jobs))
	for i, j := range jobs {
		cs[i] = jobq.Completion{Fence: j.Fence(), JobType: j.JobType, Outcome: jobq.OutcomeReleased, Error: why, DueAt: j.RunAt,
			ConcurrencyKey: j.ConcurrencyKey}
	}
	ctx, cancel := context.WithTimeout(context.Background(), x.cfg.Lease)
	defer cancel()
	applied, err := withRetryV(ctx, x.retry, "fetch.release", retryUntilDone, func() ([]bool, error) {
		return x.store.JobCompleteMany(ctx, cs)
	})
	if err != nil {
		x.log.Warn("could not release the jobs of an abandoned fetch; their leases will expire and be rescued",
			"component", "remote", "jobs", len(jobs), "err", err)
		return
	}
	for i, c := range cs {
		x.d.finishRun(c, applied[i], nil)
	}
	x.wake.fire()
}

// HeartbeatState is the answer for one task token of a heartbeat.
type HeartbeatState string

// Heartbeat states (docs/workers.md).
const (
	HeartbeatRenewed         HeartbeatState = "renewed"
	HeartbeatCancelRequested HeartbeatState = "cancel_requested"
	HeartbeatLost            HeartbeatState = "lost"
)

// HeartbeatResult is the answer for one task token.
type HeartbeatResult struct {
	JobID      uint64
	Attempt    int
	State      HeartbeatState
	LeaseUntil *time.Time // database clock; nil when lost
}

// Heartbeat renews the leases of tokens in one statement. A token that
// cannot be parsed, whose secret is wrong, whose job is outside allow, or
// whose attempt no longer holds the job is lost; a renewed run whose cancel
// was requested is cancel_requested. The answers are in token order.
func (r *Remote) Heartbeat(ctx context.Context, workerID string, tokens []string, allow func(jobType string) bool) ([]HeartbeatResult, error) {
	out, err := r.heartbeat(ctx, workerID, tokens, allow)
	if err == nil {
		n := map[HeartbeatState]int{}
		for _, o := range out {
			n[o.State]++
		}
		for st, k := range n {
			r.x.events.emit(Event{Kind: EventRemoteHeartbeat, Result: string(st), N: k})
		}
	}
	return out, err
}

func (r *Remote) heartbeat(ctx context.Context, workerID string, tokens []string, allow func(jobType string) bool) ([]HeartbeatResult, error) {
	x := r.x
	x.workers.beat(workerID, time.Now())
	out := make([]HeartbeatResult, len(tokens))
	parsed := make([]parsedToken, len(tokens))
	var ids []uint64
	for i, t := range tokens {
		out[i].State = HeartbeatLost
		pt, err := parseTaskToken(t)
		if err != nil {
			continue
		}
		parsed[i] = pt
		out[i].JobID, out[i].Attempt = pt.ID, pt.Attempt
		ids = append(ids, pt.ID)
	}
	states, err := withRetryV(ctx, x.retry, "heartbeat.read", claimMaxAttempts, func() ([]jobq.TokenState, error) {
		return x.store.JobTokenStates(ctx, ids)
	})
	if err != nil {
		return nil, err
	}
	byID := make(map[uint64]jobq.TokenState, len(states))
	for _, st := range states {
		byID[st.ID] = st
	}
	var fences []jobq.Fence
	var at []int
	for i, pt := range parsed {
		if pt.ID == 0 {
			continue
		}
		st, ok := byID[pt.ID]
		if !ok || st.Status != jobq.StateRunning || st.Attempt != pt.Attempt || !pt.verify(st.Nonce) || (allow != nil && !allow(st.JobType)) {
			continue
		}
		if st.Timeout > 0 && st.Running > st.Timeout+x.cfg.HeartbeatInterval {
			// Past its timeout by more than a heartbeat interval: the
			// worker did not end the run itself (the libraries fail it at
			// the timeout), so the replica fails the attempt as an
			// in-process handler's timeout does, and the token is lost.
			r.timeOut(ctx, tokens[i], st, allow)
			continue
		}
		fences, at = append(fences, pt.fence()), append(at, i)
	}
	if len(fences) == 0 {
		return out, nil
	}
	renewed, err := withRetryV(ctx, x.retry, "heartbeat.renew", claimMaxAttempts, func() ([]jobq.LeaseRenewal, error) {
		return x.store.LeaseRenewFenced(ctx, fences, x.cfg.Lease)
	})
	if err != nil {
		return nil, err
	}
	for k, rn := range renewed {
		i := at[k]
		if !rn.Renewed {
			continue
		}
		until := rn.LeaseUntil
		out[i].LeaseUntil = &until
		out[i].State = HeartbeatRenewed
		if rn.CancelRequested {
			out[i].State = HeartbeatCancelRequested
		}
	}
	return out, nil
}

// timeOut writes a failed attempt for a remote run past its job's
// timeout_ms (the error says so; retried by the job's retry budget, as an
// in-process timeout is), through the fenced completion path: a worker's
// own completion that won the race leaves it a no-op.
func (r *Remote) timeOut(ctx context.Context, token string, st jobq.TokenState, allow func(string) bool) {
	msg := fmt.Sprintf("%s after %s: the worker did not complete the attempt", ErrJobTimeout, st.Timeout)
	if _, err := r.Complete(ctx, CompleteParams{TaskToken: token, Outcome: CompleteFailure, Error: msg, Retry: true, Allow: allow}); err != nil &&
		!errors.Is(err, ErrTokenStale) && !errors.Is(err, ErrOutcomeConflict) {
		r.x.log.Warn("remote run past its timeout not failed", "job_id", st.ID, "attempt", st.Attempt, "err", err)
	}
}

// Outcome kinds of a remote completion (docs/workers.md).
const (
	CompleteSuccess = "success"
	CompleteFailure = "failure"
	CompleteRelease = "release"
)

// CompleteParams is one remote completion, checked by the service.
type CompleteParams struct {
	TaskToken string
	Outcome   string // CompleteSuccess, CompleteFailure or CompleteRelease
	Output    json.RawMessage
	Error     string
	Retry     bool
	// Spawn, for a success: jobs added to the run's workflow with it.
	Spawn *jobq.Spawn
	// Allow reports whether the caller may complete jobs of a job type (nil: any).
	Allow func(jobType string) bool
}

// CompleteResult is an applied completion.
type CompleteResult struct {
	JobID   uint64
	Attempt int
	Status  jobq.JobState // the job's status after the write
}

// Complete writes a worker's outcome through the same fenced path as an
// in-process handler's (JobCompleteMany): applied when written now, or when
// the same outcome was already written for the attempt (a retried
// completion whose answer was lost); ErrTokenStale when the attempt no
// longer holds the job; ErrOutcomeConflict when a different outcome was
// applied; ErrTokenForbidden for a wrong secret or a job type outside
// p.Allow; ErrTokenMalformed; ErrNotInWorkflow for a success with a spawn
// whose job is not part of a workflow. Only an applied completion changes
// anything.
func (r *Remote) Complete(ctx context.Context, p CompleteParams) (CompleteResult, error) {
	a := r.CompleteMany(ctx, []CompleteParams{p})[0]
	return a.Result, a.Err
}

// CompleteAnswer is the answer to one completion of CompleteMany.
type CompleteAnswer struct {
	Result CompleteResult
	// Err is nil (applied), a refusal (ErrTokenStale, ErrOutcomeConflict,
	// ErrTokenForbidden, ErrTokenMalformed, ErrNotInWorkflow, an unknown
	// outcome) or the
	// error that kept it from being written (the database, ctx).
	Err error
}

// CompleteMany writes many workers' outcomes at once: each is answered
// exactly as Complete would answer it alone, at its index. They join the
// same batches as concurrent single completions (one token read, one
// JobCompleteMany, one status read per batch of up to 500), so the stale,
// conflict and lost-acknowledgement rules are the same code. Two
// completions of one task token in ps are not refused here (the service
// refuses them); the second is answered as a repeat of the first.
func (r *Remote) CompleteMany(ctx context.Context, ps []CompleteParams) []CompleteAnswer {
	out := make([]CompleteAnswer, len(ps))
	reqs := make([]*completeReq, 0, len(ps))
	at := make([]int, 0, len(ps))
	for i, p := range ps {
		pt, err := parseTaskToken(p.TaskToken)
		if err == nil {
			switch p.Outcome {
			case CompleteSuccess, CompleteFailure, CompleteRelease:
			default:
				err = fmt.Errorf("complete: unknown outcome %q", p.Outcome)
			}
		}
		if err != nil {
			out[i].Err = err
			continue
		}
		out[i].Result = CompleteResult{JobID: pt.ID, Attempt: pt.Attempt}
		reqs = append(reqs, &completeReq{pt: pt, p: p, done: make(chan completeAns, 1)})
		at = append(at, i)
	}
	r.x.completions.add(reqs, r.x.flushCompletions)
	for k, req := range reqs {
		i := at[k]
		select {
		case a := <-req.done:
			out[i] = CompleteAnswer{Result: a.res, Err: a.err}
		case <-ctx.Done():
			// The batch goes on and writes it (a completion is idempotent);
			// the caller went away.
			out[i].Err = ctx.Err()
		}
	}
	for _, a := range out {
		result := ""
		switch {
		case a.Err == nil:
			result = "applied"
		case errors.Is(a.Err, ErrTokenStale):
			result = "stale"
		case errors.Is(a.Err, ErrOutcomeConflict):
			result = "conflict"
		case errors.Is(a.Err, ErrTokenForbidden):
			result = "forbidden"
		default:
			continue
		}
		r.x.events.emit(Event{Kind: EventRemoteCompleted, Result: result, Err: a.Err})
	}
	return out
}

// completeReq is one remote completion waiting for its batch.
type completeReq struct {
	pt   parsedToken
	p    CompleteParams
	done chan completeAns
}

type completeAns struct {
	res CompleteResult
	err error
}

// completeBatchMax caps the completions one batch writes.
const completeBatchMax = 500

// completeFlushersMax is how many batches of remote completions are written
// at once; while they are busy, the next batch fills.
const completeFlushersMax = 4

// completionBatcher gathers concurrent remote completions into batches
// written with one token read, one JobCompleteMany and one status read,
// like the completer batches the handlers' outcomes: a lone completion is
// written at once, and under load each batch holds what arrived while the
// flushers were busy. A flusher is a goroutine that lives while completions
// are pending.
type completionBatcher struct {
	mu       sync.Mutex
	pending  []*completeReq
	flushers int
}

// add queues reqs and starts flushers for them: one per completeBatchMax
// of them, within completeFlushersMax.
func (b *completionBatcher) add(reqs []*completeReq, flush func([]*completeReq)) {
	if len(reqs) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pending = append(b.pending, reqs...)
	for n := 0; n*completeBatchMax < len(reqs) && b.flushers < completeFlushersMax; n++ {
		b.flushers++
		go b.flushLoop(flush)
	}
}

func (b *completionBatcher) flushLoop(flush func([]*completeReq)) {
	for {
		b.mu.Lock()
		if len(b.pending) == 0 {
			b.flushers--
			b.mu.Unlock()
			return
		}
		n := min(len(b.pending), completeBatchMax)
		batch := b.pending[:n:n]
		b.pending = b.pending[n:]
		b.mu.Unlock()
		flush(batch)
	}
}

// flushCompletions checks and writes one batch of remote completions and
// answers each: tokens checked against one read of their jobs, the
// completions written by JobCompleteMany (the handlers' fenced path), the
// applied ones' statuses read back in one statement, and a refused one
// told stale from conflict by its attempt's recorded outcome.
func (x *remoteExecutor) flushCompletions(batch []*completeReq) {
	ctx, cancel := context.WithTimeout(context.Background(), x.cfg.Lease)
	defer cancel()
	answer := func(req *completeReq, res CompleteResult, err error) {
		req.done <- completeAns{res: res, err: err}
	}
	ids := make([]uint64, 0, len(batch))
	for _, req := range batch {
		ids = append(ids, req.pt.ID)
	}
	states, err := withRetryV(ctx, x.retry, "remote.token", claimMaxAttempts, func() ([]jobq.TokenState, error) {
		return x.store.JobTokenStates(ctx, ids)
	})
	if err != nil {
		for _, req := range batch {
			answer(req, CompleteResult{JobID: req.pt.ID, Attempt: req.pt.Attempt}, err)
		}
		return
	}
	byID := make(map[uint64]jobq.TokenState, len(states))
	for _, st := range states {
		byID[st.ID] = st
	}
	var cs []jobq.Completion
	var reqs []*completeReq
	var before []jobq.TokenState
	for _, req := range batch {
		res := CompleteResult{JobID: req.pt.ID, Attempt: req.pt.Attempt}
		st, ok := byID[req.pt.ID]
		if !ok {
			answer(req, res, ErrTokenStale)
			continue
		}
		if err := checkToken(req.pt, st, req.p.Allow); err != nil {
			answer(req, res, err)
			continue
		}
		if req.p.Spawn != nil && req.p.Outcome == CompleteSuccess && st.WorkflowID == 0 {
			// Refused before anything is written, as Job.Spawn refuses
			// it in process: the run keeps its lease and may complete
			// again without the spawn.
			answer(req, res, ErrNotInWorkflow)
			continue
		}
		cs = append(cs, x.completion(req, st))
		reqs, before = append(reqs, req), append(before, st)
	}
	if len(cs) == 0 {
		return
	}
	applied, err := withRetryV(ctx, x.retry, "remote.complete", claimMaxAttempts, func() ([]bool, error) {
		return x.store.JobCompleteMany(ctx, cs)
	})
	if err != nil {
		for _, req := range reqs {
			answer(req, CompleteResult{JobID: req.pt.ID, Attempt: req.pt.Attempt}, err)
		}
		return
	}
	var appliedIDs []uint64
	wake := false
	for i, c := range cs {
		if before[i].Status == jobq.StateRunning {
			// The run's end is counted as a handler's is (Stats, hooks,
			// metrics, the promoter's wake-up for a retry): a repeat of an
			// already applied completion is not counted again.
			x.d.finishRun(c, applied[i], nil)
		}
		if applied[i] {
			appliedIDs = append(appliedIDs, c.ID)
			wake = wake || c.Outcome == jobq.OutcomeReleased || (c.Retry && c.Backoff <= 0) || c.HasChildren || c.Spawn != nil || c.ConcurrencyKey != "" ||
				(before[i].Status == jobq.StateRunning && x.capped != nil && x.capped(c.JobType))
		}
	}
	if wake {
		x.wake.fire()
	}
	after := map[uint64]jobq.TokenState{}
	if sts, err := x.store.JobTokenStates(ctx, appliedIDs); err == nil {
		for _, st := range sts {
			after[st.ID] = st
		}
	}
	for i, c := range cs {
		req := reqs[i]
		res := CompleteResult{JobID: c.ID, Attempt: c.Attempt}
		if !applied[i] {
			out, err := x.store.ExecutionOutcome(ctx, c.Fence)
			switch {
			case err != nil:
				answer(req, res, err)
			case out.Own():
				answer(req, res, ErrOutcomeConflict)
			default:
				answer(req, res, ErrTokenStale)
			}
			continue
		}
		if st, ok := after[c.ID]; ok && st.Attempt == c.Attempt {
			res.Status = st.Status
		} else {
			res.Status = statusOf(c, before[i])
		}
		answer(req, res, nil)
	}
}

// completion is the jobq.Completion of a checked remote completion.
func (x *remoteExecutor) completion(req *completeReq, st jobq.TokenState) jobq.Completion {
	p := req.p
	c := jobq.Completion{Fence: req.pt.fence(), JobType: st.JobType, Error: p.Error, DueAt: st.RunAt, HasChildren: st.HasChildren,
		ConcurrencyKey: st.ConcurrencyKey}
	switch p.Outcome {
	case CompleteSuccess:
		c.Outcome, c.Output, c.Error, c.Spawn = jobq.OutcomeSuccess, p.Output, "", p.Spawn
	case CompleteFailure:
		c.Outcome = jobq.OutcomeFailed
		if p.Retry && st.RetryTimes < st.MaxRetry {
			c.Retry = true
			c.Backoff = RetryBackoff(st.RetryTimes, x.cfg.RetryBackoffBase, x.cfg.RetryBackoffMax, x.cfg.RetryJitter)
		}
	default:
		c.Outcome = jobq.OutcomeReleased
	}
	return c
}

// statusOf is what applied completion c made its job's status, when the
// row no longer shows it (re-claimed since).
func statusOf(c jobq.Completion, before jobq.TokenState) jobq.JobState {
	switch {
	case before.CancelRequested:
		return jobq.StateCanceled
	case c.Outcome == jobq.OutcomeSuccess:
		return jobq.StateSuccess
	case c.Outcome == jobq.OutcomeReleased:
		return jobq.StateWaiting
	case c.Retry && c.Backoff > 0:
		return jobq.StateScheduled
	case c.Retry:
		return jobq.StateWaiting
	default:
		return jobq.StateFailed
	}
}

func checkToken(pt parsedToken, st jobq.TokenState, allow func(string) bool) error {
	if st.Attempt != pt.Attempt {
		return ErrTokenStale
	}
	if !pt.verify(st.Nonce) || (allow != nil && !allow(st.JobType)) {
		return ErrTokenForbidden
	}
	return nil
}

// AppendLog appends lines to the log of the token's attempt (all or
// nothing): ErrLogFull past jobq.MaxLogBytes, ErrTokenStale once the
// attempt no longer holds the job, ErrTokenForbidden, ErrTokenMalformed.
func (r *Remote) AppendLog(ctx context.Context, token string, lines []string, allow func(string) bool) (jobq.Fence, error) {
	pt, err := parseTaskToken(token)
	if err != nil {
		return jobq.Fence{}, err
	}
	err = withRetry(ctx, r.x.retry, "remote.log", claimMaxAttempts, func() error {
		return r.x.store.JobLogAppend(ctx, pt.fence(), lines, func(st jobq.TokenState) error { return checkToken(pt, st, allow) })
	})
	return pt.fence(), runError(err)
}

// ReportProgress records the token's attempt's progress (the last report
// is kept); errors as AppendLog.
func (r *Remote) ReportProgress(ctx context.Context, token string, progress float64, msg string, allow func(string) bool) (jobq.Fence, error) {
	pt, err := parseTaskToken(token)
	if err != nil {
		return jobq.Fence{}, err
	}
	err = withRetry(ctx, r.x.retry, "remote.progress", claimMaxAttempts, func() error {
		return r.x.store.JobProgressSet(ctx, jobq.RunReport{Fence: pt.fence(), Progress: progress, Message: msg},
			func(st jobq.TokenState) error { return checkToken(pt, st, allow) })
	})
	return pt.fence(), runError(err)
}

func runError(err error) error {
	if errors.Is(err, jobq.ErrRunGone) {
		return ErrTokenStale
	}
	return err
}

// WorkerInfo is one live worker as this replica saw it.
type WorkerInfo struct {
	WorkerID      string
	Labels        map[string]string
	Version       string
	Types         []string
	LastFetch     time.Time
	LastHeartbeat time.Time
	// Fetched is how many jobs its fetches on this replica took.
	Fetched int64
	// RunsInFlight is how many RUNNING jobs it holds (database, all replicas).
	RunsInFlight int
}

// Workers returns the workers seen on this replica within
// workerForgetAfter, with their runs in flight read from the database
// (a worker holding runs but not seen here is listed too).
func (r *Remote) Workers(ctx context.Context) ([]WorkerInfo, error) {
	runs, err := r.x.store.WorkerRunsInFlight(ctx)
	if err != nil {
		return nil, err
	}
	return r.x.workers.list(time.Now(), runs), nil
}

// workerForgetAfter is how long a worker that neither fetched nor
// heartbeat stays listed.
const workerForgetAfter = 2 * time.Minute

// workerBook keeps the workers this replica saw, in memory.
type workerBook struct {
	mu sync.Mutex
	m  map[string]*WorkerInfo
}

func (b *workerBook) seen(p FetchParams, now time.Time, fetch bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.m[p.WorkerID]
	if w == nil {
		if len(b.m) >= 10000 {
			b.pruneLocked(now)
		}
		w = &WorkerInfo{WorkerID: p.WorkerID}
		b.m[p.WorkerID] = w
	}
	w.Labels, w.Version, w.Types = maps.Clone(p.Labels), p.Version, slices.Clone(p.Types)
	if fetch {
		w.LastFetch = now
	}
}

func (b *workerBook) took(id string, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w := b.m[id]; w != nil {
		w.Fetched += int64(n)
	}
}

func (b *workerBook) beat(id string, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w := b.m[id]; w != nil {
		w.LastHeartbeat = now
		return
	}
	if len(b.m) < 10000 {
		b.m[id] = &WorkerInfo{WorkerID: id, LastHeartbeat: now}
	}
}

func (b *workerBook) pruneLocked(now time.Time) {
	for id, w := range b.m {
		if now.Sub(later(w.LastFetch, w.LastHeartbeat)) > workerForgetAfter {
			delete(b.m, id)
		}
	}
}

func (b *workerBook) list(now time.Time, runs []jobq.WorkerRuns) []WorkerInfo {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pruneLocked(now)
	out := make(map[string]WorkerInfo, len(b.m))
	for id, w := range b.m {
		c := *w
		c.Labels, c.Types = maps.Clone(w.Labels), slices.Clone(w.Types)
		out[id] = c
	}
	for _, r := range runs {
		c := out[r.WorkerID]
		c.WorkerID, c.RunsInFlight = r.WorkerID, r.Runs
		out[r.WorkerID] = c
	}
	list := slices.Collect(maps.Values(out))
	slices.SortFunc(list, func(a, b WorkerInfo) int { return strings.Compare(a.WorkerID, b.WorkerID) })
	return list
}

// broadcast wakes every waiting fetch at once: wait returns a channel that
// the next fire closes.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

func (b *broadcast) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

func (b *broadcast) fire() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}

// Task tokens: "jqt1.<job id>.<attempt>.<secret>", the secret being the
// first 16 bytes of HMAC-SHA256(lease nonce, "<id>:<attempt>") in
// unpadded base64url (22 characters).
const (
	taskTokenPrefix    = "jqt1."
	taskTokenSecretLen = 16
	// MaxTaskTokenLen bounds a task token's length (the service checks it).
	MaxTaskTokenLen = 80
)

type parsedToken struct {
	ID      uint64
	Attempt int
	secret  []byte
}

func (p parsedToken) fence() jobq.Fence { return jobq.Fence{ID: p.ID, Attempt: p.Attempt} }

func (p parsedToken) verify(nonce []byte) bool {
	if len(nonce) == 0 {
		return false
	}
	return hmac.Equal(p.secret, tokenSecret(p.fence(), nonce))
}

func tokenSecret(f jobq.Fence, nonce []byte) []byte {
	m := hmac.New(sha256.New, nonce)
	m.Write([]byte(strconv.FormatUint(f.ID, 10) + ":" + strconv.Itoa(f.Attempt)))
	return m.Sum(nil)[:taskTokenSecretLen]
}

func taskToken(f jobq.Fence, nonce []byte) string {
	return taskTokenPrefix + strconv.FormatUint(f.ID, 10) + "." + strconv.Itoa(f.Attempt) + "." +
		base64.RawURLEncoding.EncodeToString(tokenSecret(f, nonce))
}

// ParseTaskToken checks a task token's form and returns its job id and
// attempt (ErrTokenMalformed, naming what is wrong, otherwise). It says
// nothing about the secret.
func ParseTaskToken(t string) (jobq.Fence, error) {
	pt, err := parseTaskToken(t)
	return pt.fence(), err
}

func parseTaskToken(t string) (parsedToken, error) {
	if len(t) > MaxTaskTokenLen || !strings.HasPrefix(t, taskTokenPrefix) {
		return parsedToken{}, fmt.Errorf("%w: must be %q followed by <job id>.<attempt>.<secret>", ErrTokenMalformed, taskTokenPrefix)
	}
	parts := strings.Split(strings.TrimPrefix(t, taskTokenPrefix), ".")
	if len(parts) != 3 {
		return parsedToken{}, fmt.Errorf("%w: must be %q followed by <job id>.<attempt>.<secret>", ErrTokenMalformed, taskTokenPrefix)
	}
	// One spelling per token: decimal digits, no sign, no leading zero.
	id, err := strconv.ParseUint(parts[0], 10, 64)
	if err != nil || id == 0 || !canonicalDecimal(parts[0]) {
		return parsedToken{}, fmt.Errorf("%w: the job id must be a positive integer in decimal, without sign or leading zero", ErrTokenMalformed)
	}
	attempt, err := strconv.Atoi(parts[1])
	if err != nil || attempt < 1 || !canonicalDecimal(parts[1]) {
		return parsedToken{}, fmt.Errorf("%w: the attempt must be a positive integer in decimal, without sign or leading zero", ErrTokenMalformed)
	}
	secret, err := base64.RawURLEncoding.Strict().DecodeString(parts[2])
	if err != nil || len(secret) != taskTokenSecretLen {
		return parsedToken{}, fmt.Errorf("%w: the secret must be %d bytes of unpadded base64url", ErrTokenMalformed, taskTokenSecretLen)
	}
	return parsedToken{ID: id, Attempt: attempt, secret: secret}, nil
}

// canonicalDecimal reports whether s is digits only, without a leading zero.
func canonicalDecimal(s string) bool {
	if s == "" || s[0] == '0' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func newRemoteExecutor(st RemoteStore, cfg Config, retry dbRetrier, log *slog.Logger, events emitter) *remoteExecutor {
	x := &remoteExecutor{store: st, cfg: cfg, types: map[string]bool{}, retry: retry, log: log, events: events,
		wake: &broadcast{}, workers: &workerBook{m: map[string]*WorkerInfo{}}, stopped: make(chan struct{})}
	for _, t := range cfg.RemoteTypes {
		x.types[t] = true
	}
	return x
}

// addParents fills the Parents of the fetched workflow jobs with one read.
// A failed read leaves them empty (the worker can GET its parents).
func (r *Remote) addParents(ctx context.Context, out []FetchedJob) {
	pr, ok := r.x.store.(parentReader)
	if !ok {
		return
	}
	var ids []uint64
	for _, j := range out {
		if j.WorkflowID != 0 {
			ids = append(ids, j.ID)
		}
	}
	if len(ids) == 0 {
		return
	}
	m, err := pr.JobParents(ctx, ids)
	if err != nil {
		return
	}
	for i := range out {
		out[i].Parents = m[out[i].ID]
	}
}
