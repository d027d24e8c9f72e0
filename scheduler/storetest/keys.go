package storetest

import (
	"context"
	"testing"

	"github.com/jobq/jobq"
)

// Canceler is the cancel a Backend's Jobs may offer (the service's cancel
// of a job): the concurrency-key cases that cancel run only when it does.
type Canceler interface {
	JobCancel(ctx context.Context, id uint64) (jobq.Job, error)
}

// keyCases are the concurrency-key rules: at most the key's limit of its
// jobs are admitted (WAITING, SCHEDULED, RUNNING) at once, the rest wait
// PARKED where no claim reaches them; the write that ends an admitted job —
// a batched or single completion, a rescue with no retry left, a cancel —
// admits the key's next parked job (priority DESC, run_at, id) in its
// transaction; a retry keeps its slot; other keys are not held up.
var keyCases = []struct {
	name string
	run  func(t *testing.T, s *suite)
}{
	{"KeyAdmitsUpToLimitAndNextInPriorityOrder", func(t *testing.T, s *suite) {
		a := s.submitKeyed("k-a", "dev", 1, 0, 3)
		b := s.submitKeyed("k-b", "dev", 1, 0, 3)
		c := s.submitKeyed("k-c", "dev", 1, 5, 3) // higher priority: next, before b
		other := s.submitKeyed("k-other", "dev-2", 1, 0, 3)
		s.wantStatus(a.ID, jobq.StateWaiting)
		s.wantStatus(b.ID, jobq.StateParked)
		s.wantStatus(c.ID, jobq.StateParked)
		s.wantStatus(other.ID, jobq.StateWaiting)
		got := s.claimSkipLocked("a", 10)
		if len(got) != 2 {
			t.Fatalf("claim took %d jobs, want 2: one per key", len(got))
		}
		if more := s.claimSkipLocked("b", 10); len(more) != 0 {
			t.Fatalf("a second claim took %d jobs, want none: the parked jobs are not claimable", len(more))
		}
		var run jobq.ClaimedJob
		for _, g := range got {
			if g.ID == a.ID {
				run = g
			}
		}
		if run.ConcurrencyKey != "dev" {
			t.Fatalf("claimed job %d carries key %q, want dev", run.ID, run.ConcurrencyKey)
		}
		s.completeMany([]jobq.Completion{{Fence: run.Fence(), Outcome: jobq.OutcomeSuccess, ConcurrencyKey: run.ConcurrencyKey}}, true)
		s.wantStatus(c.ID, jobq.StateWaiting)
		s.wantStatus(b.ID, jobq.StateParked)
		next := s.claimOne("a", lease)
		if next.ID != c.ID {
			t.Fatalf("after a's success job %d ran, want c (%d): priority first", next.ID, c.ID)
		}
		// A failure that retries keeps the slot: b stays parked.
		s.completeMany([]jobq.Completion{{Fence: next.Fence(), Outcome: jobq.OutcomeFailed, Retry: true, ConcurrencyKey: "dev"}}, true)
		s.wantStatus(b.ID, jobq.StateParked)
		again := s.claimOne("a", lease)
		if again.ID != c.ID {
			t.Fatalf("claimed job %d after c's retry, want c again", again.ID)
		}
		// The last failure ends it FAILED: b is admitted.
		s.completeMany([]jobq.Completion{{Fence: again.Fence(), Outcome: jobq.OutcomeFailed, ConcurrencyKey: "dev"}}, true)
		s.wantStatus(c.ID, jobq.StateFailed)
		s.wantStatus(b.ID, jobq.StateWaiting)
	}},
	{"KeyRescueFreesTheSlotOnlyWhenTheJobEnds", func(t *testing.T, s *suite) {
		a := s.submitKeyed("r-a", "host", 1, 0, 1)
		b := s.submitKeyed("r-b", "host", 1, 0, 1)
		c1 := s.claimOne("x", lease)
		s.expire(c1.ID)
		s.rescue(c1.Fence()) // a retry left: back to WAITING, still admitted
		s.wantStatus(a.ID, jobq.StateWaiting)
		s.wantStatus(b.ID, jobq.StateParked)
		c2 := s.claimOne("y", lease)
		if c2.ID != a.ID {
			t.Fatalf("claimed %d after the rescue, want a (%d)", c2.ID, a.ID)
		}
		s.expire(c2.ID)
		s.rescue(c2.Fence()) // no retry left: FAILED, the slot is b's
		s.wantStatus(a.ID, jobq.StateFailed)
		s.wantStatus(b.ID, jobq.StateWaiting)
	}},
	{"KeyLimitAboveOneAndBatchOfKeys", func(t *testing.T, s *suite) {
		var ids []uint64
		for i := range 5 {
			ids = append(ids, s.submitKeyed("n-"+string(rune('a'+i)), "pool", 2, 0, 0).ID)
		}
		s.wantStatus(ids[0], jobq.StateWaiting)
		s.wantStatus(ids[1], jobq.StateWaiting)
		s.wantStatus(ids[2], jobq.StateParked)
		got := s.claimSkipLocked("a", 10)
		if len(got) != 2 {
			t.Fatalf("claim took %d jobs, want the key's limit 2", len(got))
		}
		var cs []jobq.Completion
		for _, g := range got {
			cs = append(cs, jobq.Completion{Fence: g.Fence(), Outcome: jobq.OutcomeSuccess, ConcurrencyKey: g.ConcurrencyKey})
		}
		s.completeMany(cs, true) // one batch frees two slots of one key
		s.wantStatus(ids[2], jobq.StateWaiting)
		s.wantStatus(ids[3], jobq.StateWaiting)
		s.wantStatus(ids[4], jobq.StateParked)
	}},
	{"KeyHintWrongCostsASplitNotASlot", func(t *testing.T, s *suite) {
		a := s.submitKeyed("h-a", "hinted", 1, 0, 0)
		b := s.submitKeyed("h-b", "hinted", 1, 0, 0)
		c := s.claimOne("a", lease)
		// The completion does not say the job is keyed: the batch's fence
		// refuses it, and the split reads the key.
		s.completeMany([]jobq.Completion{{Fence: c.Fence(), Outcome: jobq.OutcomeSuccess}}, true)
		s.wantStatus(a.ID, jobq.StateSuccess)
		s.wantStatus(b.ID, jobq.StateWaiting)
	}},
	{"KeyCancelOfRunningParkedAndWaiting", func(t *testing.T, s *suite) {
		cn, ok := s.Jobs.(Canceler)
		if !ok {
			t.Skip("the backend's Jobs has no JobCancel")
		}
		a := s.submitKeyed("x-a", "cancel", 1, 0, 0)
		b := s.submitKeyed("x-b", "cancel", 1, 0, 0)
		c := s.submitKeyed("x-c", "cancel", 1, 0, 0)
		d := s.submitKeyed("x-d", "cancel", 1, 0, 0)
		if _, err := cn.JobCancel(s.ctx(), b.ID); err != nil { // parked: frees nothing
			t.Fatalf("cancel parked: %v", err)
		}
		s.wantStatus(b.ID, jobq.StateCanceled)
		s.wantStatus(c.ID, jobq.StateParked)
		if _, err := cn.JobCancel(s.ctx(), a.ID); err != nil { // admitted, waiting: c is next
			t.Fatalf("cancel waiting: %v", err)
		}
		s.wantStatus(c.ID, jobq.StateWaiting)
		s.wantStatus(d.ID, jobq.StateParked)
		run := s.claimOne("a", lease)
		if _, err := cn.JobCancel(s.ctx(), run.ID); err != nil { // running: its end frees the slot
			t.Fatalf("cancel running: %v", err)
		}
		s.wantStatus(d.ID, jobq.StateParked)
		s.completeMany([]jobq.Completion{{Fence: run.Fence(), Outcome: jobq.OutcomeSuccess, ConcurrencyKey: "cancel"}}, true)
		s.wantStatus(c.ID, jobq.StateCanceled)
		s.wantStatus(d.ID, jobq.StateWaiting)
	}},
}

func init() { cases = append(cases, keyCases...) }

func (s *suite) submitKeyed(jobKey, ckey string, limit, priority, maxRetry int) jobq.Job {
	s.t.Helper()
	j, created, err := s.Jobs.JobSubmit(s.ctx(), jobq.SubmitParams{
		JobKey: jobKey, JobType: "contract", Params: "{}", RequestHash: jobKey, MaxRetry: maxRetry, Priority: priority,
		ConcurrencyKey: ckey, ConcurrencyLimit: limit,
	})
	if err != nil || !created {
		s.t.Fatalf("submit %s: created=%v err=%v", jobKey, created, err)
	}
	if j.ConcurrencyKey != ckey {
		s.t.Fatalf("submit %s: stored key %q, want %q", jobKey, j.ConcurrencyKey, ckey)
	}
	return j
}

func (s *suite) wantStatus(id uint64, want jobq.JobState) {
	s.t.Helper()
	if j := s.get(id); j.Status != want {
		s.t.Fatalf("job %d (%s) is %s, want %s", id, j.JobKey, j.Status, want)
	}
}
