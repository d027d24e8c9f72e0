package checker

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(ms int) time.Time      { return t0.Add(time.Duration(ms) * time.Millisecond) }
func atp(ms int) *time.Time    { t := at(ms); return &t }
func key(id uint64) string     { return fmt.Sprintf("k-%d", id) }
func approx(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
func near(a, b float64) bool   { return a-b <= b/1000 && b-a <= b/1000 }

// builder makes hand-built histories: every job is submitted and acked at
// its create time.
type builder struct{ h History }

func newBuilder() *builder {
	return &builder{h: History{Lease: 2 * time.Second, RescueInterval: 500 * time.Millisecond, Start: t0, End: at(30000)}}
}

// job adds an acknowledged effect job created at createMs with the given
// final status and attempt.
func (b *builder) job(id uint64, createMs int, status string, attempt int, finishedMs int) *Job {
	j := Job{ID: id, Key: key(id), Type: "effect", Status: status, Attempt: attempt, MaxRetry: 3, CreateTime: at(createMs)}
	if finishedMs >= 0 {
		j.FinishedAt = atp(finishedMs)
	}
	b.h.Jobs = append(b.h.Jobs, j)
	b.h.Submits = append(b.h.Submits, Submit{Key: key(id), Type: "effect", JobID: id, SentAt: at(createMs), AckedAt: at(createMs)})
	return &b.h.Jobs[len(b.h.Jobs)-1]
}

func (b *builder) exec(id uint64, attempt int, owner string, startMs, finishMs int, outcome string) {
	e := Execution{JobID: id, Attempt: attempt, Owner: owner, StartedAt: at(startMs), Outcome: outcome}
	if finishMs >= 0 {
		e.FinishedAt = atp(finishMs)
	}
	b.h.Executions = append(b.h.Executions, e)
}

func (b *builder) effect(id uint64, attempt int, kind, owner string, ms int) {
	b.h.Effects = append(b.h.Effects, Effect{JobID: id, Attempt: attempt, Kind: kind, Owner: owner, CreatedAt: at(ms)})
}

// ok adds a job that ran once and succeeded: created at c, claimed at c+10,
// effects written, done at c+200.
func (b *builder) ok(id uint64, c int, owner string) {
	b.job(id, c, StatusSuccess, 1, c+200)
	b.exec(id, 1, owner, c+10, c+200, OutcomeSuccess)
	b.effect(id, 1, EffectNonTx, owner, c+20)
	b.effect(id, 1, EffectTx, owner, c+200)
}

func violation(r *Result, check string) *Violation {
	for i := range r.Violations {
		if r.Violations[i].Check == check {
			return &r.Violations[i]
		}
	}
	return nil
}

func wantOnly(t *testing.T, r *Result, check string, count int) *Violation {
	t.Helper()
	if r.Valid {
		t.Fatalf("valid = true, want a %s violation", check)
	}
	v := violation(r, check)
	if v == nil {
		t.Fatalf("no %s violation; violations = %+v", check, r.Violations)
	}
	if v.Count != count {
		t.Fatalf("%s count = %d, want %d (%v)", check, v.Count, count, v.Examples)
	}
	for _, other := range r.Violations {
		if other.Check != check {
			t.Fatalf("unexpected extra violation %+v", other)
		}
	}
	return v
}

// wantExactly checks that r's violations are exactly counts (check → count).
func wantExactly(t *testing.T, r *Result, counts map[string]int) {
	t.Helper()
	got := map[string]int{}
	for _, v := range r.Violations {
		got[v.Check] = v.Count
	}
	if fmt.Sprint(got) != fmt.Sprint(counts) {
		t.Fatalf("violations %v, want %v (%+v)", got, counts, r.Violations)
	}
}

func TestCleanHistoryIsValid(t *testing.T) {
	b := newBuilder()
	for i := uint64(1); i <= 10; i++ {
		b.ok(i, int(i)*100, "replica-1.1")
	}
	r := Check(b.h)
	if !r.Valid || len(r.Violations) != 0 {
		t.Fatalf("valid = %v, violations %+v", r.Valid, r.Violations)
	}
	c := r.Counts
	if c.Submitted != 10 || c.Acknowledged != 10 || c.Completed != 10 || c.ByStatus[StatusSuccess] != 10 || c.Executions != 10 {
		t.Fatalf("counts = %+v", c)
	}
	if r.ExecutionsPerJob[1] != 10 || len(r.ExecutionsPerJob) != 1 {
		t.Fatalf("executions per job = %v, want {1:10}", r.ExecutionsPerJob)
	}
	// Every pickup is exactly 10 ms, every end-to-end 200 ms.
	// HdrHistogram keeps 3 significant digits: within 0.1%.
	if r.Pickup.Count != 10 || !near(r.Pickup.P50, 10) || !near(r.Pickup.Max, 10) {
		t.Fatalf("pickup = %+v, want 10 samples of 10ms", r.Pickup)
	}
	if !near(r.EndToEnd.P99, 200) {
		t.Fatalf("end-to-end p99 = %v, want 200ms", r.EndToEnd.P99)
	}
	if r.NonTx.DuplicatedJobs != 0 {
		t.Fatalf("non-tx duplicates = %+v", r.NonTx)
	}
}

func TestLostJobReported(t *testing.T) {
	b := newBuilder()
	b.ok(1, 100, "replica-1.1")
	// Job 2 acknowledged, never claimed: WAITING at the end.
	b.job(2, 200, StatusWaiting, 0, -1)
	// Job 4 never acknowledged and not stored: not lost.
	b.h.Submits = append(b.h.Submits, Submit{Key: key(4), SentAt: at(400), Err: "connection refused"})
	r := Check(b.h)
	v := wantOnly(t, r, CheckLost, 1)
	if !strings.Contains(v.Examples[0], "job 2 (k-2): WAITING") {
		t.Fatalf("examples = %v", v.Examples)
	}
	if r.Counts.Unacknowledged != 1 || r.Counts.UnackedStored != 0 || r.Counts.Acknowledged != 2 || r.Counts.Lost != 1 || r.Counts.AckedMissing != 0 {
		t.Fatalf("counts = %+v", r.Counts)
	}
}

// An acknowledged submit whose job is gone afterwards — no row with its id,
// or (after an async failover, the new primary reissuing auto-increment
// ids) a row with its id and another key — is acknowledged_submit_missing,
// not lost.
func TestAckedSubmitMissingReported(t *testing.T) {
	b := newBuilder()
	b.ok(1, 100, "replica-1.1")
	// Job 3 acknowledged but its row is gone.
	b.h.Submits = append(b.h.Submits, Submit{Key: key(3), JobID: 3, Replica: "replica-2", SentAt: at(300), AckedAt: at(300)})
	// Job 5 acknowledged as id 2; id 2 is now another job (k-5 was lost,
	// k-2 got its id on the new primary).
	b.h.Submits = append(b.h.Submits, Submit{Key: key(5), JobID: 2, Replica: "replica-1", SentAt: at(400), AckedAt: at(400)})
	b.ok(2, 500, "replica-1.1")
	r := Check(b.h)
	v := wantOnly(t, r, CheckAckedMissing, 2)
	if !strings.Contains(v.Examples[0], "job 3 (k-3): acknowledged by replica-2 at") || !strings.Contains(v.Examples[0], "(no such id)") ||
		!strings.Contains(v.Examples[1], "job 2 (k-5): acknowledged by replica-1") || !strings.Contains(v.Examples[1], "(id 2 is now job k-2)") {
		t.Fatalf("examples = %v", v.Examples)
	}
	if c := r.Counts; c.Acknowledged != 4 || c.AckedMissing != 2 || c.Lost != 0 || c.Completed != 2 {
		t.Fatalf("counts = %+v", c)
	}
}

func TestStuckJobReported(t *testing.T) {
	b := newBuilder()
	b.ok(1, 100, "replica-1.1")
	j := b.job(2, 200, StatusRunning, 1, -1)
	j.Owner, j.LeaseUntil = "replica-2.1", atp(2210) // expired long before End (30 s)
	b.exec(2, 1, "replica-2.1", 210, -1, "")
	r := Check(b.h)
	if v := violation(r, CheckStuck); v == nil || v.Count != 1 || !strings.Contains(v.Examples[0], "replica-2.1") {
		t.Fatalf("stuck violation = %+v", v)
	}
	if r.Counts.Lost != 1 || r.Counts.Stuck != 1 {
		t.Fatalf("lost/stuck = %d/%d, want 1/1", r.Counts.Lost, r.Counts.Stuck)
	}
	// A RUNNING job whose lease is still live at the end is lost (not
	// drained) but not stuck.
	j.LeaseUntil = atp(29900)
	r = Check(b.h)
	wantOnly(t, r, CheckLost, 1)
}

func TestDuplicateTxEffectReported(t *testing.T) {
	b := newBuilder()
	b.ok(1, 100, "replica-1.1")
	b.ok(2, 200, "replica-1.1")
	b.effect(2, 1, EffectTx, "replica-1.1", 250) // the same attempt's effect twice
	r := Check(b.h)
	v := wantOnly(t, r, CheckTxDuplicate, 1)
	if v.Examples[0] != "job 2: 2 transactional effects" {
		t.Fatalf("example = %q", v.Examples[0])
	}
}

func TestOverlappingLeasesReported(t *testing.T) {
	b := newBuilder()
	b.ok(1, 100, "replica-1.1")
	// Job 2: attempt 1 held until 3000 but attempt 2 was claimed at 2500.
	b.job(2, 200, StatusSuccess, 2, 3500)
	b.exec(2, 1, "replica-1.1", 210, 3000, OutcomeLeaseExpired)
	b.exec(2, 2, "replica-2.1", 2500, 3500, OutcomeSuccess)
	b.effect(2, 2, EffectTx, "replica-2.1", 3500)
	// Job 3: attempt 1 never closed, attempt 2 claimed.
	b.job(3, 300, StatusSuccess, 2, 4000)
	b.exec(3, 1, "replica-1.1", 310, -1, "")
	b.exec(3, 2, "replica-2.1", 3000, 4000, OutcomeSuccess)
	b.effect(3, 2, EffectTx, "replica-2.1", 4000)
	// replica-1.1 was killed: its rescues are explained.
	b.h.Faults = []Fault{{Kind: "kill", Target: "replica-1", Owner: "replica-1.1", Start: at(400), End: at(1400)}}
	r := Check(b.h)
	v := wantOnly(t, r, CheckOverlap, 2)
	if !strings.Contains(v.Examples[0], "job 2: attempt 1 (replica-1.1) held the job") || !strings.Contains(v.Examples[0], "500ms earlier") {
		t.Fatalf("example 0 = %q", v.Examples[0])
	}
	if !strings.Contains(v.Examples[1], "job 3: attempt 1 (replica-1.1) never ended") {
		t.Fatalf("example 1 = %q", v.Examples[1])
	}
}

// A correct rescue and re-run: attempt 1 rescued at 2600 (lease expired),
// attempt 2 claimed after; the zombie's late completion was refused (STALE).
// Its non-transactional effect repeats — explained, not a violation.
func TestRescueWithRefusedZombieIsValid(t *testing.T) {
	b := newBuilder()
	b.job(1, 100, StatusSuccess, 2, 3300)
	b.exec(1, 1, "replica-1.1", 110, 2600, OutcomeStale)
	b.exec(1, 2, "replica-2.1", 3000, 3300, OutcomeSuccess)
	b.effect(1, 1, EffectNonTx, "replica-1.1", 120)
	b.effect(1, 2, EffectNonTx, "replica-2.1", 3010)
	b.effect(1, 2, EffectTx, "replica-2.1", 3300)
	b.h.Faults = []Fault{{Kind: "pause", Target: "replica-1", Owner: "replica-1.1", Start: at(500), End: at(5500)}}
	r := Check(b.h)
	if !r.Valid {
		t.Fatalf("violations = %+v", r.Violations)
	}
	if r.NonTx.DuplicatedJobs != 1 || r.NonTx.Explained != 1 || r.NonTx.ExtraEffects != 1 || r.NonTx.InterruptingFaults != 1 || r.NonTx.InterruptedRuns != 1 {
		t.Fatalf("non-tx = %+v", r.NonTx)
	}
	if r.Counts.StaleCompletionsRefused != 1 || r.Counts.Rescued != 1 || r.ExecutionsPerJob[2] != 1 {
		t.Fatalf("counts = %+v per job %v", r.Counts, r.ExecutionsPerJob)
	}
	f := r.Faults[0]
	// The paused run (attempt 1) is the fault's orphan; attempt 2 re-picked
	// it 2.5 s after the pause began.
	if f.Orphans != 1 || f.RePicked != 1 || !approx(f.RePickMax, 2.5) {
		t.Fatalf("fault = %+v", f)
	}
}

// The zombie's completion was accepted (no fencing): the job's final
// SUCCESS came from attempt 1 whose lease had been rescued, and its
// transactional effect committed.
func TestStaleCompletionAcceptedReported(t *testing.T) {
	b := newBuilder()
	b.ok(1, 100, "replica-2.1")
	b.job(2, 200, StatusSuccess, 2, 5600)
	b.exec(2, 1, "replica-1.1", 210, 2700, OutcomeLeaseExpired)
	b.exec(2, 2, "replica-2.1", 3000, 6000, OutcomeStale)
	b.effect(2, 1, EffectTx, "replica-1.1", 5600)
	b.h.Faults = []Fault{{Kind: "pause", Target: "replica-1", Owner: "replica-1.1", Start: at(400), End: at(5500)}}
	r := Check(b.h)
	v := wantOnly(t, r, CheckStaleAccepted, 1)
	if !strings.Contains(v.Examples[0], `tx effect of attempt 1 (replica-1.1) whose execution ended "LEASE_EXPIRED"`) {
		t.Fatalf("example = %q", v.Examples[0])
	}
	// The same job where the zombie's job-row write landed but no effect
	// was written: SUCCESS while the latest attempt was refused.
	b.h.Effects = b.h.Effects[:len(b.h.Effects)-1]
	r = Check(b.h)
	v = wantOnly(t, r, CheckStaleAccepted, 1)
	if !strings.Contains(v.Examples[0], `job SUCCESS but its latest attempt 2 (replica-2.1) ended "STALE"`) {
		t.Fatalf("example = %q", v.Examples[0])
	}
}

func TestPhantomJobReported(t *testing.T) {
	b := newBuilder()
	b.ok(1, 100, "replica-1.1")
	b.h.Jobs = append(b.h.Jobs, Job{ID: 9, Key: "not-submitted", Status: StatusSuccess, CreateTime: at(100), FinishedAt: atp(200)})
	wantOnly(t, Check(b.h), CheckPhantom, 1)
}

// A database outage: nothing finishes between 1000 and 4000 while jobs
// wait, so the unavailability window is 3 s; the backlog (4 jobs at the
// start of the outage) is back at 4 when job 1 finishes at 4100.
func TestFaultRecoveryFigures(t *testing.T) {
	b := newBuilder()
	b.h.End = at(10000)
	b.ok(10, 0, "replica-1.1") // finishes at 200
	for i := uint64(1); i <= 4; i++ {
		c := 500 + int(i)*100
		b.job(i, c, StatusSuccess, 1, 4000+int(i)*100)
		b.exec(i, 1, "replica-1.1", c+10, 4000+int(i)*100, OutcomeSuccess)
		b.effect(i, 1, EffectTx, "replica-1.1", 4000+int(i)*100)
	}
	b.job(5, 1500, StatusSuccess, 1, 4600) // submitted during the outage
	b.exec(5, 1, "replica-2.1", 4500, 4600, OutcomeSuccess)
	b.effect(5, 1, EffectTx, "replica-2.1", 4600)
	b.h.Faults = []Fault{{Kind: "db-restart", Start: at(1000), End: at(3000)}}
	r := Check(b.h)
	if !r.Valid {
		t.Fatalf("violations = %+v", r.Violations)
	}
	f := r.Faults[0]
	if f.BacklogAtStart != 4 {
		t.Fatalf("backlog at start = %d, want 4", f.BacklogAtStart)
	}
	if !approx(f.Unavailability, 3.1) { // 1000 → 4100, the first finish after the outage
		t.Fatalf("unavailability = %v, want 3.1", f.Unavailability)
	}
	if !approx(f.BacklogRecovery, 3.1) { // backlog 5 until 4100, then 4
		t.Fatalf("backlog recovery = %v, want 3.1", f.BacklogRecovery)
	}
	if f.Orphans != 0 {
		t.Fatalf("orphans = %d, want 0 (every run finished on its own)", f.Orphans)
	}
	// Timeline: 500 ms buckets; 4 successes in (4000, 4500] → 8/s.
	var p *Point
	for i := range r.Timeline {
		if approx(r.Timeline[i].T, 4.5) {
			p = &r.Timeline[i]
		}
	}
	if p == nil || !approx(p.Throughput, 8) || p.Backlog != 1 {
		t.Fatalf("timeline point at 4.5s = %+v", p)
	}
	if last := r.Timeline[len(r.Timeline)-1]; !approx(last.T, 10) || last.Backlog != 0 {
		t.Fatalf("last timeline point = %+v", last)
	}
}

// A poison job must end FAILED after max_retry+1 claims, each rescued.
func TestPoisonJobMustFail(t *testing.T) {
	b := newBuilder()
	b.ok(1, 100, "replica-1.1")
	j := b.job(2, 200, StatusFailed, 2, 6000)
	j.Type, j.MaxRetry = PoisonType, 1
	b.exec(2, 1, "replica-1.1", 210, 2800, OutcomeLeaseExpired)
	b.exec(2, 2, "replica-2.1", 3000, 6000, OutcomeLeaseExpired)
	// Each claim killed its replica: the harness logged a crash each time.
	b.h.Faults = []Fault{
		{Kind: "crash", Target: "replica-1", Owner: "replica-1.1", Start: at(300), End: at(1300)},
		{Kind: "crash", Target: "replica-2", Owner: "replica-2.1", Start: at(3100), End: at(4100)},
		{Kind: "crash", Target: "replica-3", Owner: "replica-3.1", Start: at(6600), End: at(7600)},
	}
	r := Check(b.h)
	if !r.Valid || r.Counts.PoisonJobs != 1 || r.Counts.PoisonFailed != 1 {
		t.Fatalf("valid %v, poison %d/%d, violations %+v", r.Valid, r.Counts.PoisonFailed, r.Counts.PoisonJobs, r.Violations)
	}
	// Claimed once more than max_retry allows: reported.
	b.exec(2, 3, "replica-3.1", 6500, 7000, OutcomeLeaseExpired)
	b.h.Jobs[1].Attempt = 3
	v := wantOnly(t, Check(b.h), CheckPoison, 1)
	if v.Examples[0] != "job 2: poison job FAILED after 3 claims (max_retry 1); want FAILED after 2" {
		t.Fatalf("example = %q", v.Examples[0])
	}
}

// The cas claim's ABA race: attempt 3 was claimed at 2100 although the
// failed attempt 2 had re-queued the job with run_at 2300 (retry backoff).
// Attempts claimed at or after their due time are fine.
func TestClaimedBeforeDueReported(t *testing.T) {
	b := newBuilder()
	b.ok(1, 100, "replica-1.1")
	b.h.Executions[0].DueAt = atp(100) // claimed at 110: after due
	b.job(2, 200, StatusSuccess, 3, 2400)
	b.exec(2, 1, "replica-1.1", 210, 1000, OutcomeFailed)
	b.exec(2, 2, "replica-2.1", 1500, 2000, OutcomeFailed)
	b.exec(2, 3, "replica-3.1", 2100, 2400, OutcomeSuccess)
	b.h.Executions[1].DueAt, b.h.Executions[2].DueAt, b.h.Executions[3].DueAt = atp(200), atp(1200), atp(2300)
	b.effect(2, 3, EffectTx, "replica-3.1", 2400)
	v := wantOnly(t, Check(b.h), CheckClaimedEarly, 1)
	if !strings.Contains(v.Examples[0], "job 2: attempt 3 (replica-3.1) claimed at") || !strings.Contains(v.Examples[0], "200ms before it was due") {
		t.Fatalf("example = %q", v.Examples[0])
	}
	// Claimed exactly when due: valid. Rows without due_at are not judged.
	b.h.Executions[3].DueAt = atp(2100)
	if r := Check(b.h); !r.Valid {
		t.Fatalf("violations = %+v", r.Violations)
	}
	b.h.Executions[3].DueAt = nil
	if r := Check(b.h); !r.Valid {
		t.Fatalf("violations = %+v", r.Violations)
	}
}

// leaseLossHistory: job 1's attempt 1 on replica-1.1 was rescued at 2600
// (lease lost), attempt 2 ran on replica-2.1 from 3000; attempt 1's work
// ended at endMs.
func leaseLossHistory(endMs int) *builder {
	b := newBuilder()
	b.job(1, 100, StatusSuccess, 2, 3300)
	b.exec(1, 1, "replica-1.1", 110, 2600, OutcomeStale)
	b.exec(1, 2, "replica-2.1", 3000, 3300, OutcomeSuccess)
	b.effect(1, 1, EffectNonTx, "replica-1.1", 120)
	b.effect(1, 1, EffectEnd, "replica-1.1", endMs)
	b.effect(1, 2, EffectNonTx, "replica-2.1", 3010)
	b.effect(1, 2, EffectEnd, "replica-2.1", 3290)
	b.effect(1, 2, EffectTx, "replica-2.1", 3300)
	// The replica was slowed, so the rescue itself is explained.
	b.h.Faults = []Fault{{Kind: "latency", Target: "replica-1", Owner: "replica-1.1", Start: at(0), End: at(2000)}}
	return b
}

// A handler that kept running 3 s after its run was rescued (no lease
// cancel) is reported; one whose end marker lands within the tolerance
// (Lease/2) of the loss is not.
func TestWorkAfterLeaseLostReported(t *testing.T) {
	v := wantOnly(t, Check(leaseLossHistory(5600).h), CheckWorkAfterLoss, 1)
	if !strings.Contains(v.Examples[0], "job 1: attempt 1 (replica-1.1) lost its lease at") || !strings.Contains(v.Examples[0], "its work ended 3s later") {
		t.Fatalf("example = %q", v.Examples[0])
	}
	if r := Check(leaseLossHistory(3500).h); !r.Valid { // 900ms after the loss: within 1 s
		t.Fatalf("violations = %+v", r.Violations)
	}
	// The loss is the next attempt's claim when no rescue closed the run.
	b := leaseLossHistory(5600)
	b.h.Executions[0].FinishedAt, b.h.Executions[0].Outcome = nil, ""
	b.h.Faults = append(b.h.Faults, Fault{Kind: "kill", Target: "replica-1", Owner: "replica-1.1", Start: at(6000), End: at(7000)})
	r := Check(b.h)
	if v := violation(r, CheckWorkAfterLoss); v == nil || !strings.Contains(v.Examples[0], "its work ended 2.6s later") {
		t.Fatalf("work-after-loss violation = %+v (all %+v)", v, r.Violations)
	}
}

// A replica frozen (pause) or cut off (partition) when its run was rescued
// could not learn of the loss before the fault ended: an end marker right
// after the fault's end is no violation, one well after it is.
func TestWorkAfterLeaseLostCountsFromFaultEnd(t *testing.T) {
	for _, kind := range []string{"pause", "partition"} {
		b := leaseLossHistory(6100)
		b.h.Faults = []Fault{{Kind: kind, Target: "replica-1", Owner: "replica-1.1", Start: at(1000), End: at(6000)}}
		if r := Check(b.h); !r.Valid {
			t.Fatalf("%s: violations = %+v", kind, r.Violations)
		}
		b = leaseLossHistory(8000)
		b.h.Faults = []Fault{{Kind: kind, Target: "replica-1", Owner: "replica-1.1", Start: at(1000), End: at(6000)}}
		wantOnly(t, Check(b.h), CheckWorkAfterLoss, 1)
		// A fault on another replica explains nothing.
		b = leaseLossHistory(6100)
		b.h.Faults = append(b.h.Faults, Fault{Kind: kind, Target: "replica-3", Owner: "replica-3.1", Start: at(1000), End: at(6000)})
		wantOnly(t, Check(b.h), CheckWorkAfterLoss, 1)
	}
}

// rescueHistory: job 1's attempt 1 on replica-1.1 finished its work at 400
// but no completion was written; it was rescued at 2600 and re-run.
func rescueHistory() *builder {
	b := newBuilder()
	b.ok(2, 100, "replica-2.1")
	b.job(1, 100, StatusSuccess, 2, 3300)
	b.exec(1, 1, "replica-1.1", 110, 2600, OutcomeLeaseExpired)
	b.exec(1, 2, "replica-2.1", 3000, 3300, OutcomeSuccess)
	b.effect(1, 1, EffectNonTx, "replica-1.1", 120)
	b.effect(1, 1, EffectEnd, "replica-1.1", 400)
	b.effect(1, 2, EffectNonTx, "replica-2.1", 3010)
	b.effect(1, 2, EffectTx, "replica-2.1", 3300)
	return b
}

// A rescue no fault explains — the replica was alive and connected (a
// brief connection reset is no excuse: it must be retried) — is reported.
// Its run had finished its work (end effect at 400), so the re-run that
// followed is a rerun_after_success too.
func TestUnexplainedRescueReported(t *testing.T) {
	r := Check(rescueHistory().h)
	wantExactly(t, r, map[string]int{CheckUnexplainedRescue: 1, CheckRerunAfterSuccess: 1})
	v := violation(r, CheckUnexplainedRescue)
	if !strings.Contains(v.Examples[0], "job 1: attempt 1 (replica-1.1) claimed at") || !strings.Contains(v.Examples[0], "no fault on its replica or the database explains it") {
		t.Fatalf("example = %q", v.Examples[0])
	}
	both := map[string]int{CheckUnexplainedRescue: 1, CheckRerunAfterSuccess: 1}
	b := rescueHistory()
	b.h.Faults = []Fault{{Kind: "reset", Target: "replica-1", Owner: "replica-1.1", Start: at(390), End: at(700)}}
	wantExactly(t, Check(b.h), both)
	// A fault on another replica, or one that ended more than a lease
	// before the run was claimed, explains nothing.
	b.h.Faults = []Fault{{Kind: "kill", Target: "replica-3", Owner: "replica-3.1", Start: at(390), End: at(700)}}
	wantExactly(t, Check(b.h), both)
	b.h.Executions[1].StartedAt = at(2800) // claimed 2.1 s after the fault below ended
	b.h.Faults = []Fault{{Kind: "kill", Target: "replica-1", Owner: "replica-1.0", Start: at(0), End: at(700)}}
	b.h.Executions[1].Owner = "replica-1.0"
	wantExactly(t, Check(b.h), both)
}

// A read-only database (a demoted primary) shorter than ReadOnlyExcuse
// (7·Lease/15, 933 ms for the 2 s lease) must cost no run: a run that
// finished its work during it and was rescued and re-run is reported as
// rerun_after_success (and its rescue as unexplained). A longer one may
// cost leases and explains both. A re-run after an attempt that failed
// (FAILED, a retry) is the normal retry.
func TestRerunAfterSuccessReported(t *testing.T) {
	short := Fault{Kind: "read-only", Start: at(300), End: at(1000), Detail: "read_only=1 for 700ms"}
	b := rescueHistory()
	b.h.Faults = []Fault{short}
	r := Check(b.h)
	wantExactly(t, r, map[string]int{CheckUnexplainedRescue: 1, CheckRerunAfterSuccess: 1})
	if v := violation(r, CheckRerunAfterSuccess); !strings.Contains(v.Examples[0],
		`job 1: attempt 1 (replica-1.1) finished its work at 2026-01-02T03:04:05.4Z (execution "LEASE_EXPIRED"), yet attempt 2 (replica-2.1) was claimed at 2026-01-02T03:04:08Z`) {
		t.Fatalf("example = %q", v.Examples[0])
	}
	// A stale refusal instead of a rescue: the same re-run, no rescue to explain.
	b = rescueHistory()
	b.h.Faults = []Fault{short}
	b.h.Executions[1].Outcome = OutcomeStale // job 1, attempt 1
	wantOnly(t, Check(b.h), CheckRerunAfterSuccess, 1)
	// Read-only for 1.5 s (≥ 933 ms): explained.
	b = rescueHistory()
	b.h.Faults = []Fault{{Kind: "read-only", Start: at(300), End: at(1800)}}
	if r := Check(b.h); !r.Valid {
		t.Fatalf("long read-only: violations = %+v", r.Violations)
	}
	// Three short refusals less than Lease/3 apart (0.7 s each, 0.3 s gaps:
	// no heartbeat can renew in between) are one 2.7 s refusal: explained.
	// The same three spread a heartbeat interval or more apart are not.
	b = rescueHistory()
	b.h.Faults = []Fault{short, {Kind: "read-only", Start: at(1300), End: at(2000)}, {Kind: "read-only", Start: at(2300), End: at(3000)}}
	if r := Check(b.h); !r.Valid {
		t.Fatalf("back-to-back read-only faults: violations = %+v", r.Violations)
	}
	b = rescueHistory()
	b.h.Faults = []Fault{short, {Kind: "read-only", Start: at(1700), End: at(2400)}, {Kind: "read-only", Start: at(3100), End: at(3800)}}
	wantExactly(t, Check(b.h), map[string]int{CheckUnexplainedRescue: 1, CheckRerunAfterSuccess: 1})
	// Attempt 1 failed (its handler returned an error after its work): a retry.
	b = newBuilder()
	b.job(1, 100, StatusSuccess, 2, 3300)
	b.exec(1, 1, "replica-1.1", 110, 450, OutcomeFailed)
	b.exec(1, 2, "replica-2.1", 3000, 3300, OutcomeSuccess)
	b.effect(1, 1, EffectEnd, "replica-1.1", 400)
	b.effect(1, 2, EffectEnd, "replica-2.1", 3290)
	b.effect(1, 2, EffectTx, "replica-2.1", 3300)
	if r := Check(b.h); !r.Valid {
		t.Fatalf("retry after a failure: violations = %+v", r.Violations)
	}
}

// A job whose only attempt finished its work but whose outcome was never
// written ends FAILED "lease expired" when it has no retry left: reported
// as failed_after_success unless a fault explains the lost lease.
func TestFailedAfterSuccessReported(t *testing.T) {
	build := func(faults ...Fault) History {
		b := newBuilder()
		j := b.job(1, 100, StatusFailed, 1, 2600)
		j.MaxRetry, j.LastError = 0, "lease expired"
		b.exec(1, 1, "replica-1.1", 110, 2600, OutcomeLeaseExpired)
		b.effect(1, 1, EffectNonTx, "replica-1.1", 120)
		b.effect(1, 1, EffectEnd, "replica-1.1", 400)
		b.h.Faults = faults
		return b.h
	}
	r := Check(build(Fault{Kind: "read-only", Start: at(300), End: at(1000)}))
	wantExactly(t, r, map[string]int{CheckUnexplainedRescue: 1, CheckFailedAfterSuccess: 1})
	if v := violation(r, CheckFailedAfterSuccess); v.Examples[0] !=
		`job 1: FAILED ("lease expired") at 2026-01-02T03:04:07.6Z although attempt 1 (replica-1.1) finished its work at 2026-01-02T03:04:05.4Z (execution "LEASE_EXPIRED"); no fault explains it` {
		t.Fatalf("example = %q", v.Examples[0])
	}
	if r := Check(build(Fault{Kind: "kill", Target: "replica-1", Owner: "replica-1.1", Start: at(500), End: at(1500)})); !r.Valid {
		t.Fatalf("killed replica: violations = %+v", r.Violations)
	}
}

// Every fault that can cost a live run its lease explains its rescue: on
// the run's own replica incarnation, or database-wide.
func TestExplainedRescuesAreValid(t *testing.T) {
	for _, f := range []Fault{
		{Kind: "kill", Target: "replica-1", Owner: "replica-1.1", Start: at(500), End: at(1500)},
		{Kind: "pause", Target: "replica-1", Owner: "replica-1.1", Start: at(300), End: at(5000)},
		{Kind: "partition", Target: "replica-1", Owner: "replica-1.1", Start: at(300), End: at(4000)},
		{Kind: "latency", Target: "replica-1", Owner: "replica-1.1", Start: at(0), End: at(6000)},
		{Kind: "term", Target: "replica-1", Owner: "replica-1.1", Start: at(450), End: at(2000)},
		{Kind: "crash", Target: "replica-1", Owner: "replica-1.1", Start: at(450), End: at(2000)},
		{Kind: "clock-skew", Target: "replica-1", Owner: "replica-1.1", Start: at(450), End: at(2000)},
		{Kind: "db-restart", Start: at(450), End: at(3500)},
	} {
		b := rescueHistory()
		b.h.Faults = []Fault{f}
		if r := Check(b.h); !r.Valid {
			t.Fatalf("%s: violations = %+v", f.Kind, r.Violations)
		}
	}
}

// Every started attempt has exactly one execution row: a gap, a repeat or
// a terminal job missing its last attempt's row is a violation; the
// in-flight attempt of a RUNNING job has none yet and is not one.
func TestMissingExecutions(t *testing.T) {
	cases := []struct {
		name  string
		build func(b *builder)
		want  int
	}{
		{"rescued then succeeded", func(b *builder) {
			b.job(1, 0, StatusSuccess, 2, 3000)
			b.exec(1, 1, "a", 10, 2500, OutcomeLeaseExpired)
			b.exec(1, 2, "b", 2600, 3000, OutcomeSuccess)
		}, 0},
		{"last attempt without a row", func(b *builder) {
			b.job(1, 0, StatusSuccess, 2, 3000)
			b.exec(1, 2, "b", 2600, 3000, OutcomeSuccess)
		}, 1},
		{"rescued attempt without a row", func(b *builder) {
			b.job(1, 0, StatusSuccess, 2, 3000)
			b.exec(1, 1, "a", 10, 2500, OutcomeLeaseExpired)
		}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder()
			tc.build(b)
			r := Check(b.h)
			if r.Counts.MissingExecutions != tc.want {
				t.Fatalf("missing executions = %d, want %d (%+v)", r.Counts.MissingExecutions, tc.want, r.Violations)
			}
			if tc.want > 0 {
				if v := violation(r, CheckMissingExecution); v == nil || v.Count != tc.want {
					t.Fatalf("violation = %+v, want %s × %d", v, CheckMissingExecution, tc.want)
				}
			}
		})
	}
	t.Run("running job in flight", func(t *testing.T) {
		b := newBuilder()
		b.job(1, 0, StatusRunning, 2, -1)
		b.exec(1, 1, "a", 10, 2500, OutcomeLeaseExpired)
		if m := missingExecutions(&b.h.Jobs[0], b.h.Executions); m != "" {
			t.Fatalf("missingExecutions = %q, want none", m)
		}
	})
}

// The audit trail contradicting the job row is reported: a job CANCELED by
// a cancel that reached its run (execution closed after the job's
// finished_at) whose execution says SUCCESS or FAILED, a FAILED job whose
// run says SUCCESS, a terminal job with an open execution. A job cancelled
// while WAITING after a failed attempt, a cancelled run that says CANCELED
// and a rescue that ended a job CANCELED or FAILED agree.
func TestStatusVsLastExecutionReported(t *testing.T) {
	b := newBuilder()
	b.ok(1, 100, "replica-1.1")
	// Disagreements.
	b.job(2, 200, StatusCanceled, 1, 1500)
	b.exec(2, 1, "replica-1.1", 210, 1500, OutcomeSuccess)
	b.job(3, 300, StatusCanceled, 1, 1500)
	b.exec(3, 1, "replica-1.1", 310, 1501, OutcomeFailed)
	b.job(4, 400, StatusFailed, 1, 1500)
	b.exec(4, 1, "replica-1.1", 410, 1500, OutcomeSuccess)
	b.job(5, 500, StatusFailed, 1, 1500)
	b.exec(5, 1, "replica-1.1", 510, -1, "")
	// Agreements.
	b.job(6, 600, StatusCanceled, 1, 1500)
	b.exec(6, 1, "replica-1.1", 610, 1500, OutcomeCanceled)
	b.job(7, 700, StatusCanceled, 1, 2500)
	b.exec(7, 1, "replica-1.1", 710, 1500, OutcomeFailed)
	b.job(8, 800, StatusFailed, 1, 1500)
	b.exec(8, 1, "replica-1.1", 810, 1500, OutcomeFailed)
	r := Check(b.h)
	v := wantOnly(t, r, CheckStatusVsLastExecution, 4)
	want := []string{
		`job 2: CANCELED but its last execution (attempt 1, replica-1.1) says "SUCCESS"`,
		`job 3: CANCELED but its last execution (attempt 1, replica-1.1) says "FAILED"`,
		`job 4: FAILED but its last execution (attempt 1, replica-1.1) says "SUCCESS"`,
		`job 5: FAILED but its last execution (attempt 1, replica-1.1) says ""`,
	}
	if fmt.Sprint(v.Examples) != fmt.Sprint(want) {
		t.Fatalf("examples = %q, want %q", v.Examples, want)
	}
	if r.Counts.StatusVsLastExecution != 4 {
		t.Fatalf("count = %d, want 4", r.Counts.StatusVsLastExecution)
	}
}

// overlapping_leases is strict: a claim stamped at the very microsecond
// the previous attempt's rescue closed it is fine, one microsecond earlier
// is an overlap (the skiplocked claim stamps started_at from its UPDATE's
// NOW(6), taken while it holds the row, so it can never precede the rescue).
func TestOverlappingLeasesIsStrict(t *testing.T) {
	for _, tc := range []struct {
		name      string
		claimAtUs int
		overlap   bool
	}{
		{"claimed at the rescue instant", 0, false},
		{"claimed 1µs after", 1, false},
		{"claimed 1µs before", -1, true},
		{"claimed 631µs before (the partition run)", -631, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder()
			b.job(1, 100, StatusSuccess, 2, 5000)
			b.exec(1, 1, "replica-3.1", 110, 3000, OutcomeLeaseExpired)
			b.h.Executions = append(b.h.Executions, Execution{JobID: 1, Attempt: 2, Owner: "replica-1.1",
				StartedAt: at(3000).Add(time.Duration(tc.claimAtUs) * time.Microsecond), FinishedAt: atp(5000), Outcome: OutcomeSuccess})
			b.effect(1, 2, EffectTx, "replica-1.1", 5000)
			b.h.Faults = []Fault{{Kind: "partition", Target: "replica-3", Owner: "replica-3.1", Start: at(200), End: at(4000)}}
			r := Check(b.h)
			if !tc.overlap {
				if !r.Valid {
					t.Fatalf("violations = %+v", r.Violations)
				}
				return
			}
			wantOnly(t, r, CheckOverlap, 1)
		})
	}
}

// A rescue of a live replica whose lease renewal the database did not
// answer in time (a loaded machine) is counted, not a violation; one
// outside the run's claim-to-rescue window, or of another replica, excuses
// nothing (and the finished run's re-run is then a rerun_after_success too).
func TestRescueAfterSlowRenewalIsExcused(t *testing.T) {
	b := rescueHistory()
	b.h.SlowRenewals = []SlowRenewal{{Owner: "replica-1.1", At: at(1500)}}
	r := Check(b.h)
	if !r.Valid || r.Counts.RescuesAfterSlowRenewal != 1 || r.Counts.UnexplainedRescues != 0 {
		t.Fatalf("valid %v, rescues after slow renewal %d, unexplained %d; want true, 1, 0 (%+v)",
			r.Valid, r.Counts.RescuesAfterSlowRenewal, r.Counts.UnexplainedRescues, r.Violations)
	}
	for _, sr := range []SlowRenewal{{Owner: "replica-1.1", At: at(3100)}, {Owner: "replica-2.1", At: at(1500)}} {
		b.h.SlowRenewals = []SlowRenewal{sr}
		wantExactly(t, Check(b.h), map[string]int{CheckUnexplainedRescue: 1, CheckRerunAfterSuccess: 1})
	}
}

// A rescue of a replica incarnation that logged a stall — its heartbeat
// was not run in time, a CPU-starved machine — overlapping the run's
// claim-to-rescue window is counted apart, not a violation (and excuses
// the re-run that followed). No stall, a stall outside the window, or one
// of another replica or another incarnation of the same replica, excuses
// nothing.
func TestRescueAfterStallIsExcused(t *testing.T) {
	b := rescueHistory() // attempt 1 on replica-1.1, claimed at 110, rescued at 2600
	for _, st := range []Stall{
		{Owner: "replica-1.1", From: at(900), To: at(2900)},  // began inside, noticed after the rescue
		{Owner: "replica-1.1", From: at(50), To: at(200)},    // overlaps the claim
		{Owner: "replica-1.1", From: at(2600), To: at(2700)}, // begins at the rescue instant
	} {
		b.h.Stalls = []Stall{st}
		r := Check(b.h)
		if !r.Valid || r.Counts.RescuesAfterStall != 1 || r.Counts.UnexplainedRescues != 0 || r.Counts.RescuesAfterSlowRenewal != 0 {
			t.Fatalf("stall %+v: valid %v, rescues after stall %d, unexplained %d; want true, 1, 0 (%+v)",
				st, r.Valid, r.Counts.RescuesAfterStall, r.Counts.UnexplainedRescues, r.Violations)
		}
	}
	both := map[string]int{CheckUnexplainedRescue: 1, CheckRerunAfterSuccess: 1}
	b.h.Stalls = nil
	wantExactly(t, Check(b.h), both)
	for _, st := range []Stall{
		{Owner: "replica-2.1", From: at(900), To: at(2900)},  // another replica stalled
		{Owner: "replica-1.2", From: at(900), To: at(2900)},  // another incarnation
		{Owner: "replica-1.1", From: at(0), To: at(100)},     // ended before the claim
		{Owner: "replica-1.1", From: at(3100), To: at(3500)}, // began after the re-claim
	} {
		b.h.Stalls = []Stall{st}
		r := Check(b.h)
		wantExactly(t, r, both)
		if r.Counts.RescuesAfterStall != 0 {
			t.Fatalf("stall %+v: rescues after stall = %d, want 0", st, r.Counts.RescuesAfterStall)
		}
	}
}

// A replica that logged a stall spanning its run's loss (rescued at 2600)
// could not cancel the handler before the stall ended: an end marker right
// after the stall's end is no violation, one well after it is, and a stall
// of another replica, or one that ended before the loss, moves nothing.
func TestWorkAfterLeaseLostCountsFromStallEnd(t *testing.T) {
	b := leaseLossHistory(6100)
	b.h.Stalls = []Stall{{Owner: "replica-1.1", From: at(2000), To: at(6000)}}
	if r := Check(b.h); !r.Valid {
		t.Fatalf("violations = %+v", r.Violations)
	}
	b = leaseLossHistory(8000)
	b.h.Stalls = []Stall{{Owner: "replica-1.1", From: at(2000), To: at(6000)}}
	wantOnly(t, Check(b.h), CheckWorkAfterLoss, 1)
	for _, st := range []Stall{{Owner: "replica-2.1", From: at(2000), To: at(6000)}, {Owner: "replica-1.1", From: at(1000), To: at(2500)}} {
		b = leaseLossHistory(6100)
		b.h.Stalls = []Stall{st}
		wantOnly(t, Check(b.h), CheckWorkAfterLoss, 1)
	}
}

// releaseHistory: job 1's attempt 1 on replica-1.1, claimed at 110, was
// handed back unfinished at 2500 with why; attempt 2 ran on replica-2.1.
func releaseHistory(why string) *builder {
	b := newBuilder()
	b.ok(2, 100, "replica-2.1")
	b.job(1, 100, StatusSuccess, 2, 3300)
	b.exec(1, 1, "replica-1.1", 110, 2500, OutcomeReleased)
	b.h.Executions[len(b.h.Executions)-1].Error = why
	b.exec(1, 2, "replica-2.1", 3000, 3300, OutcomeSuccess)
	b.effect(1, 2, EffectNonTx, "replica-2.1", 3010)
	b.effect(1, 2, EffectTx, "replica-2.1", 3300)
	return b
}

// A release no shutdown or fault explains — a live, connected replica let
// a queued run's lease run out before its handler started — is reported,
// as an unexplained rescue is; a release at shutdown is explained by a
// SIGTERM of its replica incarnation or by the harness's final stop, any
// release by a fault that can cost a run its lease, one of a claim whose
// answer was lost by any fault on the link, and a slow renewal or a stall
// of its replica is counted apart (machine load). Each case names its rule.
func TestUnexplainedReleaseReported(t *testing.T) {
	const queued = "released: its lease ran out before the handler started"
	const shutdown = "released at shutdown: never started"
	const lostClaim = "released: its claim's answer was lost and no worker slot was free"
	const givenBack = "released: waited in the run queue longer than the run-queue wait; back to WAITING for any replica"
	r := Check(releaseHistory(queued).h)
	wantExactly(t, r, map[string]int{CheckUnexplainedRelease: 1})
	v := violation(r, CheckUnexplainedRelease)
	if !strings.Contains(v.Examples[0], "job 1: attempt 1 (replica-1.1) claimed at") || !strings.Contains(v.Examples[0], queued) ||
		!strings.Contains(v.Examples[0], "no shutdown or fault on its replica or the database explains it") {
		t.Fatalf("example = %q", v.Examples[0])
	}
	pause := Fault{Kind: "pause", Target: "replica-1", Owner: "replica-1.1", Start: at(500), End: at(1500)}
	for _, c := range []struct {
		rule       string
		why        string
		faults     []Fault
		stopped    int // ms; 0: not recorded
		slow       []SlowRenewal
		stalls     []Stall
		unexpl     int
		slowN, stN int
	}{
		{rule: "a release with no shutdown and no fault is unexplained", why: queued, unexpl: 1},
		{rule: "a pause of its replica explains a release", why: queued, faults: []Fault{pause}},
		{rule: "a database-wide latency fault explains a release", why: queued, faults: []Fault{{Kind: "latency", Start: at(500), End: at(1500)}}},
		{rule: "a reset (retried) explains no release but a lost claim's", why: queued,
			faults: []Fault{{Kind: "reset", Target: "replica-1", Owner: "replica-1.1", Start: at(500), End: at(700)}}, unexpl: 1},
		{rule: "a fault on another replica explains no release", why: queued,
			faults: []Fault{{Kind: "kill", Target: "replica-3", Owner: "replica-3.1", Start: at(500), End: at(1500)}}, unexpl: 1},
		{rule: "a lost claim's release with no fault is unexplained", why: lostClaim, unexpl: 1},
		{rule: "a reset on its link explains a lost claim's release", why: lostClaim,
			faults: []Fault{{Kind: "reset", Target: "replica-1", Owner: "replica-1.1", Start: at(50), End: at(150)}}},
		{rule: "a release at shutdown with no shutdown is unexplained", why: shutdown, unexpl: 1},
		{rule: "a SIGTERM of another incarnation explains no release at shutdown", why: shutdown,
			faults: []Fault{{Kind: "term", Target: "replica-1", Owner: "replica-1.0", Start: at(2000), End: at(2400)}}, unexpl: 1},
		{rule: "a SIGTERM after the release explains no release at shutdown", why: shutdown,
			faults: []Fault{{Kind: "term", Target: "replica-1", Owner: "replica-1.1", Start: at(2600), End: at(2900)}}, unexpl: 1},
		{rule: "a SIGTERM of its incarnation explains a release at shutdown", why: shutdown,
			faults: []Fault{{Kind: "term", Target: "replica-1", Owner: "replica-1.1", Start: at(2400), End: at(2900)}}},
		{rule: "the final stop explains no release at shutdown before it", why: shutdown, stopped: 2600, unexpl: 1},
		{rule: "the final stop explains a release at shutdown after it", why: shutdown, stopped: 2400},
		{rule: "the final stop explains only releases at shutdown", why: queued, stopped: 2400, unexpl: 1},
		{rule: "a slow renewal of its replica is counted apart", why: queued, slow: []SlowRenewal{{Owner: "replica-1.1", At: at(1200)}}, slowN: 1},
		{rule: "a stall of its replica is counted apart", why: queued, stalls: []Stall{{Owner: "replica-1.1", From: at(1000), To: at(2000)}}, stN: 1},
		{rule: "a stall of another replica explains no release", why: queued, stalls: []Stall{{Owner: "replica-2.1", From: at(1000), To: at(2000)}}, unexpl: 1},
		{rule: "a run-queue give-back is a release by design", why: givenBack},
	} {
		b := releaseHistory(c.why)
		b.h.Faults, b.h.SlowRenewals, b.h.Stalls = c.faults, c.slow, c.stalls
		if c.stopped > 0 {
			b.h.Stopped = at(c.stopped)
		}
		r := Check(b.h)
		got := r.Counts
		if got.UnexplainedReleases != c.unexpl || got.ReleasesAfterSlowRenewal != c.slowN || got.ReleasesAfterStall != c.stN {
			t.Errorf("unexplained releases %d, after slow renewal %d, after stall %d; want %d, %d, %d: %s (violations %+v)",
				got.UnexplainedReleases, got.ReleasesAfterSlowRenewal, got.ReleasesAfterStall, c.unexpl, c.slowN, c.stN, c.rule, r.Violations)
		}
		if r.Valid != (c.unexpl == 0) || len(r.Violations) > 1 {
			t.Errorf("valid %v, violations %+v; want only the releases judged: %s", r.Valid, r.Violations, c.rule)
		}
	}
}
