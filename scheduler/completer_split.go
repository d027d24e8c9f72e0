package scheduler

import "github.com/jobq/jobq"

// UnblockPerCommit is how many children the successes of one completion
// transaction unblock at most before the completer starts another (a
// parent wider than that is written alone: its own children are unblocked
// in its own transaction, all of them, as the guarantee says). At about
// 25,000 unblocked rows a second on the 2-core development machine, 500 is
// a commit every ~20 ms.
const UnblockPerCommit = 500

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
