package alert_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/alert"
	"github.com/jobq/jobq/app"
	"github.com/jobq/jobq/egress"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/store"
)

func TestMain(m *testing.M) { testdb.Main(m) }

var _ alert.Store = (*store.Store)(nil)

var secret = []byte("alert-secret-0123456789")

// hook is a test webhook: it verifies each request's signature, records
// it, and answers with the next status of its script (200 once the script
// is used up).
type hook struct {
	srv *httptest.Server
	got chan message

	mu     sync.Mutex
	script []int
	all    []message
}

type message struct {
	path, key string
	body      []byte
	sigErr    error
	at        time.Time
}

func newHook(t *testing.T, script ...int) *hook {
	h := &hook{got: make(chan message, 100), script: script}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m := message{path: r.URL.Path, key: r.Header.Get(alert.HeaderIdempotencyKey), body: body, at: time.Now(),
			sigErr: egress.Verify(secret, r.Header, body, time.Now(), egress.MaxSkewDefault)}
		h.mu.Lock()
		h.all = append(h.all, m)
		code := 200
		if len(h.script) > 0 {
			code, h.script = h.script[0], h.script[1:]
		}
		h.mu.Unlock()
		h.got <- m
		w.WriteHeader(code)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hook) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.all)
}

// next returns the next message, failing after 30s.
func (h *hook) next(t *testing.T) message {
	t.Helper()
	select {
	case m := <-h.got:
		return m
	case <-time.After(30 * time.Second):
		t.Fatal("the webhook got no message within 30s")
		return message{}
	}
}

// replica starts a replica on dsn whose job type "boom" always fails.
func replica(t *testing.T, dsn, owner string, allowLoopback bool, mod func(*alert.Config)) *app.Replica {
	t.Helper()
	return replicaWith(t, dsn, owner, allowLoopback, mod, nil)
}

// replicaWith is replica with modScheduler applied to its scheduler config.
func replicaWith(t *testing.T, dsn, owner string, allowLoopback bool, mod func(*alert.Config), modScheduler func(*scheduler.Config)) *app.Replica {
	t.Helper()
	reg := scheduler.NewRegistry()
	reg.Register("boom", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		return errors.New("boom: fails by design")
	}))
	reg.Register("slow", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		<-ctx.Done() // until the job's timeout_ms
		return ctx.Err()
	}))
	ac := alert.Config{AllowLoopback: allowLoopback, Secrets: map[string][]byte{alert.SecretDefault: secret},
		ScanInterval: 50 * time.Millisecond, DeliverInterval: 50 * time.Millisecond, IdleInterval: 200 * time.Millisecond, BackoffBase: 100 * time.Millisecond, Timeout: 2 * time.Second}
	if mod != nil {
		mod(&ac)
	}
	sc := scheduler.Config{Owner: owner, PollInterval: 20 * time.Millisecond, Lease: 3 * time.Second, RescueInterval: time.Hour,
		RetryBackoffBase: 10 * time.Millisecond}
	if modScheduler != nil {
		modScheduler(&sc)
	}
	r, err := app.Start(context.Background(), app.Config{DSN: dsn, Listen: "127.0.0.1:0", NoUI: true, Registry: reg,
		Scheduler: sc, Alerts: ac, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	return r
}

// call sends method path with a JSON body to r and returns the status and body.
func call(t *testing.T, r *app.Replica, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, "http://"+r.Addr+path, rd)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func createRule(t *testing.T, r *app.Replica, req map[string]any) uint64 {
	t.Helper()
	code, body := call(t, r, "POST", "/v1/alerts", req)
	if code != http.StatusCreated {
		t.Fatalf("create rule: %d %s", code, body)
	}
	var rule struct{ ID uint64 }
	_ = json.Unmarshal(body, &rule)
	return rule.ID
}

func submit(t *testing.T, r *app.Replica, key, jobType string, maxRetry int) uint64 {
	t.Helper()
	return submitReq(t, r, map[string]any{"job_key": key, "job_type": jobType, "params": map[string]any{}, "max_retry": maxRetry})
}

func submitReq(t *testing.T, r *app.Replica, req map[string]any) uint64 {
	t.Helper()
	code, body := call(t, r, "POST", "/v1/jobs", req)
	if code != http.StatusCreated && code != http.StatusOK {
		t.Fatalf("submit: %d %s", code, body)
	}
	var j struct{ ID uint64 }
	_ = json.Unmarshal(body, &j)
	return j.ID
}

type deliveryRow struct {
	status     string
	attempts   int
	lastStatus int
	lastError  string
}

func deliveries(t *testing.T, r *app.Replica) map[string]deliveryRow {
	t.Helper()
	rows, err := r.Store.DB().Query(`SELECT dedupe_key, status, attempts, last_status, COALESCE(last_error, '') FROM alert_delivery`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]deliveryRow{}
	for rows.Next() {
		var k string
		var d deliveryRow
		if err := rows.Scan(&k, &d.status, &d.attempts, &d.lastStatus, &d.lastError); err != nil {
			t.Fatal(err)
		}
		out[k] = d
	}
	return out
}

// TestJobFailedOneMessagePerJobAcrossReplicas: two replicas on one database
// run detection and delivery; 5 jobs of a type that always fails (max_retry
// 1: two attempts each) give exactly 5 signed messages, one per job at its
// last attempt. Rewinding the detection cursor to 0 (every execution read
// again, by both replicas) writes no new outbox row and sends nothing more.
func TestJobFailedOneMessagePerJobAcrossReplicas(t *testing.T) {
	dsn := testdb.DSN(t)
	h := newHook(t)
	outcomes := make(chan string, 100)
	count := func(c *alert.Config) { c.OutcomeFunc = func(o string) { outcomes <- o } }
	r1 := replica(t, dsn, "r1", true, count)
	r2 := replica(t, dsn, "r2", true, count)
	rule := createRule(t, r1, map[string]any{"name": "boom-failed", "job_type": "boom", "condition": "job_failed", "url": h.srv.URL + "/hook"})
	want := map[uint64]bool{}
	for i := range 5 {
		r := []*app.Replica{r1, r2}[i%2]
		want[submit(t, r, fmt.Sprintf("boom-%d", i), "boom", 1)] = true
	}
	seen := map[uint64]bool{}
	for range 5 {
		m := h.next(t)
		if m.sigErr != nil {
			t.Fatalf("signature: %v", m.sigErr)
		}
		var in alert.Incident
		if err := json.Unmarshal(m.body, &in); err != nil {
			t.Fatal(err)
		}
		if !want[in.JobID] || seen[in.JobID] || in.Attempt != 2 || in.Condition != "job_failed" || in.RuleID != rule ||
			in.Error != "boom: fails by design" || in.JobType != "boom" || m.key != in.DedupeKey || m.path != "/hook" {
			t.Fatalf("message %+v (key %q), want one per job of %v at attempt 2", in, m.key, want)
		}
		seen[in.JobID] = true
	}
	// Each outcome is counted after its row is written.
	waitOutcomes(t, outcomes, map[string]int{alert.OutcomeDelivered: 5})
	// Forced redelivery: both replicas read every execution again.
	if _, err := r1.Store.DB().Exec(`UPDATE alert_cursor SET last_id = 0`); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, r := range []*app.Replica{r1, r2, r1} {
		if err := r.Alerts.Detect(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Alerts.DeliverDue(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ds := deliveries(t, r1)
	if len(ds) != 5 {
		t.Fatalf("%d outbox rows, want 5: %v", len(ds), ds)
	}
	for k, d := range ds {
		if d.status != jobq.AlertDelivered || d.attempts != 1 || d.lastStatus != 200 {
			t.Fatalf("delivery %s: %+v, want DELIVERED at attempt 1", k, d)
		}
	}
	if n := h.count(); n != 5 {
		t.Fatalf("the webhook got %d messages, want 5", n)
	}
	// Retention: young finished deliveries stay; past the cutoff they go
	// (the cutoff a minute ahead is past their 30 s lease end).
	if n, err := r1.Store.AlertDeliveryPurge(ctx, time.Hour); err != nil || n != 0 {
		t.Fatalf("purge of deliveries older than 1h: %d, %v; want 0", n, err)
	}
	if n, err := r1.Store.AlertDeliveryPurge(ctx, -time.Minute); err != nil || n != 5 {
		t.Fatalf("purge past every delivery: %d, %v; want 5", n, err)
	}
}

// TestDetectReadsPastUnsettledChunks: with chunks of 2 executions and a
// settle window of an hour (nothing settles), 5 failed jobs are all
// reported — each pass reads chunk after chunk — while the cursor stays
// before them.
func TestDetectReadsPastUnsettledChunks(t *testing.T) {
	dsn := testdb.DSN(t)
	h := newHook(t)
	r := replica(t, dsn, "r1", true, func(c *alert.Config) { c.Chunk, c.Settle = 2, time.Hour })
	createRule(t, r, map[string]any{"name": "boom-failed", "job_type": "boom", "condition": "job_failed", "url": h.srv.URL})
	for i := range 5 {
		submit(t, r, fmt.Sprintf("boom-%d", i), "boom", 0)
	}
	keys := map[string]bool{}
	for range 5 {
		keys[h.next(t).key] = true
	}
	var cursor uint64
	if err := r.Store.DB().QueryRow(`SELECT last_id FROM alert_cursor`).Scan(&cursor); err != nil || cursor != 0 || len(keys) != 5 {
		t.Fatalf("cursor %d (%v), %d distinct incidents; want 0 and 5", cursor, err, len(keys))
	}
}

// TestRescuedRunWithoutRetriesAlerts: a run whose replica died (its lease
// expired, no retry left) ends FAILED by the rescuer, with a LEASE_EXPIRED
// attempt: that is a job_failed incident too.
func TestRescuedRunWithoutRetriesAlerts(t *testing.T) {
	dsn := testdb.DSN(t)
	h := newHook(t)
	r := replicaWith(t, dsn, "r1", true, nil, func(c *scheduler.Config) { c.RescueInterval = 100 * time.Millisecond })
	createRule(t, r, map[string]any{"name": "boom-failed", "job_type": "boom", "condition": "job_failed", "url": h.srv.URL})
	// The row a replica killed mid-run leaves: RUNNING at attempt 1, its lease over.
	res, err := r.Store.DB().Exec(`INSERT INTO job_queue (job_key, job_type, params, request_hash, status, max_retry, retry_times, run_at,
		attempt, owner, lease_until, started_at, create_time, update_time)
		VALUES ('lost-1', 'boom', '{}', REPEAT('0', 64), 'RUNNING', 0, 0, NOW(6), 1, 'dead-replica', NOW(6) - INTERVAL 1 SECOND, NOW(6), NOW(6), NOW(6))`)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	var in alert.Incident
	if err := json.Unmarshal(h.next(t).body, &in); err != nil || in.JobID != uint64(id) || in.Attempt != 1 || in.Outcome != "LEASE_EXPIRED" {
		t.Fatalf("incident %+v (%v), want job %d at attempt 1, LEASE_EXPIRED", in, err, id)
	}
}

// TestLostSenderRedeliveredAndFenced: a delivery whose sender died
// mid-send (SENDING, lease over, attempt 1) is claimed again and sent once
// (attempt 2, the same Idempotency-Key); the dead sender's late outcome
// write, fenced by attempts, changes nothing.
func TestLostSenderRedeliveredAndFenced(t *testing.T) {
	dsn := testdb.DSN(t)
	h := newHook(t)
	outcomes := make(chan string, 10)
	r := replica(t, dsn, "r1", true, func(c *alert.Config) { c.OutcomeFunc = func(o string) { outcomes <- o } })
	rule := createRule(t, r, map[string]any{"name": "boom-failed", "job_type": "boom", "condition": "job_failed", "url": h.srv.URL})
	res, err := r.Store.DB().Exec(`INSERT INTO alert_delivery (rule_id, dedupe_key, url, preset, secret, incident, status, attempts,
		next_attempt_at, owner, lease_until, create_time, update_time)
		VALUES (?, 'lost-sender', ?, 'webhook', 'alerts', '{"text":"x"}', 'SENDING', 1, NOW(6) - INTERVAL 1 SECOND, 'dead',
		NOW(6) - INTERVAL 1 SECOND, NOW(6), NOW(6))`, rule, h.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	if m := h.next(t); m.key != "lost-sender" || m.sigErr != nil {
		t.Fatalf("message key %q (%v), want lost-sender, signed", m.key, m.sigErr)
	}
	waitOutcomes(t, outcomes, map[string]int{alert.OutcomeDelivered: 1})
	ok, err := r.Store.AlertDeliveryDone(context.Background(), jobq.AlertDelivery{ID: uint64(id), Attempts: 1}, 500)
	if err != nil || ok {
		t.Fatalf("the dead sender's write: applied=%v %v, want refused", ok, err)
	}
	if d := deliveries(t, r)["lost-sender"]; d.status != jobq.AlertDelivered || d.attempts != 2 || d.lastStatus != 200 || h.count() != 1 {
		t.Fatalf("delivery %+v, %d messages; want DELIVERED at attempt 2 with 200, 1 message", d, h.count())
	}
}

// TestRetryWithBackoffThenGiveUp: one webhook answers 503, 503, then 200
// (delivered at the third attempt, the waits doubling from 100 ms); another
// answers 500 for ever (given up after MaxAttempts = 3, the last error
// recorded); one answers 400 (given up at once: not retried).
func TestRetryWithBackoffThenGiveUp(t *testing.T) {
	dsn := testdb.DSN(t)
	flappy, down, bad := newHook(t, 503, 503), newHook(t, 500, 500, 500, 500), newHook(t, 400)
	outcomes := make(chan string, 100)
	r := replica(t, dsn, "r1", true, func(c *alert.Config) { c.MaxAttempts = 3; c.OutcomeFunc = func(o string) { outcomes <- o } })
	createRule(t, r, map[string]any{"name": "flappy", "job_type": "boom", "condition": "job_failed", "url": flappy.srv.URL})
	createRule(t, r, map[string]any{"name": "down", "job_type": "boom", "condition": "job_failed", "url": down.srv.URL, "preset": "slack"})
	createRule(t, r, map[string]any{"name": "bad", "job_type": "boom", "condition": "job_failed", "url": bad.srv.URL})
	submit(t, r, "boom-1", "boom", 0)
	var at []time.Time
	for range 3 {
		m := flappy.next(t)
		at = append(at, m.at)
		if m.sigErr != nil {
			t.Fatal(m.sigErr)
		}
	}
	for range 3 {
		down.next(t)
	}
	bad.next(t)
	if g1, g2 := at[1].Sub(at[0]), at[2].Sub(at[1]); g1 < 100*time.Millisecond || g2 < 200*time.Millisecond {
		t.Fatalf("retry gaps %s, %s: want at least 100ms then 200ms (backoff 100ms·2^(attempt−1))", g1, g2)
	}
	// 7 attempts: flappy retried, retried, delivered; down retried,
	// retried, failed; bad failed. Each is counted after its row is written.
	waitOutcomes(t, outcomes, map[string]int{alert.OutcomeDelivered: 1, alert.OutcomeRetried: 4, alert.OutcomeFailed: 2})
	ds := deliveries(t, r)
	got := map[string]deliveryRow{}
	for k, d := range ds {
		got[strings.SplitN(k, ":", 2)[0]] = d
	}
	var ids []uint64
	for _, n := range []string{"flappy", "down", "bad"} {
		var id uint64
		if err := r.Store.DB().QueryRow(`SELECT id FROM alert_rule WHERE name = ?`, n).Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	fl, dn, bd := got[fmt.Sprint(ids[0])], got[fmt.Sprint(ids[1])], got[fmt.Sprint(ids[2])]
	if fl.status != jobq.AlertDelivered || fl.attempts != 3 || fl.lastStatus != 200 {
		t.Fatalf("flappy: %+v, want DELIVERED at attempt 3", fl)
	}
	if dn.status != jobq.AlertFailed || dn.attempts != 3 || dn.lastStatus != 500 || !strings.Contains(dn.lastError, "HTTP 500") {
		t.Fatalf("down: %+v, want FAILED after 3 attempts with HTTP 500", dn)
	}
	if bd.status != jobq.AlertFailed || bd.attempts != 1 || bd.lastStatus != 400 {
		t.Fatalf("bad: %+v, want FAILED at attempt 1", bd)
	}
	if n := down.count(); n != 3 {
		t.Fatalf("down got %d requests, want 3", n)
	}
	_, metrics := call(t, r, "GET", "/metrics", nil)
	for _, want := range []string{`jobq_alert_deliveries_total{outcome="delivered"} 1`, `jobq_alert_deliveries_total{outcome="retried"} 4`,
		`jobq_alert_deliveries_total{outcome="failed"} 2`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	var slack map[string]any
	if err := json.Unmarshal(down.all[0].body, &slack); err != nil || len(slack) != 1 || !strings.Contains(fmt.Sprint(slack["text"]), "FAILED at attempt 1") {
		t.Fatalf("slack body %s", down.all[0].body)
	}
}

// TestDestinationAllowList: a loopback URL is refused at rule creation by a
// replica without --alert-allow-loopback (400 naming url, nothing written)
// and accepted by one with it; metadata and link-local addresses are
// refused by both. A replica without the allowance never contacts a
// loopback or metadata destination at delivery: the deliveries end FAILED
// with the rule, and the webhook got nothing.
func TestDestinationAllowList(t *testing.T) {
	dsn := testdb.DSN(t)
	h := newHook(t)
	outcomes := make(chan string, 100)
	allowed := replica(t, dsn, "allowed", true, nil)
	strict := replica(t, dsn, "strict", false, func(c *alert.Config) { c.OutcomeFunc = func(o string) { outcomes <- o } })
	base := map[string]any{"name": "r", "job_type": "boom", "condition": "job_failed"}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for a, b := range base {
			m[a] = b
		}
		m[k] = v
		return m
	}
	for _, c := range []struct {
		r        *app.Replica
		url      string
		contains string
	}{
		{strict, h.srv.URL, "--alert-allow-loopback"},
		{strict, "http://localhost:9/", "--alert-allow-loopback"},
		{allowed, "http://169.254.169.254/latest/meta-data/", "metadata"},
		{allowed, "http://[fd00:ec2::254]/", "metadata"},
		{allowed, "http://metadata.google.internal/computeMetadata/v1/", "metadata"},
		{allowed, "http://169.254.10.1/", "link-local"},
		{allowed, "ftp://example.com/", "http or https"},
	} {
		code, body := call(t, c.r, "POST", "/v1/alerts", with("url", c.url))
		var e struct {
			Error struct{ Field, Message string }
		}
		_ = json.Unmarshal(body, &e)
		if code != http.StatusBadRequest || e.Error.Field != "url" || !strings.Contains(e.Error.Message, c.contains) {
			t.Fatalf("%s: %d %s, want 400 naming url (%s)", c.url, code, body, c.contains)
		}
	}
	for _, c := range []struct {
		field string
		req   map[string]any
	}{
		{"condition", with("condition", "job_exploded")},
		{"threshold_ms", with("condition", "job_running_longer")},
		{"schedule", with("condition", "schedule_missed")},
		{"preset", with("preset", "telegram")},
		{"secret", with("secret", "nope")},
		{"name", with("name", "")},
	} {
		c.req["url"] = h.srv.URL
		code, body := call(t, allowed, "POST", "/v1/alerts", c.req)
		var e struct{ Error struct{ Field string } }
		_ = json.Unmarshal(body, &e)
		if code != http.StatusBadRequest || e.Error.Field != c.field {
			t.Fatalf("%v: %d %s, want 400 naming %s", c.req, code, body, c.field)
		}
	}
	if _, body := call(t, strict, "GET", "/v1/alerts", nil); !bytes.Equal(bytes.TrimSpace(body), []byte(`{"alerts":[]}`)) {
		t.Fatalf("rules after refusals: %s, want none", body)
	}
	// The allowing replica creates the loopback rule, then only the strict
	// one delivers.
	rule := createRule(t, allowed, with("url", h.srv.URL))
	allowed.Alerts.Stop()
	if _, err := strict.Store.DB().Exec(`INSERT INTO alert_delivery (rule_id, dedupe_key, url, preset, secret, incident, status, next_attempt_at, create_time, update_time)
		VALUES (?, 'planted-metadata', 'http://169.254.169.254/latest/meta-data/', 'webhook', 'alerts', '{"text":"x"}', 'PENDING', NOW(6), NOW(6), NOW(6))`, rule); err != nil {
		t.Fatal(err)
	}
	submit(t, strict, "boom-1", "boom", 0)
	waitOutcomes(t, outcomes, map[string]int{alert.OutcomeRefused: 2, alert.OutcomeFailed: 2})
	ds := deliveries(t, strict)
	if len(ds) != 2 {
		t.Fatalf("deliveries %v, want 2", ds)
	}
	for k, d := range ds {
		if d.status != jobq.AlertFailed || d.attempts != 1 || !strings.Contains(d.lastError, "destination refused, not contacted") {
			t.Fatalf("delivery %s: %+v, want FAILED, refused at attempt 1", k, d)
		}
	}
	if n := h.count(); n != 0 {
		t.Fatalf("the loopback webhook was contacted %d times by a replica that does not allow loopback", n)
	}
}

// waitOutcomes waits up to 30s until the delivery outcomes counted are want.
func waitOutcomes(t *testing.T, ch <-chan string, want map[string]int) {
	t.Helper()
	got := map[string]int{}
	n := 0
	for _, v := range want {
		n += v
	}
	for range n {
		select {
		case o := <-ch:
			got[o]++
		case <-time.After(30 * time.Second):
			t.Fatalf("outcomes %v, want %v", got, want)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("outcomes %v, want %v", got, want)
	}
}

// TestScheduleMisfireOneMessage: the same misfire reported by two replicas
// (both fired the schedule from the same cursor) is one incident, one
// message; schedule_skipped follows the policy's count.
func TestScheduleMisfireOneMessage(t *testing.T) {
	dsn := testdb.DSN(t)
	h := newHook(t)
	r1 := replica(t, dsn, "r1", true, nil)
	r2 := replica(t, dsn, "r2", true, nil)
	createRule(t, r1, map[string]any{"name": "nightly-missed", "schedule": "nightly", "condition": "schedule_missed", "url": h.srv.URL, "preset": "feishu"})
	from := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	ev := scheduler.Event{Kind: scheduler.EventPeriodicFired, Name: "nightly",
		Misfire: scheduler.PeriodicMisfire{Missed: 3, Skipped: 3, From: from, To: from.Add(2 * time.Hour), Policy: jobq.MisfireSkip}}
	r1.Alerts.Observe(ev)
	r2.Alerts.Observe(ev)
	m := h.next(t)
	var body struct {
		MsgType string `json:"msg_type"`
		Content struct{ Text string }
	}
	if err := json.Unmarshal(m.body, &body); err != nil || body.MsgType != "text" || !strings.Contains(body.Content.Text, "schedule nightly missed 3 instant(s)") {
		t.Fatalf("feishu body %s", m.body)
	}
	for _, r := range []*app.Replica{r1, r2} {
		if _, err := r.Alerts.DeliverDue(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if ds := deliveries(t, r1); len(ds) != 1 || h.count() != 1 {
		t.Fatalf("%d outbox rows, %d messages; want 1 and 1", len(ds), h.count())
	}
}

// TestScheduleSkippedFromAFire: a schedule whose cursor is 3 h old (every
// replica was down) is fired by the real periodic planner; its misfire
// policy skips the missed instants, and the schedule_skipped rule posts
// one message naming them.
func TestScheduleSkippedFromAFire(t *testing.T) {
	dsn := testdb.DSN(t)
	h := newHook(t)
	r := replica(t, dsn, "r1", true, nil)
	if code, body := call(t, r, "POST", "/v1/periodic", map[string]any{"name": "tick", "cron": "@every 1h", "job_type": "boom"}); code/100 != 2 {
		t.Fatalf("periodic: %d %s", code, body)
	}
	createRule(t, r, map[string]any{"name": "tick-skipped", "schedule": "tick", "condition": "schedule_skipped", "url": h.srv.URL, "preset": "wecom"})
	if _, err := r.Store.DB().Exec(`UPDATE periodic_job SET next_run_at = NOW(6) - INTERVAL 3 HOUR - INTERVAL 30 MINUTE WHERE name = 'tick'`); err != nil {
		t.Fatal(err)
	}
	r.Scheduler.RefreshOps()
	m := h.next(t)
	var body struct {
		MsgType string
		Text    struct{ Content string }
	}
	if err := json.Unmarshal(m.body, &body); err != nil || body.MsgType != "text" ||
		!strings.Contains(body.Text.Content, "schedule tick skipped 4 instant(s)") || !strings.Contains(body.Text.Content, "(misfire skip)") {
		t.Fatalf("wecom body %s", m.body)
	}
	if m.sigErr != nil {
		t.Fatal(m.sigErr)
	}
}

// TestJobRunningLongerOnce: a job RUNNING past the rule's 300 ms threshold
// is reported once, however many detection passes see it running.
func TestJobRunningLongerOnce(t *testing.T) {
	dsn := testdb.DSN(t)
	h := newHook(t)
	r := replica(t, dsn, "r1", true, nil)
	createRule(t, r, map[string]any{"name": "slow-running", "job_type": "slow", "condition": "job_running_longer", "threshold_ms": 300,
		"url": h.srv.URL, "preset": "dingtalk"})
	id := submitReq(t, r, map[string]any{"job_key": "slow-1", "job_type": "slow", "params": map[string]any{}, "max_retry": 0, "timeout_ms": 3000})
	m := h.next(t)
	var body struct {
		MsgType string
		Text    struct{ Content string }
	}
	if err := json.Unmarshal(m.body, &body); err != nil || body.MsgType != "text" ||
		!strings.Contains(body.Text.Content, fmt.Sprintf("job %d (type slow, key slow-1) has been RUNNING since", id)) ||
		!strings.Contains(body.Text.Content, "longer than 300ms (attempt 1, owner r1)") {
		t.Fatalf("dingtalk body %s", m.body)
	}
	for range 3 {
		if err := r.Alerts.Detect(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if ds := deliveries(t, r); len(ds) != 1 {
		t.Fatalf("%d outbox rows, want 1: %v", len(ds), ds)
	}
}

// TestPresetBodies: each preset's documented incoming-webhook shape.
func TestPresetBodies(t *testing.T) {
	in := []byte(`{"rule":"r","condition":"job_failed","text":"[jobq] r: job 7 FAILED"}`)
	for _, c := range []struct{ preset, want string }{
		{"webhook", string(in)},
		{"slack", `{"text":"[jobq] r: job 7 FAILED"}`},
		{"dingtalk", `{"msgtype":"text","text":{"content":"[jobq] r: job 7 FAILED"}}`},
		{"wecom", `{"msgtype":"text","text":{"content":"[jobq] r: job 7 FAILED"}}`},
		{"feishu", `{"msg_type":"text","content":{"text":"[jobq] r: job 7 FAILED"}}`},
	} {
		got, err := alert.Body(c.preset, in)
		if err != nil || string(got) != c.want {
			t.Errorf("%s: %s, %v; want %s", c.preset, got, err, c.want)
		}
	}
}

func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
