package checker

import (
	"strings"
	"testing"
)

// wfBuilder is a diamond 1 → {2, 3} → 4 where every job ran once and in
// order: a VALID history the cases below break one way each.
func wfBuilder() *builder {
	b := newBuilder()
	b.ok(1, 0, "r1")   // done at 200
	b.ok(2, 300, "r1") // claimed 310, done 500
	b.ok(3, 300, "r2") // claimed 310, done 500
	b.ok(4, 600, "r1") // claimed 610
	b.h.Edges = []Edge{{1, 2, "cancel"}, {1, 3, "cancel"}, {2, 4, "cancel"}, {3, 4, "cancel"}}
	return b
}

func TestWorkflowChecksValidDiamond(t *testing.T) {
	r := Check(wfBuilder().h)
	if !r.Valid {
		t.Fatalf("a diamond run in order is INVALID: %+v", r.Violations)
	}
}

// Each workflow check fails on a hand-built history that breaks its promise.
func TestWorkflowChecksFailOnHandBuiltHistories(t *testing.T) {
	for _, tc := range []struct {
		check string
		want  string
		build func(b *builder)
	}{
		{CheckChildBeforeParentSuccess, "before its parent 3 succeeded", func(b *builder) {
			// Job 4 claimed at 450, before parent 3's success at 500 (an
			// unblock counted one parent twice).
			b.h.Executions[3].StartedAt = at(450)
		}},
		{CheckChildBeforeParentSuccess, "never succeeded", func(b *builder) {
			// Parent 3 still RUNNING at the end, its child ran.
			b.h.Jobs[2].Status, b.h.Jobs[2].FinishedAt = StatusRunning, nil
			b.h.Executions[2].Outcome, b.h.Executions[2].FinishedAt = "", nil
		}},
		{CheckChildRunTwice, "unblocked twice", func(b *builder) {
			b.h.Jobs[3].Attempt = 2
			b.exec(4, 2, "r2", 900, 1000, OutcomeSuccess)
		}},
		{CheckStuckWaitingOnDoneParents, "BLOCKED at the end", func(b *builder) {
			// Job 4 never unblocked although 2 and 3 succeeded (the unblock
			// was lost with a crash after the parent's commit).
			b.h.Jobs[3].Status, b.h.Jobs[3].Attempt, b.h.Jobs[3].FinishedAt = StatusBlocked, 0, nil
			b.h.Executions = b.h.Executions[:3]
			b.h.Effects = b.h.Effects[:6]
		}},
		{CheckRanAfterParentFailed, "ended FAILED", func(b *builder) {
			b.h.Jobs[1].Status = StatusFailed
			b.h.Executions[1].Outcome = OutcomeFailed
		}},
	} {
		t.Run(tc.check, func(t *testing.T) {
			b := wfBuilder()
			tc.build(b)
			wantViolationSaying(t, b.h, tc.check, tc.want)
		})
	}
}

// wantViolationSaying fails unless Check finds h INVALID with a check
// violation one of whose examples says want.
func wantViolationSaying(t *testing.T, h History, check, want string) {
	t.Helper()
	r := Check(h)
	v := violation(r, check)
	if r.Valid || v == nil {
		t.Fatalf("%s not reported: %+v", check, r.Violations)
	}
	if !strings.Contains(strings.Join(v.Examples, "\n"), want) {
		t.Fatalf("%s examples %q, want one saying %q", check, v.Examples, want)
	}
}
