package bench

import (
	"context"
	"testing"
	"time"

	"github.com/jobq/jobq/metrics"
)

// The future-jobs axis runs end to end on a small scale: every point reads
// at most 2 index entries per statement, no job starts before its run_at,
// every pickup is counted, and the future jobs are gone afterwards.
func TestFutureAxisSmoke(t *testing.T) {
	defer func(d, p int, s, l time.Duration) {
		futureDrainJobs, futurePickupJobs, futurePickupSpread, futurePickupLead = d, p, s, l
	}(futureDrainJobs, futurePickupJobs, futurePickupSpread, futurePickupLead)
	futureDrainJobs, futurePickupJobs, futurePickupSpread, futurePickupLead = 500, 40, time.Second, time.Second
	h := newTestHarness(t, Options{FutureJobs: []int{0, 3000}, Rounds: 1, IdleWindow: time.Second})
	ctx := context.Background()
	res := &Result{}
	if err := h.futureAxis(ctx, res); err != nil {
		t.Fatal(err)
	}
	if len(res.Future) != 2 || res.Future[0].FutureJobs != 0 || res.Future[1].FutureJobs != 3000 {
		t.Fatalf("points %+v, want 0 and 3000 future jobs", res.Future)
	}
	for _, f := range res.Future {
		if f.ProbeRowsExamined > 2 || f.LockRowsExamined > 2 || f.PromoterProbeRowsExamined > 2 {
			t.Errorf("%d future jobs: rows examined %d/%d/%d, want ≤ 2 each", f.FutureJobs, f.ProbeRowsExamined, f.LockRowsExamined, f.PromoterProbeRowsExamined)
		}
		if f.EarlyStarts != 0 || f.Pickup.Count != 40 {
			t.Errorf("%d future jobs: %d early starts of %d pickups, want 0 of 40", f.FutureJobs, f.EarlyStarts, f.Pickup.Count)
		}
		// The idle replica's backlog sampler (every 0.5 s here) reads at
		// most BacklogCountLimit of the parked jobs per sample.
		if limit := 2 * float64(metrics.BacklogCountLimitDefault) * 1.5; f.IdleRowsPerSecond > limit || f.FutureJobs > 0 && f.IdleRowsPerSecond <= 0 {
			t.Errorf("%d future jobs: idle rows read %.1f/s, want > 0 (when parked) and ≤ %.0f", f.FutureJobs, f.IdleRowsPerSecond, limit)
		}
		if f.DrainThroughput <= 0 || len(f.DrainRounds) != 1 {
			t.Errorf("%d future jobs: drain %v jobs/s over rounds %v, want > 0 in 1 round", f.FutureJobs, f.DrainThroughput, f.DrainRounds)
		}
	}
	var left int
	if err := h.env.Admin.QueryRow("SELECT COUNT(*) FROM job_queue WHERE status = 'SCHEDULED'").Scan(&left); err != nil || left != 0 || h.env.BaseID != 0 {
		t.Fatalf("after the axis: %d SCHEDULED jobs, BaseID %d, err %v; want 0, 0", left, h.env.BaseID, err)
	}
}
