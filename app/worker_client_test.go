package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/client"
)

// workerProxy sits between a client.Worker and the replica: it learns the
// task tokens from the fetch answers, reports heartbeats and completion
// calls on channels, and lets a test hold or lose completion answers.
type workerProxy struct {
	t   *testing.T
	rp  *httputil.ReverseProxy
	srv *httptest.Server

	beats     chan string   // heartbeat bodies
	delivered chan struct{} // a completion call's answer is about to be delivered
	// onComplete, if set, runs for each completion call before it is
	// forwarded: it may block (the answer is held) and returns whether the
	// answer is lost after the replica handled the call.
	onComplete func(path string, body []byte) (lose bool)

	mu       sync.Mutex
	tokens   map[uint64]string // job id → task token
	answered map[string]bool   // task tokens whose completion answer was delivered
	calls    []completionCall
}

// completionCall is one completion call the proxy saw.
type completionCall struct {
	path   string
	body   []byte
	status int
	answer []byte
	lost   bool
}

func newWorkerProxy(t *testing.T, target string) *workerProxy {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &workerProxy{t: t, rp: httputil.NewSingleHostReverseProxy(u), beats: make(chan string, 1000), delivered: make(chan struct{}, 1000),
		tokens: map[uint64]string{}, answered: map[string]bool{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *workerProxy) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	complete := r.URL.Path == "/v1/workers/complete" || r.URL.Path == "/v1/workers/complete:batch"
	lose := false
	if complete && p.onComplete != nil {
		lose = p.onComplete(r.URL.Path, body)
	}
	rec := httptest.NewRecorder()
	p.rp.ServeHTTP(rec, r)
	switch {
	case r.URL.Path == "/v1/workers/fetch":
		var fr apitype.FetchResponse
		if json.Unmarshal(rec.Body.Bytes(), &fr) == nil {
			p.mu.Lock()
			for _, j := range fr.Jobs {
				p.tokens[j.ID] = j.TaskToken
			}
			p.mu.Unlock()
		}
	case r.URL.Path == "/v1/workers/heartbeat":
		p.beats <- string(body)
	case complete:
		p.mu.Lock()
		p.calls = append(p.calls, completionCall{path: r.URL.Path, body: body, status: rec.Code, answer: rec.Body.Bytes(), lost: lose})
		if !lose {
			for _, t := range p.tokens {
				if bytes.Contains(body, []byte(`"`+t+`"`)) {
					p.answered[t] = true
				}
			}
		}
		p.mu.Unlock()
		if !lose {
			p.delivered <- struct{}{}
		}
	}
	if lose {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

func (p *workerProxy) token(id uint64) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tokens[id]
}

func (p *workerProxy) wasAnswered(tok string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.answered[tok]
}

func (p *workerProxy) completionCalls() []completionCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]completionCall(nil), p.calls...)
}

// runWorker starts w.Run; the returned function cancels it and returns
// Run's error.
func runWorker(t *testing.T, w *client.Worker) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				err = fmt.Errorf("Run did not return within 30s of its context ending")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func within[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("%s: not within %v", what, d)
		panic("unreachable")
	}
}

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// A worker frees a job's slot as soon as its handler returns: with one
// slot and the first job's completion held unanswered, the second job is
// fetched and run; meanwhile the first job, still RUNNING on the replica,
// is heartbeated with its lease renewed. A shutdown waits for the pending
// completion, which is then applied.
func TestClientWorkerFreesSlotBeforeTheAcknowledgement(t *testing.T) {
	w := startWorkerReplica(t, nil) // lease 3s: heartbeats every 1s
	px := newWorkerProxy(t, w.base)
	hold := make(chan struct{})
	held := make(chan string, 10)
	var once sync.Once
	px.onComplete = func(path string, body []byte) bool {
		first := false
		once.Do(func() { first = true })
		if first {
			held <- string(body)
			<-hold
		}
		return false
	}
	t.Cleanup(func() {
		select {
		case <-hold:
		default:
			close(hold)
		}
	})
	wk, err := client.NewWorker(client.WorkerConfig{Server: px.srv.URL, Token: resizeToken, WorkerID: "slot-w", Concurrency: 1,
		RunQueue: -1, PollWait: time.Second, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan uint64, 10)
	wk.Register("resize", func(ctx context.Context, job *client.WorkerJob) (any, error) {
		started <- job.ID
		return map[string]uint64{"id": job.ID}, nil
	})
	stop := runWorker(t, wk)

	a := w.submit("slot-a", "resize")
	if got := within(t, started, 10*time.Second, "job A runs"); got != a {
		t.Fatalf("started job %d, want %d", got, a)
	}
	tokA := px.token(a)
	if body := within(t, held, 10*time.Second, "job A's completion is sent"); !strings.Contains(body, tokA) {
		t.Fatalf("the held completion call %s does not carry job A's token", body)
	}
	leaseBefore := w.row(a).LeaseUntil
	b := w.submit("slot-b", "resize")
	if got := within(t, started, 10*time.Second, "job B runs while job A's completion is unanswered (its slot is free)"); got != b {
		t.Fatalf("started job %d, want %d", got, b)
	}
	for {
		beat := within(t, px.beats, 10*time.Second, "a heartbeat carries job A's token while its completion is pending")
		if strings.Contains(beat, tokA) {
			break
		}
	}
	if got := w.row(a); got.Status != "RUNNING" || got.LeaseUntil <= leaseBefore {
		t.Fatalf("job A while its completion is pending: %+v, want RUNNING with its lease renewed past %s", got, leaseBefore)
	}

	// A shutdown waits for the pending completion.
	returned := make(chan bool, 1)
	go func() { err := stop(); returned <- err == nil && px.wasAnswered(tokA) }()
	close(hold)
	if ok := within(t, returned, 30*time.Second, "Run returns after its shutdown"); !ok {
		t.Fatalf("Run returned (err %v) before job A's completion was answered", stop())
	}
	for _, id := range []uint64{a, b} {
		if got := fmt.Sprint(w.executions(id)); got != "[1:SUCCESS]" {
			t.Errorf("job %d: executions %s, want one SUCCESS", id, got)
		}
	}
}

// A batch of completions whose answer is lost (the replica applied it, the
// connection closed) is sent again with the same bytes; each completion is
// answered applied again and written once.
func TestClientWorkerRetriesALostBatchAnswer(t *testing.T) {
	const n = 8
	w := startWorkerReplica(t, nil)
	px := newWorkerProxy(t, w.base)
	// The first calls wait until the worker has four in flight or all n
	// completions out, so completions queue behind them and go out
	// together; the answer of the first call carrying two or more is lost.
	var mu sync.Mutex
	inFlight, items, lostOnce := 0, 0, false
	ready := make(chan struct{})
	px.onComplete = func(path string, body []byte) bool {
		var br apitype.CompleteBatchRequest
		_ = json.Unmarshal(body, &br)
		mu.Lock()
		k := len(br.Completions)
		if path != "/v1/workers/complete:batch" {
			k = 1
		}
		gate := ready
		inFlight++
		items += k
		if inFlight == 4 || items >= n {
			select {
			case <-ready:
			default:
				close(ready)
			}
		}
		lose := !lostOnce && k >= 2
		lostOnce = lostOnce || lose
		mu.Unlock()
		<-gate
		return lose
	}
	wk, err := client.NewWorker(client.WorkerConfig{Server: px.srv.URL, Token: resizeToken, WorkerID: "lost-w", Concurrency: n,
		PollWait: time.Second, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	started := make(chan uint64, n)
	wk.Register("resize", func(ctx context.Context, job *client.WorkerJob) (any, error) {
		started <- job.ID
		<-gate
		return map[string]uint64{"id": job.ID}, nil
	})
	stop := runWorker(t, wk)
	var reqs []apitype.SubmitRequest
	for i := range n {
		reqs = append(reqs, apitype.SubmitRequest{JobKey: fmt.Sprintf("lost-%d", i), JobType: "resize"})
	}
	code, body := w.call(adminToken, "POST", "/v1/jobs:batch", apitype.SubmitBatchRequest{Jobs: reqs})
	var sub apitype.SubmitBatchResponse
	if code != http.StatusOK || json.Unmarshal(body, &sub) != nil || sub.Created != n {
		t.Fatalf("submit: %d %s", code, body)
	}
	for range n {
		within(t, started, 10*time.Second, "every job runs")
	}
	close(gate)
	for {
		within(t, px.delivered, 20*time.Second, "every completion is answered to the worker")
		all := true
		for _, r := range sub.Results {
			all = all && px.wasAnswered(px.token(r.ID))
		}
		if all {
			break
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	calls := px.completionCalls()
	var lost *completionCall
	for i := range calls {
		if calls[i].lost {
			lost = &calls[i]
		}
	}
	if lost == nil {
		t.Fatalf("no batch of two or more completions was sent (%d calls)", len(calls))
	}
	var resent []completionCall
	for _, c := range calls {
		if !c.lost && bytes.Equal(c.body, lost.body) {
			resent = append(resent, c)
		}
	}
	if len(resent) != 1 || resent[0].status != http.StatusOK {
		t.Fatalf("the lost batch %s was sent again %d times with the same bytes (%+v), want once, answered 200", lost.body, len(resent), resent)
	}
	var resp apitype.CompleteBatchResponse
	if err := json.Unmarshal(resent[0].answer, &resp); err != nil || resp.Applied != len(resp.Results) {
		t.Fatalf("the resent batch was answered %s, want every completion applied", resent[0].answer)
	}
	for _, r := range sub.Results {
		if got := fmt.Sprint(w.executions(r.ID)); got != "[1:SUCCESS]" {
			t.Errorf("job %d: executions %s, want one SUCCESS", r.ID, got)
		}
	}
}
