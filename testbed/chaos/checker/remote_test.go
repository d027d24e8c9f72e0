package checker

import (
	"testing"
)

const (
	wA = "worker:go-1.1"
	wB = "worker:python-3.1"
)

// remoteOK adds a remote job that worker w ran once and completed (its
// success answered applied): created at c, claimed at c+10, done at c+200.
func (b *builder) remoteOK(id uint64, c int, w string) {
	b.job(id, c, StatusSuccess, 1, c+200)
	b.h.Jobs[len(b.h.Jobs)-1].Type = "remote-effect"
	b.exec(id, 1, w, c+10, c+200, OutcomeSuccess)
	b.effect(id, 1, EffectNonTx, w, c+20)
	b.effect(id, 1, EffectEnd, w, c+190)
	b.ack(id, 1, w, "success", c+195, 200, AckApplied, true)
}

func (b *builder) ack(id uint64, attempt int, w, outcome string, ms, status int, result string, delivered bool) {
	b.h.Acks = append(b.h.Acks, Ack{Worker: w, Replica: "replica-1", JobID: id, Attempt: attempt, Outcome: outcome,
		SentAt: at(ms), Status: status, Result: result, Delivered: delivered})
}

// pausedWorker adds job id: worker A's attempt 1 paused past its lease
// (rescued at 2600 under a worker-pause fault on A), worker B's attempt 2
// succeeded at 3200; A's late success is sent at 6000 with the given
// answer.
func (b *builder) pausedWorker(id uint64, lateStatus int, lateResult string) {
	b.job(id, 0, StatusSuccess, 2, 3200)
	b.exec(id, 1, wA, 10, 2600, OutcomeLeaseExpired)
	b.exec(id, 2, wB, 2700, 3200, OutcomeSuccess)
	b.effect(id, 1, EffectNonTx, wA, 20)
	b.effect(id, 2, EffectNonTx, wB, 2710)
	b.effect(id, 2, EffectEnd, wB, 3190)
	b.effect(id, 1, EffectEnd, wA, 5990)
	b.ack(id, 2, wB, "success", 3195, 200, AckApplied, true)
	b.ack(id, 1, wA, "success", 6000, lateStatus, lateResult, true)
	b.h.Faults = append(b.h.Faults, Fault{Kind: "worker-pause", Target: "go-1", Owner: wA, Start: at(100), End: at(5980)})
}

func TestRemoteHistoryValid(t *testing.T) {
	b := newBuilder()
	b.remoteOK(1, 0, wA)
	b.remoteOK(2, 50, wB)
	b.pausedWorker(3, 409, "stale")
	// Job 4: the answer to its success was cut (ack-loss), the retry was
	// answered applied again; a duplicate-complete copy of job 5's success.
	b.remoteOK(4, 100, wA)
	b.h.Acks[len(b.h.Acks)-1].Delivered = false
	b.ack(4, 1, wA, "success", 400, 200, AckApplied, true)
	b.remoteOK(5, 120, wB)
	b.h.Acks[len(b.h.Acks)-1].Duplicate, b.h.Acks[len(b.h.Acks)-1].Delivered = true, false
	b.ack(5, 1, wB, "success", 316, 200, AckApplied, true)
	r := Check(b.h)
	if !r.Valid {
		t.Fatalf("valid = false: %+v", r.Violations)
	}
	c := r.Counts
	if c.LateCompletionsRefused != 1 || c.AcksRetried != 1 || c.DuplicateCompletions != 1 || c.Completions != 8 {
		t.Fatalf("late refused %d, acks retried %d, duplicates %d, completions %d; want 1, 1, 1, 8",
			c.LateCompletionsRefused, c.AcksRetried, c.DuplicateCompletions, c.Completions)
	}
}

// TestLateCompletionAccepted: the paused worker's late success answered
// applied (what a completion unfenced by the token's attempt does) is
// late, applied twice (two attempts' successes) and lost after its ack
// (its attempt's run ended LEASE_EXPIRED).
func TestLateCompletionAccepted(t *testing.T) {
	b := newBuilder()
	b.remoteOK(1, 0, wA)
	b.pausedWorker(2, 200, AckApplied)
	r := Check(b.h)
	for _, check := range []string{CheckLateCompletionAccepted, CheckAppliedTwice, CheckLostAfterAck} {
		if v := violation(r, check); v == nil || v.Count != 1 {
			t.Fatalf("%s: %+v, want count 1; violations %+v", check, v, r.Violations)
		}
	}
	if len(r.Violations) != 3 {
		t.Fatalf("violations = %+v, want exactly the three", r.Violations)
	}
}

// TestCompletionAppliedTwice: one attempt answered applied for a success
// and then for a failure.
func TestCompletionAppliedTwice(t *testing.T) {
	b := newBuilder()
	b.remoteOK(1, 0, wA)
	b.ack(1, 1, wA, "failure", 400, 200, AckApplied, true)
	r := Check(b.h)
	v := violation(r, CheckAppliedTwice)
	if v == nil || v.Count != 1 {
		t.Fatalf("applied twice: %+v; violations %+v", v, r.Violations)
	}
	// The failure's applied answer contradicts the run's SUCCESS too.
	if v := violation(r, CheckLostAfterAck); v == nil || v.Count != 1 {
		t.Fatalf("lost after ack: %+v", v)
	}
}

// TestWorkerOverlap: worker B claimed attempt 2 while worker A's attempt 1
// still held the lease (closed 300 ms later).
func TestWorkerOverlap(t *testing.T) {
	b := newBuilder()
	b.job(1, 0, StatusSuccess, 2, 3200)
	b.exec(1, 1, wA, 10, 3000, OutcomeLeaseExpired)
	b.exec(1, 2, wB, 2700, 3200, OutcomeSuccess)
	b.ack(1, 2, wB, "success", 3195, 200, AckApplied, true)
	b.h.Faults = append(b.h.Faults, Fault{Kind: "worker-kill", Target: "go-1", Owner: wA, Start: at(100), End: at(2100)})
	r := Check(b.h)
	if v := violation(r, CheckWorkerOverlap); v == nil || v.Count != 1 {
		t.Fatalf("worker overlap: %+v; violations %+v", v, r.Violations)
	}
}

// TestLostAfterAck: a success answered applied whose job ended FAILED
// (its run recorded SUCCESS, then something wrote the job over).
func TestLostAfterAck(t *testing.T) {
	b := newBuilder()
	b.remoteOK(1, 0, wA)
	b.remoteOK(2, 10, wB)
	b.h.Jobs[1].Status = StatusWaiting
	b.h.Jobs[1].FinishedAt = nil
	r := Check(b.h)
	v := violation(r, CheckLostAfterAck)
	if v == nil || v.Count != 1 {
		t.Fatalf("lost after ack: %+v; violations %+v", v, r.Violations)
	}
	// And an applied success with no execution row at all.
	b = newBuilder()
	b.remoteOK(1, 0, wA)
	b.h.Executions = nil
	r = Check(b.h)
	if v := violation(r, CheckLostAfterAck); v == nil || v.Count != 1 {
		t.Fatalf("lost after ack (no row): %+v; violations %+v", v, r.Violations)
	}
}

// TestWorkerLapse: a worker run rescued after the lease its last renewal
// got had run out (its worker did not renew in time, no fault) is a worker
// lapse, not a violation; the re-run it caused is excused too. A worker
// run rescued before its renewed lease ended stays an unexplained rescue.
func TestWorkerLapse(t *testing.T) {
	build := func(leaseUntilMs int) *Result {
		b := newBuilder()
		b.job(1, 0, StatusSuccess, 2, 5200)
		b.exec(1, 1, wA, 10, 3100, OutcomeLeaseExpired) // lease 2 s: renewed once, until leaseUntilMs
		b.exec(1, 2, wB, 3200, 5200, OutcomeSuccess)
		b.effect(1, 1, EffectNonTx, wA, 20)
		b.effect(1, 1, EffectEnd, wA, 3050) // its work ended, but its lease had lapsed
		b.effect(1, 2, EffectNonTx, wB, 3210)
		b.effect(1, 2, EffectEnd, wB, 5190)
		b.ack(1, 2, wB, "success", 5195, 200, AckApplied, true)
		b.h.Renewals = []Renewal{{Worker: wA, JobID: 1, Attempt: 1, LeaseUntil: at(leaseUntilMs)}}
		return Check(b.h)
	}
	r := build(2700)
	if !r.Valid || r.Counts.WorkerLapses != 1 || r.Counts.RescuesAfterStall != 1 {
		t.Fatalf("lapsed lease: valid %v, lapses %d, rescues after stall %d: %+v", r.Valid, r.Counts.WorkerLapses, r.Counts.RescuesAfterStall, r.Violations)
	}
	r = build(3500) // renewed until after the rescue at 3100
	if v := violation(r, CheckUnexplainedRescue); v == nil || r.Counts.WorkerLapses != 0 {
		t.Fatalf("rescue inside a renewed lease: %+v, lapses %d", r.Violations, r.Counts.WorkerLapses)
	}
}

// TestWorkerDroppedOutcomeIsNoLapse: a worker that finished its work 1.5 s
// before its lease ran out and neither completed nor renewed it dropped
// its outcome: no lapse, so the rescue and the re-run are violations.
func TestWorkerDroppedOutcomeIsNoLapse(t *testing.T) {
	b := newBuilder()
	b.job(1, 0, StatusSuccess, 2, 5200)
	b.exec(1, 1, wA, 10, 2600, OutcomeLeaseExpired) // claim lease until 2010
	b.exec(1, 2, wB, 3200, 5200, OutcomeSuccess)
	b.effect(1, 1, EffectNonTx, wA, 20)
	b.effect(1, 1, EffectEnd, wA, 500)
	b.effect(1, 2, EffectNonTx, wB, 3210)
	b.effect(1, 2, EffectEnd, wB, 5190)
	b.ack(1, 2, wB, "success", 5195, 200, AckApplied, true)
	r := Check(b.h)
	if r.Counts.WorkerLapses != 0 || violation(r, CheckUnexplainedRescue) == nil || violation(r, CheckRerunAfterSuccess) == nil {
		t.Fatalf("lapses %d, violations %+v", r.Counts.WorkerLapses, r.Violations)
	}
}
