package app

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	jobqv1 "github.com/jobq/jobq/gen/jobq/v1"
	"github.com/jobq/jobq/gen/jobq/v1/jobqv1connect"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/scheduler/schedulertest"
	"github.com/jobq/jobq/service"
	"github.com/jobq/jobq/store"
)

const (
	adminToken  = "admin-token-0123456789"
	resizeToken = "wk-resize-0123456789"   // resize, no grants
	submitToken = "wk-submit-0123456789"   // resize, submit and read
	allToken    = "wk-all-types-012345678" // every remote type
)

// workerReplica is a replica whose job types resize and provision are run by
// remote workers and local by its own handler, with an admin token and
// three worker tokens.
type workerReplica struct {
	t    *testing.T
	r    *Replica
	base string
	db   *sql.DB
}

func startWorkerReplica(t *testing.T, mod func(*Config)) *workerReplica {
	t.Helper()
	reg := scheduler.NewRegistry()
	reg.Register("local", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error { return nil }))
	cfg := Config{DSN: testdb.DSN(t), Listen: "127.0.0.1:0", NoUI: true, Migrate: true, Registry: reg,
		AuthTokens: []string{adminToken},
		WorkerTokens: []service.WorkerCredential{
			{Token: resizeToken, Scope: service.WorkerScope{Types: []string{"resize"}}},
			{Token: submitToken, Scope: service.WorkerScope{Types: []string{"resize"}, Submit: true, Read: true}},
			{Token: allToken, Scope: service.WorkerScope{AllTypes: true}},
		},
		Scheduler: scheduler.Config{RemoteTypes: []string{"resize", "provision"}, PollInterval: 20 * time.Millisecond,
			Lease: 3 * time.Second, RescueInterval: time.Hour},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if mod != nil {
		mod(&cfg)
	}
	r, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	return &workerReplica{t: t, r: r, base: "http://" + r.Addr, db: r.Store.DB()}
}

// call sends method path with body (JSON-encoded unless a string) and the
// bearer token, and returns the status and body.
func (w *workerReplica) call(token, method, path string, body any) (int, []byte) {
	w.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			w.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, w.base+path, rd)
	if err != nil {
		w.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func (w *workerReplica) submit(key, jobType string) uint64 {
	w.t.Helper()
	code, body := w.call(adminToken, "POST", "/v1/jobs", map[string]any{"job_key": key, "job_type": jobType, "params": map[string]any{"n": 1}})
	if code != http.StatusCreated {
		w.t.Fatalf("submit %s: %d %s", key, code, body)
	}
	var j apitype.Job
	if err := json.Unmarshal(body, &j); err != nil {
		w.t.Fatal(err)
	}
	return j.ID
}

func (w *workerReplica) fetch(token, workerID string, types []string, max, waitMs int) []apitype.FetchedJob {
	w.t.Helper()
	code, body := w.call(token, "POST", "/v1/workers/fetch", map[string]any{"worker_id": workerID, "job_types": types, "max_jobs": max, "wait_ms": waitMs})
	if code != http.StatusOK {
		w.t.Fatalf("fetch: %d %s", code, body)
	}
	var resp apitype.FetchResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		w.t.Fatal(err)
	}
	return resp.Jobs
}

// jobRow is what a test asserts of one job_queue row.
type jobRow struct {
	Status, Owner, LeaseUntil string
	Attempt, RetryTimes       int
}

func (w *workerReplica) row(id uint64) jobRow {
	w.t.Helper()
	var r jobRow
	var owner, lease sql.NullString
	if err := w.db.QueryRow(`SELECT status, attempt, retry_times, owner, CAST(lease_until AS CHAR) FROM job_queue WHERE id = ?`, id).
		Scan(&r.Status, &r.Attempt, &r.RetryTimes, &owner, &lease); err != nil {
		w.t.Fatal(err)
	}
	r.Owner, r.LeaseUntil = owner.String, lease.String
	return r
}

// executions returns "attempt:outcome" of each execution row of id.
func (w *workerReplica) executions(id uint64) []string {
	w.t.Helper()
	rows, err := w.db.Query(`SELECT attempt, COALESCE(outcome, '') FROM job_attempt WHERE job_id = ? ORDER BY attempt`, id)
	if err != nil {
		w.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var a int
		var o string
		if err := rows.Scan(&a, &o); err != nil {
			w.t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%d:%s", a, o))
	}
	return out
}

func (w *workerReplica) count(q string, args ...any) int {
	w.t.Helper()
	var n int
	if err := w.db.QueryRow(q, args...).Scan(&n); err != nil {
		w.t.Fatal(err)
	}
	return n
}

// forge returns token with its secret replaced: the right job id and
// attempt, a wrong secret.
func forge(t *testing.T, token string) string {
	i := strings.LastIndexByte(token, '.')
	forged := token[:i+1] + "AAAAAAAAAAAAAAAAAAAAAA"
	if forged == token {
		forged = token[:i+1] + "BBBBBBBBBBBBBBBBBBBBBB"
	}
	return forged
}

func errorOf(t *testing.T, body []byte) apitype.ErrorDetail {
	t.Helper()
	var e apitype.ErrorBody
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %s: %v", body, err)
	}
	return e.Error
}

// A forged task token (right job id and attempt, wrong secret) is refused
// by every call and changes nothing; a stale token (its attempt was
// rescued and the job fetched again) is refused with 409 stale and changes
// nothing either.
func TestWorkerForgedAndStaleTokensChangeNothing(t *testing.T) {
	w := startWorkerReplica(t, nil)
	id := w.submit("forge-1", "resize")
	jobs := w.fetch(resizeToken, "w1", []string{"resize"}, 1, 0)
	if len(jobs) != 1 || jobs[0].ID != id || jobs[0].Attempt != 1 {
		t.Fatalf("fetch: %+v, want job %d attempt 1", jobs, id)
	}
	token := jobs[0].TaskToken
	forged := forge(t, token)
	before := w.row(id)
	if before.Status != "RUNNING" || before.Owner != "worker:w1" {
		t.Fatalf("after fetch: %+v, want RUNNING owned by worker:w1", before)
	}

	for _, outcome := range []map[string]any{
		{"task_token": forged, "outcome": "success", "output": map[string]any{"x": 1}},
		{"task_token": forged, "outcome": "failure", "error": "e", "retry": false},
		{"task_token": forged, "outcome": "release"},
	} {
		code, body := w.call(resizeToken, "POST", "/v1/workers/complete", outcome)
		if e := errorOf(t, body); code != http.StatusForbidden || e.Code != "forbidden" || e.Field != "task_token" {
			t.Fatalf("forged complete %v: %d %s, want 403 forbidden naming task_token", outcome["outcome"], code, body)
		}
		if strings.Contains(string(body), forged) || strings.Contains(string(body), resizeToken) {
			t.Fatalf("error body holds a token: %s", body)
		}
	}
	code, body := w.call(resizeToken, "POST", "/v1/workers/log", map[string]any{"task_token": forged, "lines": []string{"x"}})
	if code != http.StatusForbidden {
		t.Fatalf("forged log: %d %s, want 403", code, body)
	}
	code, body = w.call(resizeToken, "POST", "/v1/workers/progress", map[string]any{"task_token": forged, "progress": 0.5})
	if code != http.StatusForbidden {
		t.Fatalf("forged progress: %d %s, want 403", code, body)
	}
	// A heartbeat never tells a forged token from a stale one: lost, and the
	// lease is not renewed.
	code, body = w.call(resizeToken, "POST", "/v1/workers/heartbeat", map[string]any{"worker_id": "w1", "task_tokens": []string{forged}})
	var hb apitype.HeartbeatResponse
	if code != http.StatusOK || json.Unmarshal(body, &hb) != nil || len(hb.Results) != 1 || hb.Results[0].State != "lost" {
		t.Fatalf("forged heartbeat: %d %s, want one lost", code, body)
	}
	if got := w.row(id); got != before {
		t.Fatalf("after forged calls: %+v, want unchanged %+v", got, before)
	}
	if got := w.executions(id); len(got) != 0 {
		t.Fatalf("after forged calls: executions %v, want none", got)
	}
	if n := w.count(`SELECT COUNT(*) FROM job_log WHERE job_id = ?`, id) + w.count(`SELECT COUNT(*) FROM job_run_info WHERE job_id = ?`, id); n != 0 {
		t.Fatalf("after forged calls: %d log or progress rows, want 0", n)
	}

	// Stale: the lease runs out, the rescuer returns the job, another worker
	// fetches it (attempt 2). The first token changes nothing.
	if _, err := w.db.Exec(`UPDATE job_queue SET lease_until = NOW(6) - INTERVAL 1 SECOND WHERE id = ?`, id); err != nil {
		t.Fatal(err)
	}
	// The rescuer's own statement, run now instead of at RescueInterval.
	if ok, err := w.r.Store.JobRescueExpired(context.Background(), jobq.Fence{ID: id, Attempt: 1}); err != nil || !ok {
		t.Fatalf("rescue of job %d attempt 1: %v, %v; want rescued", id, ok, err)
	}
	again := w.fetch(allToken, "w2", []string{"resize"}, 1, 0)
	if len(again) != 1 || again[0].ID != id || again[0].Attempt != 2 {
		t.Fatalf("second fetch: %+v, want job %d attempt 2", again, id)
	}
	before = w.row(id)
	execsBefore := w.executions(id)
	for _, outcome := range []string{"success", "failure", "release"} {
		code, body := w.call(resizeToken, "POST", "/v1/workers/complete", map[string]any{"task_token": token, "outcome": outcome})
		if e := errorOf(t, body); code != http.StatusConflict || e.Code != "stale" || e.Field != "task_token" {
			t.Fatalf("stale complete %s: %d %s, want 409 stale naming task_token", outcome, code, body)
		}
	}
	code, body = w.call(resizeToken, "POST", "/v1/workers/log", map[string]any{"task_token": token, "lines": []string{"late"}})
	if e := errorOf(t, body); code != http.StatusConflict || e.Code != "stale" {
		t.Fatalf("stale log: %d %s, want 409 stale", code, body)
	}
	code, body = w.call(resizeToken, "POST", "/v1/workers/heartbeat", map[string]any{"worker_id": "w1", "task_tokens": []string{token}})
	if code != http.StatusOK || json.Unmarshal(body, &hb) != nil || hb.Results[0].State != "lost" {
		t.Fatalf("stale heartbeat: %d %s, want lost", code, body)
	}
	if got := w.row(id); got != before || got.Attempt != 2 || got.Owner != "worker:w2" {
		t.Fatalf("after stale calls: %+v, want unchanged %+v", got, before)
	}
	if got := w.executions(id); fmt.Sprint(got) != fmt.Sprint(execsBefore) || fmt.Sprint(got) != "[1:LEASE_EXPIRED]" {
		t.Fatalf("after stale calls: executions %v, want %v", got, execsBefore)
	}
	if n := w.count(`SELECT COUNT(*) FROM job_log WHERE job_id = ?`, id); n != 0 {
		t.Fatalf("after stale calls: %d log lines, want 0", n)
	}
}

// A completion whose answer was lost and that the worker sends again
// answers applied and writes one execution outcome; a different outcome
// after that is a 409 conflict and changes nothing.
func TestWorkerCompletionIsIdempotent(t *testing.T) {
	w := startWorkerReplica(t, nil)
	id := w.submit("ack-1", "resize")
	jobs := w.fetch(resizeToken, "w1", []string{"resize"}, 1, 0)
	if len(jobs) != 1 {
		t.Fatalf("fetch: %+v", jobs)
	}
	done := map[string]any{"task_token": jobs[0].TaskToken, "outcome": "success", "output": map[string]any{"ip": "10.0.0.7"}}
	for i := range 2 {
		code, body := w.call(resizeToken, "POST", "/v1/workers/complete", done)
		var res apitype.CompleteResponse
		if code != http.StatusOK || json.Unmarshal(body, &res) != nil || res.Result != "applied" || res.Status != "SUCCESS" || res.JobID != id {
			t.Fatalf("completion %d: %d %s, want 200 applied SUCCESS", i+1, code, body)
		}
	}
	if got := w.executions(id); fmt.Sprint(got) != "[1:SUCCESS]" {
		t.Fatalf("executions %v, want one SUCCESS", got)
	}
	before := w.row(id)
	code, body := w.call(resizeToken, "POST", "/v1/workers/complete", map[string]any{"task_token": jobs[0].TaskToken, "outcome": "failure", "error": "late"})
	if e := errorOf(t, body); code != http.StatusConflict || e.Code != "conflict" || e.Field != "outcome" {
		t.Fatalf("different outcome: %d %s, want 409 conflict naming outcome", code, body)
	}
	if got := w.row(id); got != before {
		t.Fatalf("after conflict: %+v, want %+v", got, before)
	}
	code, body = w.call(adminToken, "GET", fmt.Sprintf("/v1/jobs/%d", id), nil)
	var j apitype.Job
	if code != http.StatusOK || json.Unmarshal(body, &j) != nil || string(j.Output) != `{"ip":"10.0.0.7"}` {
		t.Fatalf("GET job: %d %s, want output {\"ip\":\"10.0.0.7\"}", code, body)
	}
}

// A cancel of a running remote job reaches the worker's next heartbeat as
// cancel_requested (the lease still renewed); the worker's failure then
// ends the job CANCELED.
func TestWorkerHeartbeatCarriesCancel(t *testing.T) {
	w := startWorkerReplica(t, nil)
	id := w.submit("cancel-1", "resize")
	jobs := w.fetch(resizeToken, "w1", []string{"resize"}, 1, 0)
	if len(jobs) != 1 {
		t.Fatalf("fetch: %+v", jobs)
	}
	hbBody := map[string]any{"worker_id": "w1", "task_tokens": []string{jobs[0].TaskToken}}
	var hb apitype.HeartbeatResponse
	code, body := w.call(resizeToken, "POST", "/v1/workers/heartbeat", hbBody)
	if code != http.StatusOK || json.Unmarshal(body, &hb) != nil || hb.Results[0].State != "renewed" || hb.Results[0].LeaseUntil == nil {
		t.Fatalf("heartbeat: %d %s, want renewed with a deadline", code, body)
	}
	if code, body := w.call(adminToken, "POST", fmt.Sprintf("/v1/jobs/%d/cancel", id), nil); code != http.StatusOK {
		t.Fatalf("cancel: %d %s", code, body)
	}
	code, body = w.call(resizeToken, "POST", "/v1/workers/heartbeat", hbBody)
	if code != http.StatusOK || json.Unmarshal(body, &hb) != nil || hb.Results[0].State != "cancel_requested" || hb.Results[0].LeaseUntil == nil {
		t.Fatalf("heartbeat after cancel: %d %s, want cancel_requested", code, body)
	}
	code, body = w.call(resizeToken, "POST", "/v1/workers/complete", map[string]any{"task_token": jobs[0].TaskToken, "outcome": "failure", "error": "canceled"})
	var res apitype.CompleteResponse
	if code != http.StatusOK || json.Unmarshal(body, &res) != nil || res.Status != "CANCELED" {
		t.Fatalf("complete after cancel: %d %s, want applied CANCELED", code, body)
	}
	if got := w.row(id); got.Status != "CANCELED" {
		t.Fatalf("job after cancel: %+v", got)
	}
}

// A fetch waiting for work is answered by a submit on the same replica at
// once: with its own scan set to an hour, only the wake-up can answer it.
func TestWorkerFetchWokenBySubmit(t *testing.T) {
	claims := &emptyFetchClaim{owner: jobq.WorkerOwnerPrefix + "waiter", empty: make(chan struct{})}
	w := startWorkerReplica(t, func(c *Config) {
		c.Scheduler.RemoteScanInterval = time.Hour
		c.WrapStoreFunc = func(st *store.Store) scheduler.Store { claims.Store = st; return claims }
	})
	got := make(chan []apitype.FetchedJob, 1)
	go func() {
		code, body := w.call(resizeToken, "POST", "/v1/workers/fetch", map[string]any{"worker_id": "waiter", "job_types": []string{"resize"}, "max_jobs": 1, "wait_ms": 60000})
		var resp apitype.FetchResponse
		if code != http.StatusOK || json.Unmarshal(body, &resp) != nil {
			t.Errorf("fetch: %d %s", code, body)
		}
		got <- resp.Jobs
	}()
	// The fetch's first claim found nothing: it now waits, its wake-up
	// channel taken before that claim, so the job submitted next can reach
	// it only by the wake-up.
	select {
	case <-claims.empty:
	case <-time.After(time.Minute):
		t.Fatal("timed out after 1m0s waiting for the fetch's first claim")
	}
	id := w.submit("wake-1", "resize")
	jobs := <-got
	if len(jobs) != 1 || jobs[0].ID != id {
		t.Fatalf("woken fetch: %+v, want job %d", jobs, id)
	}
}

// emptyFetchClaim is the real store whose fetch claims for owner say when
// the first of them came back empty (empty is closed).
type emptyFetchClaim struct {
	*store.Store
	owner string
	once  sync.Once
	empty chan struct{}
}

func (s *emptyFetchClaim) JobClaimRemote(ctx context.Context, p jobq.RemoteClaimParams) ([]jobq.ClaimedJob, error) {
	jobs, err := s.Store.JobClaimRemote(ctx, p)
	if err == nil && len(jobs) == 0 && p.Owner == s.owner {
		s.once.Do(func() { close(s.empty) })
	}
	return jobs, err
}

// Jobs of a remote type never run in the replica's handlers: the scan goes
// on (its count grows) and the job stays WAITING, attempt 0, until a
// worker fetches it. A type both remote and handled refuses to start.
func TestRemoteTypesNeverRunInProcess(t *testing.T) {
	rec := schedulertest.NewRecorder()
	w := startWorkerReplica(t, func(c *Config) { c.Scheduler.Observer = rec })
	remoteID := w.submit("lane-remote", "resize")
	mark := rec.Mark()
	localID := w.submit("lane-local", "local")
	rec.WaitFor(t, scheduler.EventCompleted, schedulertest.Finished(localID, jobq.OutcomeSuccess), time.Minute)
	rec.WaitAfterN(t, mark, scheduler.EventScanned, nil, 5, time.Minute)
	if got := w.row(remoteID); got.Status != "WAITING" || got.Attempt != 0 {
		t.Fatalf("remote job after 5 scans: %+v, want WAITING attempt 0", got)
	}
	var lane int
	if err := w.db.QueryRow(`SELECT lane FROM job_queue WHERE id = ?`, remoteID).Scan(&lane); err != nil || lane != 1 {
		t.Fatalf("lane of the remote job: %d %v, want 1", lane, err)
	}

	reg := scheduler.NewRegistry()
	reg.Register("resize", scheduler.HandlerFunc(func(context.Context, *scheduler.Job) error { return nil }))
	_, err := Start(context.Background(), Config{DSN: testdb.DSN(t), Listen: "127.0.0.1:0", NoUI: true, Migrate: true, Registry: reg,
		Scheduler: scheduler.Config{RemoteTypes: []string{"resize"}}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil || !strings.Contains(err.Error(), `"resize"`) {
		t.Fatalf("a type both remote and handled: err = %v, want a refusal naming it", err)
	}
}

// Worker tokens are scoped: no submit without the grant, no job type
// outside the token's, no other route; admin tokens may call the worker
// routes. Refusals are 403 naming the field and change nothing.
func TestWorkerTokenScope(t *testing.T) {
	w := startWorkerReplica(t, nil)
	jobs := func() int { return w.count(`SELECT COUNT(*) FROM job_queue`) }
	submit := map[string]any{"job_key": "scope-1", "job_type": "resize", "params": map[string]any{}}
	cases := []struct {
		name, token, method, path string
		body                      any
		code                      int
		field                     string
	}{
		{"submit without the grant", resizeToken, "POST", "/v1/jobs", submit, 403, "Authorization"},
		{"batch without the grant", resizeToken, "POST", "/v1/jobs:batch", map[string]any{"jobs": []any{submit}}, 403, "Authorization"},
		{"submit another type", submitToken, "POST", "/v1/jobs", map[string]any{"job_key": "scope-2", "job_type": "provision", "params": map[string]any{}}, 403, "job_type"},
		{"fetch another type", resizeToken, "POST", "/v1/workers/fetch", map[string]any{"worker_id": "w", "job_types": []string{"provision"}, "max_jobs": 1, "wait_ms": 0}, 403, "job_types"},
		{"list jobs", submitToken, "GET", "/v1/jobs", nil, 403, "Authorization"},
		{"list workers", submitToken, "GET", "/v1/workers", nil, 403, "Authorization"},
		{"cancel", submitToken, "POST", "/v1/jobs/1/cancel", nil, 403, "Authorization"},
		{"types", submitToken, "GET", "/v1/types", nil, 403, "Authorization"},
		{"unknown token", "wk-unknown-0123456789", "POST", "/v1/workers/fetch", map[string]any{}, 401, "Authorization"},
		{"no token", "", "POST", "/v1/workers/fetch", map[string]any{}, 401, "Authorization"},
	}
	for _, c := range cases {
		before := jobs()
		code, body := w.call(c.token, c.method, c.path, c.body)
		if e := errorOf(t, body); code != c.code || e.Field != c.field {
			t.Errorf("%s: %d %s, want %d naming %s", c.name, code, body, c.code, c.field)
		}
		if strings.Contains(string(body), c.token) && c.token != "" {
			t.Errorf("%s: the error body holds the token", c.name)
		}
		if after := jobs(); after != before {
			t.Errorf("%s: %d jobs, want %d (nothing written)", c.name, after, before)
		}
	}
	// With the submit grant, within its types: submit and read.
	code, body := w.call(submitToken, "POST", "/v1/jobs", submit)
	if code != http.StatusCreated {
		t.Fatalf("submit with the grant: %d %s", code, body)
	}
	var j apitype.Job
	_ = json.Unmarshal(body, &j)
	if code, body := w.call(submitToken, "GET", fmt.Sprintf("/v1/jobs/%d", j.ID), nil); code != http.StatusOK {
		t.Fatalf("read with the grant: %d %s", code, body)
	}
	if code, body := w.call(resizeToken, "GET", fmt.Sprintf("/v1/jobs/%d", j.ID), nil); code != http.StatusForbidden {
		t.Fatalf("read without the grant: %d %s, want 403", code, body)
	}
	// A "*" token takes every remote type; an admin token may fetch too.
	if got := w.fetch(allToken, "w-all", []string{"resize", "provision"}, 1, 0); len(got) != 1 || got[0].ID != j.ID {
		t.Fatalf("fetch with *: %+v", got)
	}
	if got := w.fetch(adminToken, "w-admin", []string{"resize"}, 1, 0); len(got) != 0 {
		t.Fatalf("admin fetch of an empty queue: %+v", got)
	}
	if code, body := w.call(adminToken, "GET", "/v1/workers", nil); code != http.StatusOK || !strings.Contains(string(body), `"w-all"`) {
		t.Fatalf("admin lists workers: %d %s", code, body)
	}
}

// Every bad worker request gets a 4xx naming the field and the rule, and
// nothing is written.
func TestWorkerBadRequestsNameTheField(t *testing.T) {
	w := startWorkerReplica(t, nil)
	id := w.submit("bad-1", "resize")
	jobs := w.fetch(resizeToken, "w1", []string{"resize"}, 1, 0)
	if len(jobs) != 1 {
		t.Fatal("no job fetched")
	}
	tok := jobs[0].TaskToken
	fetch := func(kv ...any) map[string]any {
		m := map[string]any{"worker_id": "w1", "job_types": []string{"resize"}, "max_jobs": 1, "wait_ms": 0}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(m, kv[i].(string))
			} else {
				m[kv[i].(string)] = kv[i+1]
			}
		}
		return m
	}
	big := strings.Repeat("x", 70000)
	cases := []struct {
		name, path string
		body       any
		code       int
		field      string
	}{
		{"fetch: no worker_id", "/v1/workers/fetch", fetch("worker_id", nil), 400, "worker_id"},
		{"fetch: long worker_id", "/v1/workers/fetch", fetch("worker_id", strings.Repeat("w", 122)), 400, "worker_id"},
		{"fetch: no job_types", "/v1/workers/fetch", fetch("job_types", []string{}), 400, "job_types"},
		{"fetch: a local type", "/v1/workers/fetch", fetch("job_types", []string{"local"}), 400, "job_types"},
		{"fetch: max_jobs 0", "/v1/workers/fetch", fetch("max_jobs", 0), 400, "max_jobs"},
		{"fetch: max_jobs 1001", "/v1/workers/fetch", fetch("max_jobs", 1001), 400, "max_jobs"},
		{"fetch: wait_ms 60001", "/v1/workers/fetch", fetch("wait_ms", 60001), 400, "wait_ms"},
		{"fetch: wait_ms a string", "/v1/workers/fetch", fetch("wait_ms", "soon"), 400, "wait_ms"},
		{"fetch: unknown field", "/v1/workers/fetch", fetch("colour", "red"), 400, "colour"},
		{"fetch: not JSON", "/v1/workers/fetch", "{", 400, "body"},
		{"heartbeat: no tokens", "/v1/workers/heartbeat", map[string]any{"worker_id": "w1", "task_tokens": []string{}}, 400, "task_tokens"},
		{"complete: no outcome", "/v1/workers/complete", map[string]any{"task_token": tok}, 400, "outcome"},
		{"complete: unknown outcome", "/v1/workers/complete", map[string]any{"task_token": tok, "outcome": "maybe"}, 400, "outcome"},
		{"complete: malformed token", "/v1/workers/complete", map[string]any{"task_token": "jqt1.x", "outcome": "success"}, 400, "task_token"},
		{"complete: output on failure", "/v1/workers/complete", map[string]any{"task_token": tok, "outcome": "failure", "output": 1}, 400, "output"},
		{"complete: output too deep", "/v1/workers/complete", map[string]any{"task_token": tok, "outcome": "success", "output": json.RawMessage(strings.Repeat("[", 101) + strings.Repeat("]", 101))}, 400, "output"},
		{"complete: output too large", "/v1/workers/complete", map[string]any{"task_token": tok, "outcome": "success", "output": map[string]any{"data": big}}, 413, "output"},
		{"log: no lines", "/v1/workers/log", map[string]any{"task_token": tok, "lines": []string{}}, 400, "lines"},
		{"log: a line too long", "/v1/workers/log", map[string]any{"task_token": tok, "lines": []string{strings.Repeat("l", 4097)}}, 413, "lines"},
		{"progress: over 1", "/v1/workers/progress", map[string]any{"task_token": tok, "progress": 1.5}, 400, "progress"},
		{"progress: no progress", "/v1/workers/progress", map[string]any{"task_token": tok}, 400, "progress"},
		{"progress: long message", "/v1/workers/progress", map[string]any{"task_token": tok, "progress": 0.1, "message": strings.Repeat("m", 257)}, 400, "message"},
	}
	before := w.row(id)
	for _, c := range cases {
		code, body := w.call(resizeToken, "POST", c.path, c.body)
		e := errorOf(t, body)
		if code != c.code || e.Field != c.field || !strings.HasPrefix(e.Message, c.field+": ") || len(e.Message) <= len(c.field)+2 {
			t.Errorf("%s: %d %s, want %d naming %s and its rule", c.name, code, body, c.code, c.field)
		}
	}
	if got := w.row(id); got != before {
		t.Fatalf("after bad requests: %+v, want %+v", got, before)
	}
	if got := w.executions(id); len(got) != 0 {
		t.Fatalf("after bad requests: executions %v", got)
	}
	// The log limit per attempt: 64 KiB in all; a call that would pass it
	// appends nothing.
	line := strings.Repeat("a", 4096)
	for i := range 16 {
		if code, body := w.call(resizeToken, "POST", "/v1/workers/log", map[string]any{"task_token": tok, "lines": []string{line}}); code != 200 {
			t.Fatalf("log line %d: %d %s", i+1, code, body)
		}
	}
	code, body := w.call(resizeToken, "POST", "/v1/workers/log", map[string]any{"task_token": tok, "lines": []string{"one more"}})
	if e := errorOf(t, body); code != 413 || e.Field != "lines" {
		t.Fatalf("log past 64 KiB: %d %s, want 413 naming lines", code, body)
	}
	if n := w.count(`SELECT COUNT(*) FROM job_log WHERE job_id = ?`, id); n != 16 {
		t.Fatalf("log lines: %d, want 16", n)
	}
}

// The worker protocol over Connect (WorkerService) answers as over HTTP:
// fetch, a forged token PermissionDenied, a completion applied and a
// different one Aborted, a stale log FailedPrecondition.
func TestWorkerServiceOverConnect(t *testing.T) {
	w := startWorkerReplica(t, nil)
	id := w.submit("connect-1", "resize")
	c := jobqv1connect.NewWorkerServiceClient(http.DefaultClient, w.base)
	auth := func(m any) {
		switch r := m.(type) {
		case interface{ Header() http.Header }:
			r.Header().Set("Authorization", "Bearer "+resizeToken)
		}
	}
	freq := connect.NewRequest(&jobqv1.FetchRequest{WorkerId: "cw", JobTypes: []string{"resize"}, MaxJobs: 1, WaitMs: proto.Int32(0)})
	auth(freq)
	fresp, err := c.Fetch(context.Background(), freq)
	if err != nil || len(fresp.Msg.Jobs) != 1 || fresp.Msg.Jobs[0].Id != id {
		t.Fatalf("Fetch: %v %v", fresp, err)
	}
	tok := fresp.Msg.Jobs[0].TaskToken
	complete := func(token, outcome string) error {
		req := connect.NewRequest(&jobqv1.CompleteRequest{TaskToken: token, Outcome: outcome, Output: `{"ok":true}`})
		if outcome != "success" {
			req.Msg.Output = ""
		}
		auth(req)
		_, err := c.Complete(context.Background(), req)
		return err
	}
	if err := complete(forge(t, tok), "success"); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("forged Complete: %v, want PermissionDenied", err)
	}
	if err := complete(tok, "success"); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if err := complete(tok, "failure"); connect.CodeOf(err) != connect.CodeAborted || !strings.Contains(err.Error(), "outcome: ") {
		t.Fatalf("different outcome: %v, want Aborted naming outcome", err)
	}
	lreq := connect.NewRequest(&jobqv1.AppendLogRequest{TaskToken: tok, Lines: []string{"late"}})
	auth(lreq)
	if _, err := c.AppendLog(context.Background(), lreq); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("log after completion: %v, want FailedPrecondition (stale)", err)
	}
	if got := w.row(id); got.Status != "SUCCESS" {
		t.Fatalf("job: %+v", got)
	}
}

// A fetch whose client went away after its claim gives the jobs back:
// WAITING again, no retry spent, the attempt recorded RELEASED.
func TestWorkerFetchOfAGoneClientReleases(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := startWorkerReplica(t, func(c *Config) {
		c.Scheduler.Observer = scheduler.ObserverFunc(func(e scheduler.Event) {
			if e.Kind == scheduler.EventFetchClaimed && len(e.Jobs) > 0 && e.Jobs[0].JobType == "resize" {
				cancel() // the client goes away between the claim and the answer
			}
		})
	})
	id := w.submit("gone-1", "resize")
	jobs, err := w.r.Scheduler.Remote().Fetch(ctx, scheduler.FetchParams{WorkerID: "gone", Types: []string{"resize"}, MaxJobs: 1})
	if err == nil || len(jobs) != 0 {
		t.Fatalf("fetch of a gone client: %v %v, want the context's error and no job", jobs, err)
	}
	if got := w.row(id); got.Status != "WAITING" || got.Attempt != 1 || got.RetryTimes != 0 {
		t.Fatalf("after the gone fetch: %+v, want WAITING, attempt 1, no retry spent", got)
	}
	if got := w.executions(id); fmt.Sprint(got) != "[1:RELEASED]" {
		t.Fatalf("executions %v, want [1:RELEASED]", got)
	}
	// The next fetch takes it.
	if got := w.fetch(resizeToken, "next", []string{"resize"}, 1, 0); len(got) != 1 || got[0].Attempt != 2 {
		t.Fatalf("next fetch: %+v, want attempt 2", got)
	}
}

// An in-process handler's output, log lines and progress are kept per
// attempt and shown like a worker's.
func TestHandlerOutputLogProgress(t *testing.T) {
	rec := schedulertest.NewRecorder()
	w := startWorkerReplica(t, func(c *Config) {
		c.Scheduler.Observer = rec
		c.Registry.Register("report", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
			if err := job.Log("step one", "step two"); err != nil {
				return err
			}
			if err := job.Progress(0.75, "three of four"); err != nil {
				return err
			}
			return job.SetOutput(map[string]any{"attempt": job.Attempt, "key": job.JobKey})
		}))
	})
	id := w.submit("report-1", "report")
	rec.WaitFor(t, scheduler.EventCompleted, schedulertest.Finished(id, jobq.OutcomeSuccess), time.Minute)
	code, body := w.call(adminToken, "GET", fmt.Sprintf("/v1/jobs/%d", id), nil)
	var j apitype.Job
	if code != 200 || json.Unmarshal(body, &j) != nil || string(j.Output) != `{"attempt":1,"key":"report-1"}` {
		t.Fatalf("GET job: %d %s", code, body)
	}
	code, body = w.call(adminToken, "GET", fmt.Sprintf("/v1/jobs/%d/executions", id), nil)
	var ex apitype.ExecutionList
	if code != 200 || json.Unmarshal(body, &ex) != nil || len(ex.Executions) != 1 || ex.Executions[0].Progress == nil ||
		*ex.Executions[0].Progress != 0.75 || ex.Executions[0].ProgressMessage != "three of four" || string(ex.Executions[0].Output) != string(j.Output) {
		t.Fatalf("executions: %d %s", code, body)
	}
	code, body = w.call(adminToken, "GET", fmt.Sprintf("/v1/jobs/%d/logs", id), nil)
	var page apitype.LogPage
	if code != 200 || json.Unmarshal(body, &page) != nil || page.Attempt != 1 || len(page.Lines) != 2 || page.Lines[1].Line != "step two" || page.NextAfter != 2 {
		t.Fatalf("logs: %d %s", code, body)
	}
	code, body = w.call(adminToken, "GET", fmt.Sprintf("/v1/jobs/%d/logs?after=1", id), nil)
	if code != 200 || json.Unmarshal(body, &page) != nil || len(page.Lines) != 1 || page.Lines[0].Seq != 2 {
		t.Fatalf("logs after 1: %d %s", code, body)
	}
	// Retention deletes them with the job.
	if _, err := w.db.Exec("UPDATE job_queue SET finished_at = NOW(6) - INTERVAL 2 DAY, create_time = NOW(6) - INTERVAL 3 DAY WHERE id = ?", id); err != nil {
		t.Fatal(err)
	}
	if _, err := w.r.Store.JobPurge(context.Background(), jobq.PurgeParams{OlderThan: 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	if n := w.count("SELECT COUNT(*) FROM job_log WHERE job_id = ?", id) + w.count("SELECT COUNT(*) FROM job_run_info WHERE job_id = ?", id); n != 0 {
		t.Fatalf("after purge: %d log/progress rows, want 0", n)
	}
}

// A fetch may wait longer than the server's read and write timeouts: its
// answer still arrives (an empty one when its wait passes), over HTTP.
func TestWorkerFetchOutlivesServerTimeouts(t *testing.T) {
	w := startWorkerReplica(t, func(c *Config) {
		c.ReadTimeout, c.WriteTimeout = 200*time.Millisecond, 200*time.Millisecond
	})
	if got := w.fetch(resizeToken, "patient", []string{"resize"}, 1, 1000); len(got) != 0 {
		t.Fatalf("fetch of an empty queue: %+v", got)
	}
	id := w.submit("patient-1", "resize")
	if got := w.fetch(resizeToken, "patient", []string{"resize"}, 1, 1000); len(got) != 1 || got[0].ID != id {
		t.Fatalf("fetch: %+v, want job %d", got, id)
	}
}

// The longest worker_id allowed fetches: its owner ("worker:" + id) fits
// job_queue.owner.
func TestWorkerLongestWorkerIDFetches(t *testing.T) {
	w := startWorkerReplica(t, nil)
	id := w.submit("long-id-1", "resize")
	wid := strings.Repeat("é", service.MaxWorkerIDRunes)
	jobs := w.fetch(resizeToken, wid, []string{"resize"}, 1, 0)
	if len(jobs) != 1 || jobs[0].ID != id {
		t.Fatalf("fetch with a %d-character worker_id: %+v", service.MaxWorkerIDRunes, jobs)
	}
	if n := w.count(`SELECT COUNT(*) FROM job_queue WHERE id = ? AND owner = ?`, id, "worker:"+wid); n != 1 {
		t.Fatalf("owner of the fetched job: %d rows with worker:<id>, want 1", n)
	}
}

// A worker token's scope refusals over Connect are PermissionDenied, as
// HTTP answers 403, and write nothing.
func TestWorkerTokenScopeOverConnect(t *testing.T) {
	w := startWorkerReplica(t, nil)
	resize := w.submit("scope-c-1", "resize")
	provision := w.submit("scope-c-2", "provision")
	c := jobqv1connect.NewJobServiceClient(http.DefaultClient, w.base)
	with := func(token string, r interface{ Header() http.Header }) {
		r.Header().Set("Authorization", "Bearer "+token)
	}
	cases := []struct {
		name string
		call func() error
	}{
		{"GetJob without the read grant", func() error {
			r := connect.NewRequest(&jobqv1.GetJobRequest{Id: resize})
			with(resizeToken, r)
			_, err := c.GetJob(context.Background(), r)
			return err
		}},
		{"GetJob of another type", func() error {
			r := connect.NewRequest(&jobqv1.GetJobRequest{Id: provision})
			with(submitToken, r)
			_, err := c.GetJob(context.Background(), r)
			return err
		}},
		{"ListExecutions without the read grant", func() error {
			r := connect.NewRequest(&jobqv1.ListExecutionsRequest{Id: resize})
			with(resizeToken, r)
			_, err := c.ListExecutions(context.Background(), r)
			return err
		}},
		{"ListExecutions of another type", func() error {
			r := connect.NewRequest(&jobqv1.ListExecutionsRequest{Id: provision})
			with(submitToken, r)
			_, err := c.ListExecutions(context.Background(), r)
			return err
		}},
		{"SubmitJob without the submit grant", func() error {
			r := connect.NewRequest(&jobqv1.SubmitJobRequest{JobKey: "scope-c-3", JobType: "resize"})
			with(resizeToken, r)
			_, err := c.SubmitJob(context.Background(), r)
			return err
		}},
		{"SubmitJob of another type", func() error {
			r := connect.NewRequest(&jobqv1.SubmitJobRequest{JobKey: "scope-c-4", JobType: "provision"})
			with(submitToken, r)
			_, err := c.SubmitJob(context.Background(), r)
			return err
		}},
	}
	for _, tc := range cases {
		before := w.count(`SELECT COUNT(*) FROM job_queue`)
		if err := tc.call(); connect.CodeOf(err) != connect.CodePermissionDenied {
			t.Errorf("%s: %v (%v), want permission_denied", tc.name, connect.CodeOf(err), err)
		}
		if after := w.count(`SELECT COUNT(*) FROM job_queue`); after != before {
			t.Errorf("%s: %d jobs, want %d", tc.name, after, before)
		}
	}
}

// A failure's error is kept to its first 2,000 characters, as
// docs/workers.md says (service.MaxCompleteErrRunes).
func TestWorkerFailureErrorIsCutAt2000(t *testing.T) {
	w := startWorkerReplica(t, nil)
	id := w.submit("err-cut-1", "resize")
	jobs := w.fetch(resizeToken, "w1", []string{"resize"}, 1, 0)
	if len(jobs) != 1 {
		t.Fatal("no job fetched")
	}
	code, body := w.call(resizeToken, "POST", "/v1/workers/complete", map[string]any{
		"task_token": jobs[0].TaskToken, "outcome": "failure", "retry": false, "error": strings.Repeat("é", 2100)})
	if code != http.StatusOK {
		t.Fatalf("complete: %d %s", code, body)
	}
	if n := w.count(`SELECT CHAR_LENGTH(last_error) FROM job_queue WHERE id = ?`, id); n != 2000 || service.MaxCompleteErrRunes != 2000 {
		t.Fatalf("last_error: %d characters (MaxCompleteErrRunes %d), want 2000", n, service.MaxCompleteErrRunes)
	}
	if n := w.count(`SELECT CHAR_LENGTH(error) FROM job_attempt WHERE job_id = ?`, id); n != 2000 {
		t.Fatalf("the execution's error: %d characters, want 2000", n)
	}
}

// A remote run past its job's timeout_ms by more than a heartbeat interval
// is failed by the replica at the worker's next heartbeat, as an
// in-process timeout is (a retryable failure, "job timeout" in the
// error), and the token is lost: the worker's late success is refused as
// stale and changes nothing.
func TestWorkerRunPastTimeoutFailsAtHeartbeat(t *testing.T) {
	w := startWorkerReplica(t, nil)
	code, body := w.call(adminToken, "POST", "/v1/jobs", map[string]any{"job_key": "slow-1", "job_type": "resize",
		"params": map[string]any{}, "timeout_ms": 1000, "max_retry": 1})
	if code != http.StatusCreated {
		t.Fatalf("submit: %d %s", code, body)
	}
	var j apitype.Job
	if err := json.Unmarshal(body, &j); err != nil {
		t.Fatal(err)
	}
	jobs := w.fetch(resizeToken, "w1", []string{"resize"}, 1, 0)
	if len(jobs) != 1 {
		t.Fatalf("fetch: %+v", jobs)
	}
	hbBody := map[string]any{"worker_id": "w1", "task_tokens": []string{jobs[0].TaskToken}}
	var hb apitype.HeartbeatResponse
	if code, body := w.call(resizeToken, "POST", "/v1/workers/heartbeat", hbBody); code != http.StatusOK ||
		json.Unmarshal(body, &hb) != nil || hb.Results[0].State != "renewed" {
		t.Fatalf("heartbeat within the timeout: %d %s, want renewed", code, body)
	}
	// The run started an hour ago on the database clock: far past its
	// 1 s timeout and any heartbeat interval.
	if _, err := w.db.Exec(`UPDATE job_queue SET started_at = started_at - INTERVAL 1 HOUR WHERE id = ?`, j.ID); err != nil {
		t.Fatal(err)
	}
	if code, body := w.call(resizeToken, "POST", "/v1/workers/heartbeat", hbBody); code != http.StatusOK ||
		json.Unmarshal(body, &hb) != nil || hb.Results[0].State != "lost" {
		t.Fatalf("heartbeat past the timeout: %d %s, want lost", code, body)
	}
	var lastErr string
	if err := w.db.QueryRow(`SELECT COALESCE(last_error, '') FROM job_queue WHERE id = ?`, j.ID).Scan(&lastErr); err != nil {
		t.Fatal(err)
	}
	if got := w.row(j.ID); got.Status == "RUNNING" || got.RetryTimes != 1 || !strings.Contains(lastErr, "timeout after 1s") {
		t.Fatalf("job after the timed-out heartbeat: %+v, last_error %q; want a retried failure naming the timeout", got, lastErr)
	}
	if got := w.executions(j.ID); len(got) != 1 || got[0] != "1:FAILED" {
		t.Fatalf("executions %v, want 1:FAILED", got)
	}
	code, body = w.call(resizeToken, "POST", "/v1/workers/complete", map[string]any{"task_token": jobs[0].TaskToken, "outcome": "success"})
	if code != http.StatusConflict {
		t.Fatalf("late success: %d %s, want 409 stale", code, body)
	}
	if got := w.executions(j.ID); len(got) != 1 || got[0] != "1:FAILED" {
		t.Fatalf("executions after the late success %v, want 1:FAILED only", got)
	}
}

// A rate limit binds remote workers' fetches too: with 3 starts per hour
// on a remote type and 5 jobs due, fetches of 10 take 3, then none, and the
// 2 others stay WAITING.
func TestWorkerFetchHonoursRateLimit(t *testing.T) {
	ctx := context.Background()
	w := startWorkerReplica(t, nil)
	if _, err := w.r.Store.TypeSetRateLimit(ctx, "resize", jobq.RateLimit{Starts: 3, Period: time.Hour}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		w.submit(fmt.Sprintf("rated-%d", i), "resize")
	}
	fetch := func() []scheduler.FetchedJob {
		t.Helper()
		jobs, err := w.r.Scheduler.Remote().Fetch(ctx, scheduler.FetchParams{WorkerID: "rated", Types: []string{"resize"}, MaxJobs: 10})
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
		return jobs
	}
	if got := fetch(); len(got) != 3 {
		t.Fatalf("first fetch took %d jobs, want the 3 the window allows", len(got))
	}
	if got := fetch(); len(got) != 0 {
		t.Fatalf("second fetch in the same window took %d jobs, want 0", len(got))
	}
	var waiting int
	if err := w.db.QueryRow("SELECT COUNT(*) FROM job_queue WHERE job_type = 'resize' AND status = 'WAITING'").Scan(&waiting); err != nil || waiting != 2 {
		t.Fatalf("WAITING resize jobs = %d (err %v), want 2", waiting, err)
	}
}
