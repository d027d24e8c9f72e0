package scheduler

import "github.com/jobq/jobq"

// RowByRowPerCommit is how many jobs whose completions the store writes row
// by row (failures, retries, cancellations, successes with an output or a
// fan-out, keyed releases: every completion but a plain success or an
// unkeyed release, which are written with one statement per group) one
// completion transaction holds at most. Each costs the store about four
// round trips under the job's row lock, so a batch of 500 failures written
// whole is one transaction of some 2,000 statements: on a loaded machine it
// outlasts the try's context (the lease's guard plus two leases) and every
// try fails the same way, until the leases expire and the jobs are rescued
// with a retry spent. In transactions of 50 the first commit comes after
// about 200 statements and the heartbeat renews the rest meanwhile.
const RowByRowPerCommit = 50

// rowByRow reports whether the store writes c row by row (see
// RowByRowPerCommit; store.JobCompleteMany decides the same way).
func rowByRow(c jobq.Completion) bool {
	switch c.Outcome {
	case jobq.OutcomeSuccess:
		return c.Output != nil || c.Spawn != nil
	case jobq.OutcomeReleased:
		return c.ConcurrencyKey != ""
	}
	return true
}

// splitRowByRow returns group as transactions of at most RowByRowPerCommit
// jobs written row by row each: the first holds every batched completion
// (plain successes, unkeyed releases) with the first row-by-row jobs, the
// rest only row-by-row jobs. Every completion of one job stays in one
// transaction. A group within the bound is returned whole.
func splitRowByRow(group []jobq.Completion) [][]jobq.Completion {
	n := 0
	for _, c := range group {
		if rowByRow(c) {
			n++
		}
	}
	if n <= RowByRowPerCommit {
		return [][]jobq.Completion{group}
	}
	order := make([]uint64, 0, len(group))
	byJob := make(map[uint64][]jobq.Completion, len(group))
	slow := map[uint64]bool{}
	for _, c := range group {
		if _, seen := byJob[c.ID]; !seen {
			order = append(order, c.ID)
		}
		byJob[c.ID] = append(byJob[c.ID], c)
		if rowByRow(c) {
			slow[c.ID] = true
		}
	}
	var first []jobq.Completion
	var rest []uint64
	for _, id := range order {
		if !slow[id] {
			first = append(first, byJob[id]...)
		} else {
			rest = append(rest, id)
		}
	}
	groups := [][]jobq.Completion{}
	cur, jobs := first, 0
	for _, id := range rest {
		if jobs == RowByRowPerCommit {
			groups = append(groups, cur)
			cur, jobs = nil, 0
		}
		cur = append(cur, byJob[id]...)
		jobs++
	}
	if len(cur) > 0 {
		groups = append(groups, cur)
	}
	return groups
}
