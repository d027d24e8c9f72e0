package app

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/callout"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/scheduler/schedulertest"
)

var calloutSecret = []byte("callout-secret-0123456789")

// calloutReplica is a worker replica whose remote type "hook" is bound to
// url (loopback allowed: the test endpoints listen on 127.0.0.1), with a
// retry backoff of backoff; done records its events (waitCompletion).
func calloutReplica(t *testing.T, url string, backoff time.Duration) (*workerReplica, *completions) {
	done := newCompletions()
	w := startWorkerReplica(t, func(c *Config) {
		c.Scheduler.RemoteTypes = append(c.Scheduler.RemoteTypes, "hook")
		c.Scheduler.RetryBackoffBase = backoff
		c.Scheduler.Observer = done.rec
		c.Callout = callout.Config{AllowLoopback: true, Timeout: 2 * time.Second,
			Secrets:  map[string][]byte{"hook": calloutSecret},
			Bindings: []callout.Binding{{JobType: "hook", URL: url}}}
	})
	return w, done
}

// completions hands out a replica's applied completions of each job in
// order, from its events.
type completions struct {
	rec  *schedulertest.Recorder
	seen map[uint64]int // completions of each job already handed out
}

func newCompletions() *completions {
	return &completions{rec: schedulertest.NewRecorder(), seen: map[uint64]int{}}
}

// waitCompletion returns job id's next applied completion (after those it
// returned before), waiting up to 20s for it.
func waitCompletion(t *testing.T, done *completions, id uint64) jobq.Completion {
	t.Helper()
	n := done.seen[id] + 1
	evs := done.rec.WaitN(t, scheduler.EventCompleted, func(e scheduler.Event) bool {
		return e.Applied && e.Completion.ID == id
	}, n, 20*time.Second)
	done.seen[id] = n
	return evs[n-1].Completion
}

// TestCalloutAcceptedCompletesLater: the endpoint verifies the signature,
// answers 202, heartbeats, and completes the job 2 s later through the
// worker protocol with the task token: the job ends SUCCESS with its output.
func TestCalloutAcceptedCompletesLater(t *testing.T) {
	type call struct {
		req callout.Request
		err error
	}
	calls := make(chan call, 4)
	ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var c call
		c.err = callout.Verify(calloutSecret, r.Header, body, time.Now(), callout.MaxSkewDefault)
		_ = json.Unmarshal(body, &c.req)
		calls <- c
		w.WriteHeader(http.StatusAccepted)
	}))
	defer ep.Close()
	w, done := calloutReplica(t, ep.URL, 200*time.Millisecond)
	id := w.submit("hook-1", "hook")
	var c call
	select {
	case c = <-calls:
	case <-time.After(20 * time.Second):
		t.Fatal("the endpoint was not called")
	}
	if c.err != nil {
		t.Fatalf("signature: %v", c.err)
	}
	if c.req.JobID != id || c.req.Attempt != 1 || c.req.TaskToken == "" || !bytes.Equal(c.req.Params, []byte(`{"n":1}`)) || c.req.Deadline.IsZero() {
		t.Fatalf("request %+v", c.req)
	}
	start := time.Now()
	time.Sleep(time.Second) // the endpoint's own work, part one (not a wait of the test: it outlasts the call-out's 2 s timeout in two parts)
	code, body := w.call(allToken, "POST", "/v1/workers/heartbeat", map[string]any{"worker_id": "hook-endpoint", "task_tokens": []string{c.req.TaskToken}})
	if code != http.StatusOK || !strings.Contains(string(body), `"renewed"`) {
		t.Fatalf("heartbeat: %d %s", code, body)
	}
	time.Sleep(time.Second) // the endpoint's own work, part two (not a wait of the test)
	code, body = w.call(allToken, "POST", "/v1/workers/complete", map[string]any{"task_token": c.req.TaskToken, "outcome": "success",
		"output": map[string]any{"ip": "10.0.0.7"}})
	if code != http.StatusOK {
		t.Fatalf("complete: %d %s", code, body)
	}
	got := waitCompletion(t, done, id)
	if got.Outcome != jobq.OutcomeSuccess || time.Since(start) < 2*time.Second {
		t.Fatalf("completion %+v after %s", got, time.Since(start))
	}
	if r := w.row(id); r.Status != "SUCCESS" || r.Attempt != 1 {
		t.Fatalf("job %+v, want SUCCESS at attempt 1", r)
	}
	var out string
	if err := w.db.QueryRow(`SELECT output FROM job_attempt WHERE job_id = ? AND attempt = 1`, id).Scan(&out); err != nil || out != `{"ip":"10.0.0.7"}` {
		t.Fatalf("output %q, %v", out, err)
	}
}

// TestCalloutAnswerCompletes: a 200 with a body completes the job with it.
func TestCalloutAnswerCompletes(t *testing.T) {
	ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"done":true}`)
	}))
	defer ep.Close()
	w, done := calloutReplica(t, ep.URL, 200*time.Millisecond)
	id := w.submit("hook-2", "hook")
	if c := waitCompletion(t, done, id); c.Outcome != jobq.OutcomeSuccess || string(c.Output) != `{"done":true}` {
		t.Fatalf("completion %+v (output %s)", c, c.Output)
	}
}

// TestCalloutEndpointDownRetries: an endpoint that refuses connections
// fails the attempt; the job is retried after its backoff and, with its
// one retry spent, ends FAILED.
func TestCalloutEndpointDownRetries(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/hook"
	ln.Close() // down: connections are refused
	const backoff = 400 * time.Millisecond
	w, done := calloutReplica(t, url, backoff)
	code, body := w.call(adminToken, "POST", "/v1/jobs", map[string]any{"job_key": "hook-3", "job_type": "hook", "max_retry": 1})
	if code != http.StatusCreated {
		t.Fatalf("submit: %d %s", code, body)
	}
	var j struct{ ID uint64 }
	_ = json.Unmarshal(body, &j)
	first := waitCompletion(t, done, j.ID)
	if first.Outcome != jobq.OutcomeFailed || !first.Retry || first.Backoff <= 0 || !strings.Contains(first.Error, "callout") {
		t.Fatalf("first completion %+v, want a failed attempt retried with backoff", first)
	}
	second := waitCompletion(t, done, j.ID)
	if second.Attempt != 2 || second.Outcome != jobq.OutcomeFailed || second.Retry {
		t.Fatalf("second completion %+v, want attempt 2 failed for good", second)
	}
	if r := w.row(j.ID); r.Status != "FAILED" || r.RetryTimes != 1 {
		t.Fatalf("job %+v, want FAILED after 1 retry", r)
	}
	var gapMs float64
	if err := w.db.QueryRow(`SELECT TIMESTAMPDIFF(MICROSECOND, a.finished_at, b.started_at) / 1000 FROM job_attempt a
		JOIN job_attempt b ON b.job_id = a.job_id AND b.attempt = 2 WHERE a.job_id = ? AND a.attempt = 1`, j.ID).Scan(&gapMs); err != nil {
		t.Fatal(err)
	}
	if min := float64(backoff.Milliseconds()) * 0.75; gapMs < min { // ±25 % jitter
		t.Fatalf("attempt 2 started %.0f ms after attempt 1 failed, want ≥ %.0f ms (the backoff)", gapMs, min)
	}
}

// TestCalloutBindingRefused: bindings to link-local, metadata and (without
// --callout-allow-loopback) loopback addresses are refused with 400 naming
// the field and the rule, at start and through the operations API.
func TestCalloutBindingRefused(t *testing.T) {
	w := startWorkerReplica(t, func(c *Config) {
		c.Scheduler.RemoteTypes = append(c.Scheduler.RemoteTypes, "hook")
		c.Callout = callout.Config{Secrets: map[string][]byte{"hook": calloutSecret}}
	})
	for _, tc := range []struct{ url, field, rule string }{
		{"http://169.254.169.254/latest/meta-data/", "url", callout.RuleMetadata},
		{"http://169.254.10.1/", "url", callout.RuleLinkLocal},
		{"http://[fd00:ec2::254]/", "url", callout.RuleMetadata},
		{"http://metadata.google.internal/computeMetadata/v1/", "url", callout.RuleMetadata},
		{"http://127.0.0.1:8080/hook", "url", callout.RuleLoopback},
		{"http://localhost/hook", "url", callout.RuleLoopback},
		{"http://[::1]/hook", "url", callout.RuleLoopback},
		{"ftp://example.com/", "url", callout.RuleScheme},
	} {
		code, body := w.call(adminToken, "PUT", "/v1/callouts/hook", map[string]any{"url": tc.url})
		if code != http.StatusBadRequest {
			t.Fatalf("%s: %d %s, want 400", tc.url, code, body)
		}
		if e := errorOf(t, body); e.Field != tc.field || !strings.Contains(e.Message, tc.rule) {
			t.Fatalf("%s: error %+v, want field %s and rule %q", tc.url, e, tc.field, tc.rule)
		}
	}
	code, body := w.call(adminToken, "PUT", "/v1/callouts/resize2", map[string]any{"url": "http://192.0.2.10/"})
	if e := errorOf(t, body); code != http.StatusBadRequest || e.Field != "job_type" {
		t.Fatalf("not remote: %d %s", code, body)
	}
	if code, body := w.call(adminToken, "GET", "/v1/callouts", nil); code != http.StatusOK || string(body) != `{"callouts":[]}`+"\n" {
		t.Fatalf("list after refusals: %d %s", code, body)
	}
	// At start: a replica with a refused binding does not start.
	_, err := callout.New(t.Context(), w.r.Scheduler.Remote(), callout.Config{Secrets: map[string][]byte{"hook": calloutSecret},
		Bindings: []callout.Binding{{JobType: "hook", URL: "http://169.254.169.254/"}}})
	if err == nil || !strings.Contains(err.Error(), callout.RuleMetadata) {
		t.Fatalf("start with a metadata binding: %v", err)
	}
}

// TestCalloutDialRefusesRebinding: a name that resolved to an allowed
// address at bind time but to a refused one when dialled is refused at
// connect time (DialControl checks the address actually dialled).
func TestCalloutDialRefusesRebinding(t *testing.T) {
	ctl := callout.DialControl(false)
	for _, addr := range []string{"169.254.169.254:80", "127.0.0.1:80", "[::1]:443", "[fd00:ec2::254]:80"} {
		if err := ctl("tcp", addr, nil); err == nil {
			t.Fatalf("%s: dial allowed", addr)
		}
	}
	if err := ctl("tcp", "192.0.2.10:80", nil); err != nil {
		t.Fatalf("192.0.2.10: %v", err)
	}
}

// TestCalloutTimeoutFails: an endpoint that does not answer within the
// call's timeout fails the attempt; with no retry left the job is FAILED.
func TestCalloutTimeoutFails(t *testing.T) {
	release := make(chan struct{})
	ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer ep.Close()
	defer close(release)
	done := newCompletions()
	w := startWorkerReplica(t, func(c *Config) {
		c.Scheduler.RemoteTypes = append(c.Scheduler.RemoteTypes, "hook")
		c.Scheduler.Observer = done.rec
		c.Callout = callout.Config{AllowLoopback: true, Timeout: 300 * time.Millisecond,
			Secrets: map[string][]byte{"hook": calloutSecret}, Bindings: []callout.Binding{{JobType: "hook", URL: ep.URL}}}
	})
	code, body := w.call(adminToken, "POST", "/v1/jobs", map[string]any{"job_key": "hook-t", "job_type": "hook", "max_retry": 0})
	if code != http.StatusCreated {
		t.Fatalf("submit: %d %s", code, body)
	}
	var j struct{ ID uint64 }
	_ = json.Unmarshal(body, &j)
	c := waitCompletion(t, done, j.ID)
	if c.Outcome != jobq.OutcomeFailed || c.Retry || !strings.Contains(c.Error, "no answer") {
		t.Fatalf("completion %+v, want a failed attempt: no answer", c)
	}
	if r := w.row(j.ID); r.Status != "FAILED" {
		t.Fatalf("job %+v, want FAILED", r)
	}
}
