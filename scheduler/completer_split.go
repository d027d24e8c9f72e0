package scheduler

import (
	"context"

	"github.com/jobq/jobq"
)

// UnblockLimiter is the store's batch completion that refuses to unblock
// more than maxUnblock workflow children in one transaction
// (*store.Store.JobCompleteManyLimited): such a batch writes nothing and
// fails with a *jobq.UnblockTooWideError carrying each parent's width, and
// the completer writes it again split by those widths (splitByWidths), so
// the first children become runnable after the first commit instead of
// after one transaction that writes them all. The width is read by the
// batch's own transaction, which also decrements the children by that
// read: a batch of narrow parents costs no read more than its unblock
// needs.
type UnblockLimiter interface {
	JobCompleteManyLimited(ctx context.Context, cs []jobq.Completion, maxUnblock int) ([]bool, error)
}

// ChildCounter is the store's read of how many children workflow jobs have
// (*store.Store.JobChildCounts: the width of the unblock each one's success
// writes; jobs without children are absent from the map). A store that is
// no UnblockLimiter but counts children has its batches split by this read
// before they are written (splitByUnblock). A store with neither (a test
// double, a decorator) has its batches written whole, as before.
type ChildCounter interface {
	JobChildCounts(ctx context.Context, ids []uint64) (map[uint64]int, error)
}

// UnblockPerCommit is how many children the successes of one completion
// transaction unblock at most before the completer starts another (a
// parent wider than that is written alone: its own children are unblocked
// in its own transaction, all of them, as the guarantee says). At about
// 25,000 unblocked rows a second on the 2-core development machine, 500 is
// a commit every ~20 ms.
const UnblockPerCommit = 500

// splitByUnblock returns batch as groups to write one transaction after
// the other: the completions of jobs without children first (with the
// parents that fit beside them), then the parents, a new group whenever
// the next one would take the group past UnblockPerCommit children. Every
// completion of one job stays in one group. When nothing in batch has
// children, the store cannot count them or the count fails, it is one group:
// the split is an optimisation, never needed for correctness.
func splitByUnblock(ctx context.Context, st completerStore, batch []jobq.Completion) [][]jobq.Completion {
	cc, ok := st.(ChildCounter)
	if !ok || len(batch) < 2 {
		return [][]jobq.Completion{batch}
	}
	var parents []uint64
	for _, c := range batch {
		if c.HasChildren && c.Outcome == jobq.OutcomeSuccess && c.Spawn == nil {
			parents = append(parents, c.ID)
		}
	}
	if len(parents) < 2 {
		return [][]jobq.Completion{batch}
	}
	width, err := cc.JobChildCounts(ctx, parents)
	if err != nil {
		return [][]jobq.Completion{batch}
	}
	total := 0
	for _, id := range parents {
		total += width[id]
	}
	if total <= UnblockPerCommit {
		return [][]jobq.Completion{batch}
	}
	return splitByWidths(batch, width)
}

// splitByWidths returns batch as groups of at most UnblockPerCommit
// children by width (each parent's number of children; absent: none): the
// completions of jobs without children first, with the parents that fit
// beside them, then the parents, a new group whenever the next one would
// take the group past UnblockPerCommit; a wider parent is a group of its
// own. Every completion of one job stays in one group.
func splitByWidths(batch []jobq.Completion, width map[uint64]int) [][]jobq.Completion {
	// Completions by job, in batch order; a job's width counts once.
	order := make([]uint64, 0, len(batch))
	byJob := make(map[uint64][]jobq.Completion, len(batch))
	for _, c := range batch {
		if _, seen := byJob[c.ID]; !seen {
			order = append(order, c.ID)
		}
		byJob[c.ID] = append(byJob[c.ID], c)
	}
	var first []jobq.Completion
	var wide []uint64
	for _, id := range order {
		if width[id] == 0 {
			first = append(first, byJob[id]...)
		} else {
			wide = append(wide, id)
		}
	}
	groups := [][]jobq.Completion{}
	cur, n := first, 0
	for _, id := range wide {
		w := width[id]
		if len(cur) > 0 && n+w > UnblockPerCommit {
			groups = append(groups, cur)
			cur, n = nil, 0
		}
		cur = append(cur, byJob[id]...)
		n += w
	}
	if len(cur) > 0 {
		groups = append(groups, cur)
	}
	return groups
}
