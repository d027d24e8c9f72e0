package checker

import (
	"testing"

	"github.com/jobq/jobq"
)

// schedBuilder is an every-second schedule "tick" over the five instants
// 1 s … 5 s: three fired (jobs 1, 2, 3 ran once each), one skipped for an
// overlap and one for a misfire — a VALID history the cases below break
// one way each.
func schedBuilder() *builder {
	b := newBuilder()
	b.h.Schedules = []Schedule{{Name: "tick", Cron: "@every 1s", From: at(1000), To: at(6000)}}
	b.fired(1, 1000, FateFired)
	b.fired(2, 2000, FateFired)
	b.skipped(3000, jobq.FireReasonOverlap)
	b.skipped(4000, jobq.FireReasonMisfire)
	b.fired(3, 5000, FateFired)
	return b
}

// fired adds job id for tick's instant at ms, run once, and its ledger row.
func (b *builder) fired(id uint64, ms int, fate string) {
	b.h.Jobs = append(b.h.Jobs, Job{ID: id, Key: jobq.PeriodicKey("tick", at(ms)), Type: "effect", Status: StatusSuccess,
		Attempt: 1, MaxRetry: 3, CreateTime: at(ms), FinishedAt: atp(ms + 200)})
	b.exec(id, 1, "replica-1.1", ms+10, ms+200, OutcomeSuccess)
	b.h.Schedules[0].Fires = append(b.h.Schedules[0].Fires, Fire{Instant: at(ms), Fate: fate, JobID: id, Covers: 1, RecordTime: at(ms + 5)})
}

func (b *builder) skipped(ms int, reason string) {
	b.h.Schedules[0].Fires = append(b.h.Schedules[0].Fires, Fire{Instant: at(ms), Fate: FateSkipped, Reason: reason, Covers: 1, RecordTime: at(ms + 5)})
}

func TestFireChecksValidSchedule(t *testing.T) {
	r := Check(schedBuilder().h)
	if !r.Valid {
		t.Fatalf("a schedule whose every instant fired once or was skipped is INVALID: %+v", r.Violations)
	}
	if len(r.Schedules) != 1 {
		t.Fatalf("schedules %+v", r.Schedules)
	}
	s := r.Schedules[0]
	if s.Instants != 5 || s.Fired != 3 || s.Skipped[jobq.FireReasonOverlap] != 1 || s.Skipped[jobq.FireReasonMisfire] != 1 || s.Missing+s.Doubled != 0 {
		t.Fatalf("schedule result %+v", s)
	}
	if r.Counts.Phantom != 0 {
		t.Fatalf("the schedule's jobs counted as phantoms: %+v", r.Violations)
	}
}

// A summary row (covers > 1) stands for the skipped instants up to the
// next row.
func TestFireChecksSummaryRowCovers(t *testing.T) {
	b := schedBuilder()
	f := b.h.Schedules[0].Fires
	f[2].Covers, f[2].Reason = 2, jobq.FireReasonMisfire
	b.h.Schedules[0].Fires = append(f[:3], f[4:]...) // 3 s covers 3 s and 4 s
	if r := Check(b.h); !r.Valid || r.Schedules[0].Skipped[jobq.FireReasonMisfire] != 2 {
		t.Fatalf("summary row: %+v %+v", r.Violations, r.Schedules)
	}
}

// Each fire check fails on a hand-built history that breaks its promise.
func TestFireChecksFailOnHandBuiltHistories(t *testing.T) {
	for _, tc := range []struct {
		check string
		want  string
		build func(b *builder)
	}{
		{CheckFireMissing, "instant 2026-01-02T03:04:09Z has no ledger row", func(b *builder) {
			// The misfire row at 4 s was never written (a fire that moved
			// the cursor without recording what it skipped).
			f := b.h.Schedules[0].Fires
			b.h.Schedules[0].Fires = append(f[:3], f[4:]...)
		}},
		{CheckFireMissing, "which is not in job_queue", func(b *builder) {
			// The ledger says 2 s fired job 2, but the job is gone (the
			// ledger row committed without its job).
			b.h.Jobs = b.h.Jobs[:1:1]
			b.h.Jobs = append(b.h.Jobs, Job{ID: 3, Key: jobq.PeriodicKey("tick", at(5000)), Type: "effect", Status: StatusSuccess,
				Attempt: 1, MaxRetry: 3, CreateTime: at(5000), FinishedAt: atp(5200)})
			b.h.Executions = []Execution{b.h.Executions[0], b.h.Executions[2]}
		}},
		{CheckFireMissing, "skipped without a reason", func(b *builder) {
			b.h.Schedules[0].Fires[2].Reason = ""
		}},
		{CheckFireDoubled, "has 2 jobs", func(b *builder) {
			// A second job for the 2 s instant (a fire that did not find
			// the first: no unique key).
			b.h.Jobs = append(b.h.Jobs, Job{ID: 4, Key: jobq.PeriodicKey("tick", at(2000)), Type: "effect", Status: StatusSuccess,
				Attempt: 1, MaxRetry: 3, CreateTime: at(2100), FinishedAt: atp(2300)})
			b.exec(4, 1, "replica-2.1", 2110, 2300, OutcomeSuccess)
		}},
		{CheckFireDoubled, "has 2 ledger rows", func(b *builder) {
			b.h.Schedules[0].Fires = append(b.h.Schedules[0].Fires, Fire{Instant: at(1000), Fate: FateFired, JobID: 1, Covers: 1, RecordTime: at(1300)})
		}},
		{CheckFireDoubled, "yet job 4 ran for it", func(b *builder) {
			// The overlap skip at 3 s, and a job for 3 s all the same.
			b.h.Jobs = append(b.h.Jobs, Job{ID: 4, Key: jobq.PeriodicKey("tick", at(3000)), Type: "effect", Status: StatusSuccess,
				Attempt: 1, MaxRetry: 3, CreateTime: at(3000), FinishedAt: atp(3200)})
			b.exec(4, 1, "replica-2.1", 3010, 3200, OutcomeSuccess)
			b.h.Submits = append(b.h.Submits, Submit{Key: b.h.Jobs[3].Key, Type: "effect", JobID: 4, SentAt: at(3000), AckedAt: at(3000)})
		}},
	} {
		t.Run(tc.check+"/"+tc.want, func(t *testing.T) {
			b := schedBuilder()
			tc.build(b)
			wantViolationSaying(t, b.h, tc.check, tc.want)
		})
	}
}
