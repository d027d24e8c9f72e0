package callout

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jobq/jobq/egress"
	"github.com/jobq/jobq/scheduler"
)

// Defaults of Config.
const (
	TimeoutDefault     = 10 * time.Second
	ConcurrencyDefault = 16
	// MaxAnswerBytes bounds an answer's body: the largest output a job may
	// have (65,536 bytes). A longer body fails the attempt.
	MaxAnswerBytes = 65536
)

// Binding binds a job type to an endpoint.
type Binding struct {
	// JobType is a job type declared remote on every replica.
	JobType string `json:"job_type"`
	// URL is the endpoint jobs are POSTed to.
	URL string `json:"url"`
	// Secret names the signing secret (Config.Secrets); the secret itself
	// is never shown. Defaults to JobType.
	Secret string `json:"secret"`
}

// Config configures the executor.
type Config struct {
	// Bindings are the bindings at start.
	Bindings []Binding
	// Secrets are the signing secrets by name (--callout-secret-file).
	Secrets map[string][]byte
	// AllowLoopback lets bindings and connections reach loopback addresses.
	// Defaults to false.
	AllowLoopback bool
	// Timeout bounds one call, connection to answer. Defaults to 10s.
	Timeout time.Duration
	// Concurrency is how many calls per job type run at once. Defaults to 16.
	Concurrency int
	// WorkerID names the executor in runs' owner ("worker:<WorkerID>").
	WorkerID string
	// Resolver resolves binding hosts (nil: net.DefaultResolver).
	Resolver *net.Resolver
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Request is the JSON body POSTed to an endpoint.
type Request struct {
	JobID      uint64          `json:"job_id"`
	JobKey     string          `json:"job_key"`
	JobType    string          `json:"job_type"`
	Params     json.RawMessage `json:"params"`
	Attempt    int             `json:"attempt"`
	RetryTimes int             `json:"retry_times"`
	MaxRetry   int             `json:"max_retry"`
	// TaskToken is the lease: an endpoint that answers 202 heartbeats and
	// completes with it (POST /v1/workers/heartbeat, /v1/workers/complete).
	TaskToken string `json:"task_token"`
	// Deadline is the lease's end on the database clock: a 202 endpoint
	// must heartbeat before it (every HeartbeatMs).
	Deadline    time.Time `json:"deadline"`
	LeaseMs     int64     `json:"lease_ms"`
	HeartbeatMs int64     `json:"heartbeat_ms"`
}

// Executor runs the bound job types' jobs by calling their endpoints.
type Executor struct {
	remote *scheduler.Remote
	cfg    Config
	http   *http.Client
	log    *slog.Logger

	mu      sync.Mutex
	ctx     context.Context
	binds   map[string]Binding
	cancels map[string]context.CancelFunc
	wg      sync.WaitGroup
}

// New checks cfg's bindings (each type remote, each URL allowed, each
// secret known) and returns an executor; Start runs it.
func New(ctx context.Context, remote *scheduler.Remote, cfg Config) (*Executor, error) {
	cfg.Timeout = cmp.Or(cfg.Timeout, TimeoutDefault)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, ConcurrencyDefault)
	cfg.WorkerID = cmp.Or(cfg.WorkerID, "callout")
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	d := &net.Dialer{Timeout: cfg.Timeout, Control: DialControl(cfg.AllowLoopback)}
	e := &Executor{remote: remote, cfg: cfg, log: cfg.Logger.With("component", "callout"),
		binds: map[string]Binding{}, cancels: map[string]context.CancelFunc{},
		http: &http.Client{
			Transport: &http.Transport{DialContext: d.DialContext, Proxy: nil, MaxIdleConnsPerHost: cfg.Concurrency,
				IdleConnTimeout: 30 * time.Second, TLSHandshakeTimeout: cfg.Timeout, ResponseHeaderTimeout: cfg.Timeout},
			// A redirect could lead anywhere: it is an answer like any other
			// non-2xx (the attempt fails).
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}}
	for _, b := range cfg.Bindings {
		b.Secret = cmp.Or(b.Secret, b.JobType)
		if err := e.check(ctx, b); err != nil {
			return nil, fmt.Errorf("callout %s: %w", b.JobType, err)
		}
		e.binds[b.JobType] = b
	}
	return e, nil
}

// ValidationError is a binding refused: Field names what, Rule why.
type ValidationError struct{ Field, Rule string }

func (e *ValidationError) Error() string { return e.Field + ": " + e.Rule }

func (e *Executor) check(ctx context.Context, b Binding) error {
	if e.remote == nil || !e.remote.IsRemote(b.JobType) {
		return &ValidationError{Field: "job_type", Rule: "must be a remote job type (declared with --remote-type or --callout on every replica)"}
	}
	if _, ok := e.cfg.Secrets[b.Secret]; !ok {
		return &ValidationError{Field: "secret", Rule: "must name a secret of --callout-secret-file (known: " + strconv.Itoa(len(e.cfg.Secrets)) + ")"}
	}
	if err := CheckURL(ctx, b.URL, e.cfg.AllowLoopback, e.cfg.Resolver); err != nil {
		var de *DestinationError
		if errors.As(err, &de) {
			return &ValidationError{Field: "url", Rule: de.Rule}
		}
		return err
	}
	return nil
}

// Start runs one loop per binding until Stop.
func (e *Executor) Start(ctx context.Context) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ctx = ctx
	for t := range e.binds {
		e.startLocked(t)
	}
}

func (e *Executor) startLocked(jobType string) {
	if e.ctx == nil {
		return
	}
	if c := e.cancels[jobType]; c != nil {
		c()
	}
	ctx, cancel := context.WithCancel(e.ctx)
	e.cancels[jobType] = cancel
	e.wg.Add(1)
	go func() { defer e.wg.Done(); e.loop(ctx, jobType) }()
}

// Stop ends the loops and waits for calls in flight.
func (e *Executor) Stop() {
	e.mu.Lock()
	for _, c := range e.cancels {
		c()
	}
	e.mu.Unlock()
	e.wg.Wait()
}

// List returns the bindings, by job type.
func (e *Executor) List() []Binding {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := append([]Binding{}, slices.Collect(maps.Values(e.binds))...)
	slices.SortFunc(out, func(a, b Binding) int { return cmp.Compare(a.JobType, b.JobType) })
	return out
}

// Put binds b.JobType to b.URL on this replica (replacing a binding), or
// returns a *ValidationError naming the field and the rule.
func (e *Executor) Put(ctx context.Context, b Binding) error {
	b.Secret = cmp.Or(b.Secret, b.JobType)
	if err := e.check(ctx, b); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.binds[b.JobType] = b
	e.startLocked(b.JobType)
	e.log.Info("callout bound", "job_type", b.JobType, "url", b.URL)
	return nil
}

// Delete removes jobType's binding on this replica; false when none.
func (e *Executor) Delete(jobType string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.binds[jobType]; !ok {
		return false
	}
	delete(e.binds, jobType)
	if c := e.cancels[jobType]; c != nil {
		c()
		delete(e.cancels, jobType)
	}
	return true
}

func (e *Executor) binding(jobType string) (Binding, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, ok := e.binds[jobType]
	return b, ok
}

// loop fetches the type's due jobs for free call slots and calls each.
func (e *Executor) loop(ctx context.Context, jobType string) {
	sem := make(chan struct{}, e.cfg.Concurrency)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		sem <- struct{}{}
		free := 1
		for len(sem) < cap(sem) && free < cap(sem) {
			sem <- struct{}{}
			free++
		}
		jobs, err := e.remote.Fetch(ctx, scheduler.FetchParams{WorkerID: e.cfg.WorkerID, Version: "jobq-callout",
			Types: []string{jobType}, MaxJobs: free, Wait: 5 * time.Second})
		for range free - len(jobs) {
			<-sem
		}
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn("fetch failed; retrying", "job_type", jobType, "err", err, "backoff", backoff)
				sleep(ctx, backoff)
				backoff = min(2*backoff, 5*time.Second)
			}
			continue
		}
		backoff = 100 * time.Millisecond
		for _, j := range jobs {
			e.wg.Add(1)
			go func() {
				defer func() { <-sem; e.wg.Done() }()
				e.run(ctx, j)
			}()
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// run calls the endpoint for j, heartbeating while the call is in flight,
// and writes the outcome (none after a 202: the endpoint completes it).
// When ctx ends (Stop) the call is abandoned and the job released.
func (e *Executor) run(runCtx context.Context, j scheduler.FetchedJob) {
	ctx := context.WithoutCancel(runCtx)
	b, ok := e.binding(j.JobType)
	if !ok {
		e.complete(ctx, j, scheduler.CompleteRelease, nil, "callout binding removed")
		return
	}
	body, err := json.Marshal(Request{JobID: j.ID, JobKey: j.JobKey, JobType: j.JobType, Params: j.Params, Attempt: j.Attempt,
		RetryTimes: j.RetryTimes, MaxRetry: j.MaxRetry, TaskToken: j.TaskToken, Deadline: j.LeaseUntil.UTC(),
		LeaseMs: j.Lease.Milliseconds(), HeartbeatMs: j.Heartbeat.Milliseconds()})
	if err != nil {
		e.complete(ctx, j, scheduler.CompleteFailure, nil, "callout: encode request: "+err.Error())
		return
	}
	timeout := e.cfg.Timeout
	if j.TimeoutMs > 0 {
		timeout = min(timeout, time.Duration(j.TimeoutMs)*time.Millisecond) // the job's own timeout
	}
	callCtx, cancel := context.WithTimeout(runCtx, timeout)
	defer cancel()
	stopBeat := e.heartbeat(callCtx, cancel, j)
	code, answer, err := e.call(callCtx, b, body)
	stopBeat()
	switch {
	case err != nil && runCtx.Err() != nil:
		e.complete(ctx, j, scheduler.CompleteRelease, nil, "replica shutting down")
	case err != nil:
		e.complete(ctx, j, scheduler.CompleteFailure, nil, "callout: "+err.Error())
	case code == http.StatusAccepted:
		e.log.Debug("callout accepted; the endpoint completes it", "job_id", j.ID, "attempt", j.Attempt)
	case code >= 200 && code < 300:
		out := answer
		if len(bytes.TrimSpace(out)) == 0 {
			out = []byte("null")
		} else if !json.Valid(out) {
			out, _ = json.Marshal(string(out))
		}
		e.complete(ctx, j, scheduler.CompleteSuccess, out, "")
	default:
		e.complete(ctx, j, scheduler.CompleteFailure, nil, fmt.Sprintf("callout: HTTP %d from the endpoint", code))
	}
}

// call POSTs the signed body and reads at most MaxAnswerBytes of the answer.
func (e *Executor) call(ctx context.Context, b Binding, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.URL, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "jobq-callout/1")
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderSignature, Sign(e.cfg.Secrets[b.Secret], ts, body))
	resp, err := e.http.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return 0, nil, errors.New("no answer within the call's timeout")
		}
		return 0, nil, errors.Unwrap(err) // *url.Error's text repeats the URL
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes+1))
	if err != nil {
		return 0, nil, fmt.Errorf("read answer: %w", err)
	}
	if len(answer) > MaxAnswerBytes {
		return 0, nil, fmt.Errorf("answer body exceeds %d bytes", MaxAnswerBytes)
	}
	return resp.StatusCode, answer, nil
}

// heartbeat renews j's lease every j.Heartbeat until stopped; a lost lease
// or a cancel request cancels the call (cancel): the attempt fails, and a
// job whose cancel was requested ends CANCELED.
func (e *Executor) heartbeat(ctx context.Context, cancel context.CancelFunc, j scheduler.FetchedJob) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(max(j.Heartbeat, 100*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			res, err := e.remote.Heartbeat(ctx, e.cfg.WorkerID, []string{j.TaskToken}, nil)
			if err == nil && len(res) == 1 && res[0].State != scheduler.HeartbeatRenewed {
				e.log.Warn("callout cancelled", "job_id", j.ID, "attempt", j.Attempt, "state", res[0].State)
				cancel()
				return
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// complete writes j's outcome, retrying errors of the database until its
// lease deadline; a refusal (stale, conflict) ends it.
func (e *Executor) complete(ctx context.Context, j scheduler.FetchedJob, outcome string, output []byte, msg string) {
	p := scheduler.CompleteParams{TaskToken: j.TaskToken, Outcome: outcome, Output: output, Error: msg, Retry: true}
	deadline := time.Now().Add(j.Lease)
	backoff := 100 * time.Millisecond
	for {
		_, err := e.remote.Complete(ctx, p)
		switch {
		case err == nil:
			return
		case errors.Is(err, scheduler.ErrTokenStale), errors.Is(err, scheduler.ErrOutcomeConflict), errors.Is(err, scheduler.ErrTokenForbidden):
			e.log.Info("callout outcome refused", "job_id", j.ID, "attempt", j.Attempt, "err", err)
			return
		case time.Now().Add(backoff).After(deadline):
			e.log.Error("callout outcome not written before the lease deadline; the job will be rescued", "job_id", j.ID, "err", err)
			return
		}
		sleep(ctx, backoff)
		backoff = min(2*backoff, 2*time.Second)
	}
}

// LoadSecrets reads the call-out's signing secrets (egress.LoadSecrets):
// file, and env's NAME=SECRET entries (SecretsEnv).
func LoadSecrets(file, env string) (map[string][]byte, error) {
	return egress.LoadSecrets("callout secrets", SecretsEnv, file, env)
}

// SecretsEnv holds signing secrets as NAME=SECRET entries separated by ";".
const SecretsEnv = "JOBQ_CALLOUT_SECRETS"

// ParseBinding parses --callout TYPE=URL.
func ParseBinding(s string) (Binding, error) {
	t, u, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(t) == "" || strings.TrimSpace(u) == "" {
		return Binding{}, fmt.Errorf("--callout %q: want TYPE=URL", s)
	}
	return Binding{JobType: strings.TrimSpace(t), URL: strings.TrimSpace(u)}, nil
}
