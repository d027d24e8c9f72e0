package scheduler_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/service"
	"github.com/jobq/jobq/store"
)

func submitKeyed(t *testing.T, svc *service.Service, jobKey, typ, ckey string, limit, maxRetry, priority int) jobq.Job {
	t.Helper()
	job, _, err := svc.Submit(context.Background(), apitype.SubmitRequest{JobKey: jobKey, JobType: typ,
		MaxRetry: &maxRetry, Priority: &priority, ConcurrencyKey: ckey, ConcurrencyLimit: &limit})
	if err != nil {
		t.Fatalf("submit %s: %v", jobKey, err)
	}
	return job
}

// keyRun is one execution row of a keyed job.
type keyRun struct {
	jobID, priority uint64
	attempt         int
	start, end      time.Time
}

// keyRuns reads every execution row of keyed jobs, by key, in start order.
func keyRuns(t *testing.T, st *store.Store) map[string][]keyRun {
	t.Helper()
	rows, err := st.DB().QueryContext(context.Background(), `SELECT q.concurrency_key, e.job_id, e.attempt, e.started_at, e.finished_at
FROM job_attempt e JOIN job_queue q ON q.id = e.job_id
WHERE q.concurrency_key IS NOT NULL ORDER BY e.started_at, e.id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]keyRun{}
	for rows.Next() {
		var k string
		var r keyRun
		if err := rows.Scan(&k, &r.jobID, &r.attempt, &r.start, &r.end); err != nil {
			t.Fatal(err)
		}
		out[k] = append(out[k], r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Two replicas race 240 jobs on 4 keys (limit 1), a third of the runs
// failing once: no two runs of one key overlap on the database clock (the
// execution rows' intervals), every job succeeds, and each key's jobs
// start in submit order (FIFO within the key; a retry keeps its slot, so
// its next attempt runs before the key's next job).
func TestConcurrencyKeysTwoReplicasNeverOverlap(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	var running [4]atomic.Int32
	var overlaps atomic.Int32
	reg := scheduler.NewRegistry()
	reg.Register("keyed", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		var k int
		fmt.Sscanf(job.JobKey, "k%d-", &k)
		if running[k].Add(1) > 1 {
			overlaps.Add(1)
		}
		defer running[k].Add(-1)
		// The handler's work, 0–2 ms: widens each run so an overlap has
		// time to show (it waits for nothing).
		time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
		if job.Attempt == 1 && job.ID%3 == 0 {
			return fmt.Errorf("first attempt fails")
		}
		return nil
	}))
	svc := service.New(service.Options{Store: st})
	const keys, perKey = 4, 60
	for i := range perKey {
		for k := range keys {
			submitKeyed(t, svc, fmt.Sprintf("k%d-%03d", k, i), "keyed", fmt.Sprintf("key-%d", k), 1, 3, 0)
		}
	}
	for _, owner := range []string{"r1", "r2"} {
		cfg := fastConfig(owner)
		cfg.RetryBackoffBase = time.Millisecond
		startScheduler(t, st, reg, cfg)
	}
	waitSucceeded(t, keys*perKey)
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d handler starts found another run of their key running", n)
	}
	for k, runs := range keyRuns(t, st) {
		for i := 1; i < len(runs); i++ {
			if runs[i].start.Before(runs[i-1].end) {
				t.Fatalf("key %s: job %d attempt %d started at %s, before job %d attempt %d ended at %s",
					k, runs[i].jobID, runs[i].attempt, runs[i].start, runs[i-1].jobID, runs[i-1].attempt, runs[i-1].end)
			}
		}
		var firsts []uint64
		for _, r := range runs {
			if r.attempt == 1 {
				firsts = append(firsts, r.jobID)
			}
		}
		if !slices.IsSorted(firsts) || len(firsts) != perKey {
			t.Fatalf("key %s: first attempts in order %v, want the %d jobs in submit order", k, firsts, perKey)
		}
	}
	if n := scalar(t, st.DB(), `SELECT COALESCE(SUM(admitted), -1) FROM concurrency_key`); n != 0 {
		t.Fatalf("after the drain the keys count %d admitted jobs, want 0", n)
	}
}

// A replica that died holding a key's only slot (its lease expires with no
// retry left) gives the slot up through the rescue: the key's next job
// runs. A job of another key and one without a key run while the slot is
// held.
func TestConcurrencyKeyRescueFreesTheSlot(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	svc := service.New(service.Options{Store: st})
	held := submitKeyed(t, svc, "held", "noop", "device-1", 1, 0, 0)
	next := submitKeyed(t, svc, "next", "noop", "device-1", 1, 0, 0)
	other := submitKeyed(t, svc, "other", "noop", "device-2", 1, 0, 0)
	plain := submit(t, st, "plain", "noop", "{}", 0)
	// A replica claims the held job and dies: nothing renews its lease.
	dead, err := st.JobClaimSkipLocked(context.Background(), jobq.ClaimParams{Owner: "dead", Limit: 2, Lease: time.Hour})
	if err != nil || len(dead) != 2 {
		t.Fatalf("the dead replica's claim: %d jobs, %v; want held and other", len(dead), err)
	}
	for _, c := range dead {
		if c.ID == other.ID { // give the other key's job back: it must run now
			if _, err := st.JobCompleteMany(context.Background(), []jobq.Completion{{Fence: c.Fence(), Outcome: jobq.OutcomeReleased, ConcurrencyKey: c.ConcurrencyKey}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	reg := scheduler.NewRegistry()
	reg.Register("noop", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error { return nil }))
	startScheduler(t, st, reg, fastConfig("r1"))
	waitFinished(t, st, other.ID, jobq.OutcomeSuccess)
	waitFinished(t, st, plain.ID, jobq.OutcomeSuccess)
	if j := getJob(t, st, next.ID); j.Status != jobq.StateParked {
		t.Fatalf("while the dead replica holds the key, its next job is %s, want PARKED", j.Status)
	}
	expireLease(t, st, held.ID) // the dead replica's lease runs out
	waitFinished(t, st, next.ID, jobq.OutcomeSuccess)
	if j := getJob(t, st, held.ID); j.Status != jobq.StateFailed {
		t.Fatalf("the dead replica's job is %s, want FAILED (lease expired, no retry left)", j.Status)
	}
}
