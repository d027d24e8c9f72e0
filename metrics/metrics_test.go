package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/app"
	"github.com/jobq/jobq/client"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/metrics"
	"github.com/jobq/jobq/scheduler"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// startReplica runs an in-process replica (API on a free loopback port).
func startReplica(t *testing.T, dsn, owner string) *app.Replica {
	t.Helper()
	r, err := app.Start(context.Background(), app.Config{
		DSN: dsn, Listen: "127.0.0.1:0",
		Scheduler: scheduler.Config{Owner: owner, Workers: 4, PollInterval: 50 * time.Millisecond, PollJitter: 10 * time.Millisecond,
			RetryBackoffBase: 10 * time.Millisecond, ShutdownTimeout: 5 * time.Second},
		Metrics: metrics.Options{BacklogInterval: -1}, // sampled by hand below
	})
	if err != nil {
		t.Fatalf("start %s: %v", owner, err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	return r
}

// sum adds every sample of family name whose labels include want.
func sum(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var total float64
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue metric
				}
			}
			total += value(f.GetType(), m)
		}
	}
	return total
}

func value(typ dto.MetricType, m *dto.Metric) float64 {
	switch typ {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	case dto.MetricType_HISTOGRAM:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return m.GetUntyped().GetValue()
}

// TestTwoReplicasCountEveryRun runs two in-process replicas on one database
// (each with its own registry) and checks that the counters add up to what
// was submitted: every job claimed once, completed once, observed once in
// the pickup and run histograms; a flaky job counts one retry.
func TestTwoReplicasCountEveryRun(t *testing.T) {
	dsn := testdb.DSN(t)
	r1 := startReplica(t, dsn, "m-r1")
	r2 := startReplica(t, dsn, "m-r2")
	if r1.Metrics.Registry == r2.Metrics.Registry {
		t.Fatal("replicas share a registry")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := client.New("http://" + r1.Addr)
	const n = 40
	for i := range n {
		req := apitype.SubmitRequest{JobKey: fmt.Sprintf("m-%d", i), JobType: "noop"}
		if i == 0 {
			req.JobType, req.Params = "flaky", []byte(`{"failures":1}`)
		}
		if _, _, err := c.Submit(ctx, req); err != nil {
			t.Fatalf("submit %d: %v", i, err)
		}
	}
	// A repeated submit of the same request is not a new job.
	if _, created, err := c.Submit(ctx, apitype.SubmitRequest{JobKey: "m-1", JobType: "noop"}); err != nil || created {
		t.Fatalf("resubmit: created=%v err=%v", created, err)
	}
	regs := []*prometheus.Registry{r1.Metrics.Registry, r2.Metrics.Registry}
	total := func(name string, labels map[string]string) float64 {
		var s float64
		for _, reg := range regs {
			s += sum(t, reg, name, labels)
		}
		return s
	}
	for total("jobq_jobs_completed_total", map[string]string{"outcome": "success"}) < n {
		select {
		case <-ctx.Done():
			t.Fatalf("only %v of %d jobs succeeded", total("jobq_jobs_completed_total", map[string]string{"outcome": "success"}), n)
		case <-time.After(20 * time.Millisecond):
		}
	}
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"jobq_jobs_submitted_total", nil, n},
		{"jobq_jobs_submitted_total", map[string]string{"job_type": "flaky"}, 1},
		{"jobq_jobs_claimed_total", nil, n + 1}, // the flaky job runs twice
		{"jobq_jobs_completed_total", map[string]string{"outcome": "retry", "job_type": "flaky"}, 1},
		{"jobq_jobs_completed_total", map[string]string{"outcome": "failed"}, 0},
		{"jobq_completions_stale_total", nil, 0},
		{"jobq_pickup_latency_seconds", nil, n + 1},
		{"jobq_run_duration_seconds", nil, n + 1},
		{"jobq_worker_slots", nil, 8},
		{"jobq_replica_info", map[string]string{"owner": "m-r2"}, 1},
	}
	for _, ck := range checks {
		if got := total(ck.name, ck.labels); got != ck.want {
			t.Errorf("%s%v = %v, want %v", ck.name, ck.labels, got, ck.want)
		}
	}
	if got := sum(t, r2.Metrics.Registry, "jobq_jobs_submitted_total", nil); got != 0 {
		t.Errorf("replica 2 counted %v submits; all went through replica 1", got)
	}
	// Zero-valued series exist for every registered type and outcome.
	// r1 registers the three default job types (noop, sleep, flaky).
	if got := len(series(t, r1.Metrics.Registry, "jobq_jobs_completed_total")); got < 3*len(metrics.Outcomes) {
		t.Errorf("jobq_jobs_completed_total has %d series, want ≥ %d (pre-created per type and outcome)", got, 3*len(metrics.Outcomes))
	}

	// Backlog: one job due now is WAITING and due; one an hour ahead is
	// SCHEDULED, not due. Stop the schedulers first so nothing claims them.
	for _, r := range []*app.Replica{r1, r2} {
		if err := r.Scheduler.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for _, req := range []apitype.SubmitRequest{{JobKey: "due", JobType: "noop"}, {JobKey: "later", JobType: "noop", RunAt: &later}} {
		if _, _, err := c.Submit(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	// "due" has aged by the sample: its run_at is its INSERT's NOW(6), and
	// the sample's NOW(6) is read by a later statement (on one server clock,
	// at least a round trip later), so the oldest due age is above 0.
	if err := r1.Metrics.SampleBacklog(ctx, r1.Store.DB()); err != nil {
		t.Fatal(err)
	}
	reg := r1.Metrics.Registry
	for _, ck := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"jobq_backlog_jobs", map[string]string{"status": "WAITING"}, 1},
		{"jobq_backlog_jobs", map[string]string{"status": "SCHEDULED"}, 1},
		{"jobq_backlog_promote_due_jobs", nil, 0},
		{"jobq_backlog_jobs", map[string]string{"status": "RUNNING"}, 0},
		{"jobq_backlog_due_jobs", nil, 1},
		{"jobq_backlog_lease_expired_jobs", nil, 0},
		{"jobq_backlog_sample_errors_total", nil, 0},
	} {
		if got := sum(t, reg, ck.name, ck.labels); got != ck.want {
			t.Errorf("%s%v = %v, want %v", ck.name, ck.labels, got, ck.want)
		}
	}
	if age := sum(t, reg, "jobq_backlog_oldest_due_age_seconds", nil); age <= 0 || age > 30 {
		t.Errorf("oldest due age = %vs, want in (0, 30]", age)
	}
	if ts := sum(t, reg, "jobq_backlog_sample_timestamp_seconds", nil); time.Since(time.Unix(int64(ts), 0)) > time.Minute {
		t.Errorf("sample timestamp %v is not recent", ts)
	}

	// GET /metrics serves the registry in the text format, and counts API requests.
	resp, err := http.Get("http://" + r1.Addr + metrics.Path)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"jobq_jobs_submitted_total{job_type=\"noop\"} 41", "go_goroutines", "process_resident_memory_bytes",
		"go_sql_open_connections{db_name=\"jobq\"}", `jobq_http_requests_total{code="201",method="post"}`, `jobq_http_request_duration_seconds_bucket{method="post",le="+Inf"}`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func series(t *testing.T, reg *prometheus.Registry, name string) []*dto.Metric {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return f.GetMetric()
		}
	}
	return nil
}

func TestErrnoLabel(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("claim: %w", context.Canceled), ""},
		{fmt.Errorf("claim: %w", &mysql.MySQLError{Number: 1213, Message: "Deadlock found"}), "1213"},
		{fmt.Errorf("renew: %w", context.DeadlineExceeded), "timeout"},
		{fmt.Errorf("scan: %w", mysql.ErrInvalidConn), "conn"},
		{errors.New("driver: bad connection"), "conn"},
	} {
		if got := metrics.ErrnoLabel(tc.err); got != tc.want {
			t.Errorf("ErrnoLabel(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
