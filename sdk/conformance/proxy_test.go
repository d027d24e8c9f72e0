package conformance

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// call is one worker request seen by the proxy, with the replica's answer.
// A batch of completions (POST /v1/workers/complete:batch) is recorded
// once as it was sent and once per completion it carries, as if each had
// been sent alone: Path /v1/workers/complete, Body the completion's body,
// Status and Answer what the single route would have answered (200 and
// the result, or the refusal's status and error body), Batch set.
type call struct {
	Path    string
	Body    []byte // the request body as the worker sent it
	Status  int    // the replica's status
	Answer  []byte
	Dropped bool // the answer was computed by the replica and never delivered
	Batch   bool // a completion carried by a batch call
	At      time.Time
}

// token is what a fetch answer said about one task token.
type token struct {
	JobID    uint64
	JobType  string
	Attempt  int
	WorkerID string
}

// proxy sits between the workers and the replica (net/http/httputil): it
// records every request body and answer, learns which job and attempt each
// task token names from the fetch answers, can drop the answer of the first
// completion of a job type (a lost acknowledgement: the replica applied it,
// the worker sees the connection close) and can fail one worker's heartbeats.
type proxy struct {
	rp  *httputil.ReverseProxy
	srv *httptest.Server

	mu             sync.Mutex
	calls          []call
	tokens         map[string]token
	dropCompleteOf map[string]bool          // job types whose next applied completion answer is dropped
	holdBeatsOf    map[string]chan struct{} // worker ids whose heartbeats wait until the channel is closed
	// badTypeOf maps a worker id to a job type that is not remote: once a
	// fetch of that worker has been answered with jobs, its later fetches
	// are sent on with that type added to job_types, and the replica
	// refuses them (400 naming job_types), as it refuses a worker
	// configured with a type it does not run remotely.
	badTypeOf map[string]string
	badNow    map[string]bool // worker ids whose fetches now carry the bad type
	fetching  map[*http.Request]fetchStart
	// changed is closed (and replaced) whenever what the proxy saw changes:
	// a call recorded, tokens learnt, a fetch begun or ended. The suite's
	// waits for a worker's side wake on it (awaitProxy).
	changed chan struct{}
}

// fetchStart is a fetch waiting at the replica.
type fetchStart struct {
	workerID string
	at       time.Time
}

func newProxy(t *testing.T, target string) *proxy {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{rp: httputil.NewSingleHostReverseProxy(u), tokens: map[string]token{},
		dropCompleteOf: map[string]bool{}, holdBeatsOf: map[string]chan struct{}{}, fetching: map[*http.Request]fetchStart{},
		badTypeOf: map[string]string{}, badNow: map[string]bool{},
		changed: make(chan struct{})}
	p.rp.ErrorLog = nil
	p.rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		w.WriteHeader(http.StatusBadGateway)
	}
	p.srv = httptest.NewServer(p)
	t.Cleanup(p.srv.Close)
	return p
}

// URL is the proxy's base URL, the workers' JOBQ_SERVER.
func (p *proxy) URL() string { return p.srv.URL }

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	c := call{Path: r.URL.Path, Body: body, At: time.Now()}

	if r.URL.Path == "/v1/workers/heartbeat" {
		var hb struct {
			WorkerID string `json:"worker_id"`
		}
		_ = json.Unmarshal(body, &hb)
		p.mu.Lock()
		hold := p.holdBeatsOf[hb.WorkerID]
		p.mu.Unlock()
		if hold != nil {
			<-hold
		}
	}

	if r.URL.Path == "/v1/workers/fetch" {
		var fr struct {
			WorkerID string `json:"worker_id"`
		}
		_ = json.Unmarshal(body, &fr)
		p.mu.Lock()
		p.fetching[r] = fetchStart{workerID: fr.WorkerID, at: c.At}
		bad, refuse := p.badTypeOf[fr.WorkerID], p.badNow[fr.WorkerID]
		p.changedLocked()
		p.mu.Unlock()
		if refuse {
			sent := withJobType(body, bad)
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(sent)), int64(len(sent))
			r.Header.Set("Content-Length", strconv.Itoa(len(sent)))
		}
		if bad != "" && !refuse {
			defer func() {
				if c.Status == http.StatusOK && bytes.Contains(c.Answer, []byte(`"task_token"`)) {
					p.mu.Lock()
					p.badNow[fr.WorkerID] = true
					p.mu.Unlock()
				}
			}()
		}
		defer func() {
			p.mu.Lock()
			delete(p.fetching, r)
			p.changedLocked()
			p.mu.Unlock()
		}()
	}

	rec := httptest.NewRecorder()
	p.rp.ServeHTTP(rec, r)
	c.Status, c.Answer = rec.Code, rec.Body.Bytes()

	var items []call
	switch r.URL.Path {
	case "/v1/workers/fetch":
		p.learnTokens(body, c.Answer)
	case "/v1/workers/complete":
		if c.Status == http.StatusOK {
			tok := p.tokenOf(body)
			p.mu.Lock()
			if p.dropCompleteOf[tok.JobType] {
				delete(p.dropCompleteOf, tok.JobType)
				c.Dropped = true
			}
			p.mu.Unlock()
		}
	case "/v1/workers/complete:batch":
		items = splitBatch(c)
		p.mu.Lock()
		for _, it := range items {
			// The answer of a batch holding an applied completion of the
			// armed type is dropped: every completion of it is lost.
			if tok := p.tokens[parseCompletion(it.Body).TaskToken]; it.Status == http.StatusOK && p.dropCompleteOf[tok.JobType] {
				delete(p.dropCompleteOf, tok.JobType)
				c.Dropped = true
			}
		}
		p.mu.Unlock()
		for i := range items {
			items[i].Dropped = c.Dropped
		}
	}
	p.record(c)
	for _, it := range items {
		p.record(it)
	}
	if c.Dropped {
		// The acknowledgement is lost: close the connection without an answer.
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.(*net.TCPConn).SetLinger(0)
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
	_, _ = w.Write(c.Answer)
}

// withJobType returns the fetch body with jobType added to its job_types.
func withJobType(body []byte, jobType string) []byte {
	var m map[string]any
	if json.Unmarshal(body, &m) != nil {
		return body
	}
	types, _ := m["job_types"].([]any)
	m["job_types"] = append(types, jobType)
	out, err := json.Marshal(m)
	if err != nil {
		return body
	}
	return out
}

// refuseFetchesAfterJobs arms the proxy to send the fetches of worker
// workerID that follow its first fetch answered with jobs on with
// jobType, which the replica does not run remotely, added (badTypeOf).
func (p *proxy) refuseFetchesAfterJobs(workerID, jobType string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.badTypeOf[workerID] = jobType
}

// fetchesOf returns worker workerID's fetch calls, answered, in order.
func (p *proxy) fetchesOf(workerID string) []call {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []call
	for _, c := range p.calls {
		if c.Path != "/v1/workers/fetch" {
			continue
		}
		var fr struct {
			WorkerID string `json:"worker_id"`
		}
		if json.Unmarshal(c.Body, &fr) == nil && fr.WorkerID == workerID {
			out = append(out, c)
		}
	}
	return out
}

// splitBatch returns the completions batch call c carried, each with the
// answer the single route would have given it (see call).
func splitBatch(c call) []call {
	var req struct {
		Completions []json.RawMessage `json:"completions"`
	}
	if json.Unmarshal(c.Body, &req) != nil {
		return nil
	}
	var resp struct {
		Results []json.RawMessage `json:"results"`
	}
	ok := c.Status == http.StatusOK && json.Unmarshal(c.Answer, &resp) == nil && len(resp.Results) == len(req.Completions)
	out := make([]call, len(req.Completions))
	for i, body := range req.Completions {
		out[i] = call{Path: "/v1/workers/complete", Body: body, Status: c.Status, Answer: c.Answer, Batch: true, At: c.At}
		if !ok {
			continue // the call failed as a whole: each completion got its answer
		}
		var r struct {
			Result string `json:"result"`
			Error  *struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(resp.Results[i], &r)
		out[i].Answer = resp.Results[i]
		switch {
		case r.Result == "applied":
			out[i].Status = http.StatusOK
		case r.Result == "stale" || r.Result == "conflict":
			out[i].Status = http.StatusConflict
		case r.Result == "forbidden":
			out[i].Status = http.StatusForbidden
		case r.Error != nil && r.Error.Code == "too_large":
			out[i].Status = http.StatusRequestEntityTooLarge
		default:
			out[i].Status = http.StatusBadRequest
		}
	}
	return out
}

func (p *proxy) record(c call) {
	p.mu.Lock()
	p.calls = append(p.calls, c)
	p.changedLocked()
	p.mu.Unlock()
}

// changedLocked wakes every wait on the proxy (changes). The caller holds
// p.mu.
func (p *proxy) changedLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// changes returns a channel closed at the proxy's next change. Take it
// before reading what the wait is about, so no change falls in between.
func (p *proxy) changes() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}

func (p *proxy) learnTokens(request, answer []byte) {
	var req struct {
		WorkerID string `json:"worker_id"`
	}
	_ = json.Unmarshal(request, &req)
	var fr struct {
		Jobs []struct {
			ID        uint64 `json:"id"`
			JobType   string `json:"job_type"`
			Attempt   int    `json:"attempt"`
			TaskToken string `json:"task_token"`
		} `json:"jobs"`
	}
	if json.Unmarshal(answer, &fr) != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, j := range fr.Jobs {
		p.tokens[j.TaskToken] = token{JobID: j.ID, JobType: j.JobType, Attempt: j.Attempt, WorkerID: req.WorkerID}
	}
	if len(fr.Jobs) > 0 {
		p.changedLocked()
	}
}

// tokenOf says which job a request body's task_token names (zero if none).
func (p *proxy) tokenOf(body []byte) token {
	var b struct {
		TaskToken string `json:"task_token"`
	}
	_ = json.Unmarshal(body, &b)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tokens[b.TaskToken]
}

// dropNextCompletion arms the lost acknowledgement for jobType.
func (p *proxy) dropNextCompletion(jobType string) {
	p.mu.Lock()
	p.dropCompleteOf[jobType] = true
	p.mu.Unlock()
}

// holdHeartbeats makes workerID's heartbeats wait at the proxy until the
// returned function is called (also called at cleanup).
func (p *proxy) holdHeartbeats(t *testing.T, workerID string) (release func()) {
	ch := make(chan struct{})
	p.mu.Lock()
	p.holdBeatsOf[workerID] = ch
	p.mu.Unlock()
	var once sync.Once
	release = func() {
		once.Do(func() {
			p.mu.Lock()
			delete(p.holdBeatsOf, workerID)
			p.mu.Unlock()
			close(ch)
		})
	}
	t.Cleanup(release)
	return release
}

// oldestFetch returns when workerID's oldest fetch still waiting at the
// replica began (false when none is), with a channel closed at the proxy's
// next change (a fetch begun or answered).
func (p *proxy) oldestFetch(workerID string) (since time.Time, waiting bool, changed <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.fetching {
		if f.workerID == workerID && (!waiting || f.at.Before(since)) {
			since, waiting = f.at, true
		}
	}
	return since, waiting, p.changed
}

// heartbeated reports whether a heartbeat carrying tok was answered 200:
// the worker holds the job (it received the fetch answer).
func (p *proxy) heartbeated(tok string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.calls {
		if c.Path == "/v1/workers/heartbeat" && c.Status == http.StatusOK && strings.Contains(string(c.Body), `"`+tok+`"`) {
			return true
		}
	}
	return false
}

// tokensOf returns the task tokens fetched for job id, by attempt.
func (p *proxy) tokensOf(id uint64) map[int]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[int]string{}
	for tok, tk := range p.tokens {
		if tk.JobID == id {
			out[tk.Attempt] = tok
		}
	}
	return out
}

// completions returns the completion calls carrying task token tok, in
// the order they arrived.
func (p *proxy) completions(tok string) []call {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []call
	for _, c := range p.calls {
		if c.Path == "/v1/workers/complete" && strings.Contains(string(c.Body), tok) {
			var b struct {
				TaskToken string `json:"task_token"`
			}
			if json.Unmarshal(c.Body, &b) == nil && b.TaskToken == tok {
				out = append(out, c)
			}
		}
	}
	return out
}
