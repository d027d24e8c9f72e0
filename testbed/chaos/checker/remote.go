package checker

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// ackOutcome maps a completion's outcome to the execution outcome it
// writes when applied.
var ackOutcome = map[string]string{"success": OutcomeSuccess, "failure": OutcomeFailed, "release": OutcomeReleased}

// isWorker reports whether owner is a remote worker's ("worker:<id>").
func isWorker(owner string) bool { return strings.HasPrefix(owner, "worker:") }

// remoteChecks runs the checks of remote work over h.Acks and the
// executions (sorted by attempt per job), counts the acknowledgement log's
// figures into c and returns each check's examples.
func remoteChecks(h History, jobs map[uint64]*Job, execs map[uint64][]Execution, c *Counts) (late, twice, overlap, lost []string) {
	type key struct {
		id      uint64
		attempt int
	}
	applied := map[key]map[string]bool{}         // outcomes applied per attempt
	successAttempts := map[uint64]map[int]bool{} // attempts whose success was applied
	cut := map[key]bool{}
	acks := slices.Clone(h.Acks)
	slices.SortStableFunc(acks, func(a, b Ack) int { return a.SentAt.Compare(b.SentAt) })
	for _, a := range acks {
		c.Completions++
		k := key{a.JobID, a.Attempt}
		if a.Duplicate {
			c.DuplicateCompletions++
		}
		if a.Status == 409 && a.Result == "stale" {
			c.LateCompletionsRefused++
		}
		if a.Result != AckApplied {
			continue
		}
		if !a.Delivered && !a.Duplicate {
			cut[k] = true
		} else if a.Delivered && cut[k] {
			c.AcksRetried++
			delete(cut, k)
		}
		if applied[k] == nil {
			applied[k] = map[string]bool{}
		}
		applied[k][a.Outcome] = true
		if a.Outcome == "success" {
			if successAttempts[a.JobID] == nil {
				successAttempts[a.JobID] = map[int]bool{}
			}
			successAttempts[a.JobID][a.Attempt] = true
		}
		var x *Execution
		ex := execs[a.JobID]
		for i := range ex {
			if ex[i].Attempt == a.Attempt {
				x = &ex[i]
			}
		}
		j := jobs[a.JobID]
		switch {
		case x != nil && (x.Outcome == OutcomeLeaseExpired || x.Outcome == OutcomeStale):
			late = append(late, fmt.Sprintf("job %d: %s of attempt %d by %s answered applied at %s, but the attempt's run ended %s at %s",
				a.JobID, a.Outcome, a.Attempt, a.Worker, a.SentAt.Format(time.RFC3339Nano), x.Outcome, fmtTime(x.FinishedAt)))
		case x == nil && len(ex) > 0 && ex[len(ex)-1].Attempt > a.Attempt:
			late = append(late, fmt.Sprintf("job %d: %s of attempt %d by %s answered applied, but the attempt has no run and attempt %d was claimed",
				a.JobID, a.Outcome, a.Attempt, a.Worker, ex[len(ex)-1].Attempt))
		}
		want := ackOutcome[a.Outcome]
		switch {
		case x == nil || (x.Outcome != want && !(want == OutcomeSuccess && x.Outcome == OutcomeCanceled)):
			got := "no execution row"
			if x != nil {
				got = "its run ended " + x.Outcome
			}
			lost = append(lost, fmt.Sprintf("job %d: %s of attempt %d by %s answered applied at %s, but %s",
				a.JobID, a.Outcome, a.Attempt, a.Worker, a.SentAt.Format(time.RFC3339Nano), got))
		case a.Outcome == "success" && j != nil && j.Status != StatusSuccess && j.Status != StatusCanceled:
			lost = append(lost, fmt.Sprintf("job %d: success of attempt %d by %s answered applied, but the job ended %s",
				a.JobID, a.Attempt, a.Worker, j.Status))
		}
	}
	for k, outs := range applied {
		if len(outs) > 1 {
			twice = append(twice, fmt.Sprintf("job %d: attempt %d answered applied for %d outcomes (%s)",
				k.id, k.attempt, len(outs), strings.Join(slices.Sorted(maps.Keys(outs)), ", ")))
		}
	}
	for id, at := range successAttempts {
		if len(at) > 1 {
			twice = append(twice, fmt.Sprintf("job %d: successes of %d attempts answered applied (%v)", id, len(at), slices.Sorted(maps.Keys(at))))
		}
	}
	slices.Sort(twice)
	for id, ex := range execs {
		for k := 0; k+1 < len(ex); k++ {
			a, b := ex[k], ex[k+1]
			if !isWorker(a.Owner) || !isWorker(b.Owner) || a.Owner == b.Owner {
				continue
			}
			if a.FinishedAt == nil || a.FinishedAt.After(b.StartedAt) {
				overlap = append(overlap, fmt.Sprintf("job %d: attempt %d (%s) held the lease until %s, attempt %d (%s) claimed at %s",
					id, a.Attempt, a.Owner, fmtTime(a.FinishedAt), b.Attempt, b.Owner, b.StartedAt.Format(time.RFC3339Nano)))
			}
		}
	}
	slices.Sort(overlap)
	c.LateCompletionsAccepted, c.CompletionsAppliedTwice, c.WorkerOverlaps, c.LostAfterAck = len(late), len(twice), len(overlap), len(lost)
	return late, twice, overlap, lost
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.Format(time.RFC3339Nano)
}

// workerLapses returns, for each remote worker run that was rescued
// (LEASE_EXPIRED) at or after the end of its lease — its claim's lease, or
// the latest lease_until its worker's renewals got — a Stall of that worker
// from its lease's end to the rescue: the worker did not renew in time.
// A run rescued before its renewed lease ended gets none (that rescue is
// jobq's, and stays unexplained); nor does a run whose work ended (its
// "end" effect) more than half a lease before its lease did: its worker
// was alive after the work, yet neither completed nor renewed it — a
// dropped outcome, which rerun_after_success must see.
func workerLapses(h History, c *Counts) []Stall {
	type key struct {
		id      uint64
		attempt int
	}
	ended := map[key]time.Time{}
	for _, e := range h.Effects {
		if e.Kind == EffectEnd {
			ended[key{e.JobID, e.Attempt}] = e.CreatedAt
		}
	}
	leased := map[key]time.Time{}
	for _, r := range h.Renewals {
		k := key{r.JobID, r.Attempt}
		if r.LeaseUntil.After(leased[k]) {
			leased[k] = r.LeaseUntil
		}
	}
	var out []Stall
	for _, e := range h.Executions {
		if e.Outcome != OutcomeLeaseExpired || e.FinishedAt == nil || !isWorker(e.Owner) {
			continue
		}
		end := e.StartedAt.Add(h.Lease)
		if u := leased[key{e.JobID, e.Attempt}]; u.After(end) {
			end = u
		}
		if e.FinishedAt.Before(end) {
			continue
		}
		if at, ok := ended[key{e.JobID, e.Attempt}]; ok && at.Add(h.Lease/2).Before(end) {
			continue
		}
		c.WorkerLapses++
		out = append(out, Stall{Owner: e.Owner, From: end, To: *e.FinishedAt})
	}
	return out
}
