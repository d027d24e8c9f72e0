package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/cronplan"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/store"
)

// realPlan is the scheduler's plan: cronplan.PlanFire with threshold.
func realPlan(t *testing.T, threshold time.Duration) jobq.PeriodicPlanFunc {
	return func(p jobq.Periodic, now time.Time) jobq.PeriodicPlan {
		sched, err := cronplan.Parse(p.Cron)
		if err != nil {
			t.Error(err)
			return jobq.PeriodicPlan{Next: p.NextRunAt}
		}
		return cronplan.PlanFire(sched, p.Misfire, threshold, p.NextRunAt, now)
	}
}

func ledger(t *testing.T, st *store.Store, name string) []jobq.FireEntry {
	t.Helper()
	e, err := st.FireRange(context.Background(), name, time.Time{}, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// Instants missed for longer than the misfire threshold appear in the
// ledger as skipped/misfire, the on-time ones as fired with their job, and
// with misfire "once" the catch-up as late.
func TestFireLedgerRecordsMisfires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testdb.Store(t)
	now, err := st.DBNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, misfire := range []string{jobq.MisfireSkip, jobq.MisfireOnce} {
		name := "m-" + misfire
		cursor := now.UTC().Truncate(time.Second).Add(-30 * time.Second)
		spec := jobq.PeriodicSpec{Name: name, Cron: "@every 1s", JobType: "noop", Params: "{}", Misfire: misfire, Source: jobq.PeriodicSourceAPI}
		if _, _, err := st.PeriodicUpsert(ctx, spec, func(time.Time) time.Time { return cursor }); err != nil {
			t.Fatal(err)
		}
		res, err := st.PeriodicFire(ctx, name, realPlan(t, 5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		rows := ledger(t, st, name)
		// One row per instant from the cursor to the new cursor, in order.
		want := int(res.Next.Sub(cursor) / time.Second)
		if len(rows) != want {
			t.Fatalf("%s: %d ledger rows, want %d (cursor %s → %s)", misfire, len(rows), want, cursor, res.Next)
		}
		var fired, late, skipped int
		for i, r := range rows {
			if !r.Instant.Equal(cursor.Add(time.Duration(i) * time.Second)) {
				t.Fatalf("%s: row %d at %s, want %s", misfire, i, r.Instant, cursor.Add(time.Duration(i)*time.Second))
			}
			switch r.Fate {
			case jobq.FireSkipped:
				skipped++
				if r.Reason != jobq.FireReasonMisfire || r.JobID != 0 || r.LateMs < 5000 {
					t.Fatalf("%s: skipped row %+v: want reason misfire, no job, ≥5000 ms late", misfire, r)
				}
			case jobq.FireFired, jobq.FireLate:
				if r.Fate == jobq.FireLate {
					late++
				} else {
					fired++
				}
				j, err := st.JobGet(ctx, r.JobID)
				if err != nil || j.JobKey != jobq.PeriodicKey(name, r.Instant) {
					t.Fatalf("%s: row %+v: job %+v, %v", misfire, r, j, err)
				}
			default:
				t.Fatalf("%s: fate %q", misfire, r.Fate)
			}
		}
		if int64(skipped) != res.Skipped || fired+late != len(res.Inserted) || fired < 5 || skipped < 20 {
			t.Fatalf("%s: fired %d late %d skipped %d; result %+v", misfire, fired, late, skipped, res)
		}
		if wantLate := map[string]int{jobq.MisfireSkip: 0, jobq.MisfireOnce: 1}[misfire]; late != wantLate {
			t.Fatalf("%s: %d late rows, want %d", misfire, late, wantLate)
		}
		page, err := st.FireHistory(ctx, jobq.FireHistoryParams{Name: name, Limit: 3})
		if err != nil || len(page) != 3 || !page[0].Instant.Equal(rows[len(rows)-1].Instant) || !page[0].Instant.After(page[1].Instant) {
			t.Fatalf("%s: history page %+v, %v: want the newest 3, newest first", misfire, page, err)
		}
		next, err := st.FireHistory(ctx, jobq.FireHistoryParams{Name: name, Before: page[2].Instant, Limit: 1})
		if err != nil || len(next) != 1 || !next[0].Instant.Equal(rows[len(rows)-4].Instant) {
			t.Fatalf("%s: second page %+v, %v", misfire, next, err)
		}
	}
}

// Two schedulers firing one schedule at once, over and over: one ledger
// row per instant, each fired instant's job the one with its key.
func TestFireLedgerConcurrentFiresOneRowPerInstant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testdb.Store(t)
	now, err := st.DBNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cursor := now.UTC().Truncate(time.Second).Add(-20 * time.Second)
	spec := jobq.PeriodicSpec{Name: "c", Cron: "@every 1s", JobType: "noop", Params: "{}", Misfire: jobq.MisfireSkip, Source: jobq.PeriodicSourceAPI}
	if _, _, err := st.PeriodicUpsert(ctx, spec, func(time.Time) time.Time { return cursor }); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	inserted := 0
	var last time.Time
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 15 {
				res, err := st.PeriodicFire(ctx, "c", realPlan(t, 10*time.Second))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				inserted += len(res.Inserted)
				if res.Next.After(last) {
					last = res.Next
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	rows := ledger(t, st, "c")
	firedRows := 0
	for i, r := range rows {
		if !r.Instant.Equal(cursor.Add(time.Duration(i) * time.Second)) {
			t.Fatalf("row %d at %s, want %s (a gap or a double)", i, r.Instant, cursor.Add(time.Duration(i)*time.Second))
		}
		if r.Fate != jobq.FireSkipped {
			firedRows++
			j, err := st.JobGet(ctx, r.JobID)
			if err != nil || j.JobKey != jobq.PeriodicKey("c", r.Instant) {
				t.Fatalf("row %+v: job %+v, %v", r, j, err)
			}
		}
	}
	var jobs int
	if err := st.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM job_queue WHERE job_key LIKE 'c@%'").Scan(&jobs); err != nil {
		t.Fatal(err)
	}
	if firedRows != jobs || jobs != inserted || len(rows) < 20 {
		t.Fatalf("%d ledger rows (%d fired), %d jobs, %d inserted by the fires", len(rows), firedRows, jobs, inserted)
	}
	t.Logf("%d instants, %d fired, %d skipped", len(rows), firedRows, len(rows)-firedRows)
}
