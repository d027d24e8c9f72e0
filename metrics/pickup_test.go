package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/client"
	"github.com/jobq/jobq/internal/testdb"
)

// A job submitted with a run_at in the past is due at once, and its pickup
// latency counts from its submit, not from run_at: both the
// jobq_pickup_latency_seconds histogram and the console's per-minute pickup
// (store.Activity) equal started_at − create_time of the attempt. They used
// to measure started_at − run_at: a run_at in 2023 showed a pickup of years
// ("avg 1019d" on the console).
func TestPickupOfPastRunAtCountsFromSubmit(t *testing.T) {
	dsn := testdb.DSN(t)
	r := startReplica(t, dsn, "p-r1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := client.New("http://" + r.Addr)
	runAt := "2023-01-01T00:00:00Z"
	job, _, err := c.Submit(ctx, apitype.SubmitRequest{JobKey: "past", JobType: "noop", RunAt: &runAt})
	if err != nil {
		t.Fatal(err)
	}
	if job.Status != "WAITING" {
		t.Fatalf("submitted with a past run_at: status %s, want WAITING (due at once)", job.Status)
	}
	for job.Status != "SUCCESS" {
		if job, err = c.Get(ctx, job.ID); err != nil {
			t.Fatalf("job %d: %v (status %s)", job.ID, err, job.Status)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("job %d still %s", job.ID, job.Status)
		case <-time.After(20 * time.Millisecond):
		}
	}
	var fromSubmitUs, fromRunAtUs int64
	if err := r.Store.DB().QueryRowContext(ctx, `SELECT TIMESTAMPDIFF(MICROSECOND, q.create_time, e.started_at),
		TIMESTAMPDIFF(MICROSECOND, e.due_at, e.started_at)
		FROM job_attempt e JOIN job_queue q ON q.id = e.job_id WHERE e.job_id = ?`, job.ID).Scan(&fromSubmitUs, &fromRunAtUs); err != nil {
		t.Fatal(err)
	}
	if fromRunAtUs < int64(365*24*time.Hour/time.Microsecond) || fromSubmitUs < 0 || fromSubmitUs >= fromRunAtUs {
		t.Fatalf("started − create_time = %dµs, started − due_at = %dµs: want the first ≥ 0 and the second over a year", fromSubmitUs, fromRunAtUs)
	}
	want := time.Duration(fromSubmitUs) * time.Microsecond

	act, err := r.Store.Activity(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	var started int64
	for _, m := range act.Minutes {
		if m.Started == 0 {
			continue
		}
		started += m.Started
		if m.PickupAvg != want || m.PickupMax != want {
			t.Errorf("console minute %d: pickup avg %v max %v, want %v (started_at − create_time)", m.MinutesAgo, m.PickupAvg, m.PickupMax, want)
		}
	}
	if started != 1 {
		t.Errorf("console: %d attempts started, want 1", started)
	}

	fams, err := r.Metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var count uint64
	var sumSeconds float64
	for _, f := range fams {
		if f.GetName() == "jobq_pickup_latency_seconds" {
			for _, m := range f.GetMetric() {
				count += m.GetHistogram().GetSampleCount()
				sumSeconds += m.GetHistogram().GetSampleSum()
			}
		}
	}
	// The histogram is measured to the handler's start: the claim's pickup
	// plus the time from the claim's answer to the handler (a free worker:
	// microseconds, well under 50ms).
	if count != 1 || sumSeconds < want.Seconds()-1e-6 || sumSeconds > want.Seconds()+0.05 {
		t.Errorf("jobq_pickup_latency_seconds: %d observations summing %vs, want 1 of %vs (+ < 50ms to the handler's start)", count, sumSeconds, want.Seconds())
	}
}

// Every registered job type has its pickup histogram at zero from the
// start, like its counters: rate() over a series sees no increase in the
// series' first sample, so a type whose first pickups (a backlog after a
// restart, a paused type resumed) all land within one scrape would be
// invisible to the pickup SLO alert (histogram_quantile over rate of the
// buckets). Before, the series appeared with its first observation.
func TestPickupSeriesExistBeforeTheFirstPickup(t *testing.T) {
	r := startReplica(t, testdb.DSN(t), "p-zero")
	fams, err := r.Metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]bool{}
	for _, f := range fams {
		if f.GetName() != "jobq_pickup_latency_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "job_type" && m.GetHistogram().GetSampleCount() == 0 {
					types[l.GetValue()] = true
				}
			}
		}
	}
	for _, typ := range []string{"noop", "sleep", "flaky"} {
		if !types[typ] {
			t.Errorf("no jobq_pickup_latency_seconds{job_type=%q} series at zero before any pickup (have %v)", typ, types)
		}
	}
}
