package checker

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// Workflow checks (docs/workflows.md): a history with Edges is checked for
// the promises of dependencies. Each is a violation of its own.
const (
	// CheckChildBeforeParentSuccess: an attempt of a child started before
	// one of its parents had succeeded — before the parent's SUCCESS
	// execution finished, or with no such execution at all ('cancel'
	// edges); before the parent ended at all ('run' edges).
	CheckChildBeforeParentSuccess = "child_before_parent_success"
	// CheckChildRunTwice: a child was made runnable again after one of its
	// attempts succeeded (two SUCCESS executions, or an attempt claimed
	// after a SUCCESS one): an unblock applied twice.
	CheckChildRunTwice = "child_run_twice"
	// CheckStuckWaitingOnDoneParents: a job still BLOCKED at the end
	// although every parent ended in a way that lets it run (SUCCESS, or
	// any end on a 'run' edge).
	CheckStuckWaitingOnDoneParents = "stuck_waiting_on_done_parents"
	// CheckRanAfterParentFailed: a child with a 'cancel' edge to a parent
	// that ended FAILED or CANCELED without ever succeeding ran anyway.
	CheckRanAfterParentFailed = "ran_after_parent_failed"
)

// StatusBlocked is a workflow job waiting for its parents.
const StatusBlocked = "BLOCKED"

// Edge is one dependency: Child waits for Parent; OnParentFailure is
// "cancel" or "run".
type Edge struct {
	Parent          uint64 `json:"parent"`
	Child           uint64 `json:"child"`
	OnParentFailure string `json:"on_parent_failure"`
}

// checkWorkflows runs the workflow checks over h's edges and returns their
// violations (none when h has no edges).
func checkWorkflows(h History, jobs map[uint64]*Job, execs map[uint64][]Execution) []Violation {
	if len(h.Edges) == 0 {
		return nil
	}
	parents := map[uint64][]Edge{}
	for _, e := range h.Edges {
		parents[e.Child] = append(parents[e.Child], e)
	}
	// success[p] is when p's SUCCESS execution finished (the first one).
	success := map[uint64]time.Time{}
	for id, ex := range execs {
		for _, e := range ex {
			if e.Outcome == OutcomeSuccess && e.FinishedAt != nil {
				success[id] = *e.FinishedAt
				break
			}
		}
	}
	var before, twice, stuck, ranAfter []string
	for _, child := range slices.Sorted(maps.Keys(parents)) {
		j := jobs[child]
		ex := execs[child]
		for _, e := range ex {
			for _, p := range parents[child] {
				pj := jobs[p.Parent]
				switch {
				case p.OnParentFailure == "run":
					if pj == nil || pj.FinishedAt == nil || !pj.Terminal() {
						before = append(before, fmt.Sprintf("job %d: attempt %d claimed at %s while its parent %d had not ended ('run' edge)",
							child, e.Attempt, e.StartedAt.Format(time.RFC3339Nano), p.Parent))
					} else if end, ok := success[p.Parent]; ok && e.StartedAt.Before(end) {
						before = append(before, fmt.Sprintf("job %d: attempt %d claimed %s before its parent %d succeeded",
							child, e.Attempt, end.Sub(e.StartedAt), p.Parent))
					}
				default:
					end, ok := success[p.Parent]
					switch {
					case !ok && pj != nil && (pj.Status == StatusFailed || pj.Status == StatusCanceled):
						ranAfter = append(ranAfter, fmt.Sprintf("job %d: attempt %d ran although its parent %d ended %s ('cancel' edge)",
							child, e.Attempt, p.Parent, pj.Status))
					case !ok:
						before = append(before, fmt.Sprintf("job %d: attempt %d claimed at %s but its parent %d never succeeded",
							child, e.Attempt, e.StartedAt.Format(time.RFC3339Nano), p.Parent))
					case e.StartedAt.Before(end):
						before = append(before, fmt.Sprintf("job %d: attempt %d claimed %s before its parent %d succeeded",
							child, e.Attempt, end.Sub(e.StartedAt), p.Parent))
					}
				}
			}
		}
		for k, e := range ex {
			if e.Outcome == OutcomeSuccess && k+1 < len(ex) {
				twice = append(twice, fmt.Sprintf("job %d: attempt %d succeeded, attempt %d was claimed after it (unblocked twice)",
					child, e.Attempt, ex[k+1].Attempt))
				break
			}
		}
		if j != nil && j.Status == StatusBlocked {
			done := true
			for _, p := range parents[child] {
				pj := jobs[p.Parent]
				if pj == nil || !(pj.Status == StatusSuccess || (p.OnParentFailure == "run" && pj.Terminal())) {
					done = false
				}
			}
			if done {
				stuck = append(stuck, fmt.Sprintf("job %d: BLOCKED at the end although its %d parents are done", child, len(parents[child])))
			}
		}
	}
	var out []Violation
	for _, v := range []struct {
		check string
		ex    []string
	}{
		{CheckChildBeforeParentSuccess, before}, {CheckChildRunTwice, twice},
		{CheckStuckWaitingOnDoneParents, stuck}, {CheckRanAfterParentFailed, ranAfter},
	} {
		if len(v.ex) > 0 {
			out = append(out, Violation{Check: v.check, Count: len(v.ex), Examples: v.ex[:min(len(v.ex), maxExamples)]})
		}
	}
	return out
}
