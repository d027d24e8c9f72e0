package scheduler

import (
	"testing"

	"github.com/jobq/jobq"
)

func failure(id uint64) jobq.Completion {
	return jobq.Completion{Fence: jobq.Fence{ID: id, Attempt: 1}, Outcome: jobq.OutcomeFailed, Retry: true}
}

// TestSplitRowByRow: a batch of more than RowByRowPerCommit failures is
// written in transactions of at most that many, the plain successes in the
// first; a job's repeated completions stay together; a batch within the
// bound, and any number of plain successes, are written whole.
func TestSplitRowByRow(t *testing.T) {
	var batch []jobq.Completion
	for id := uint64(1); id <= 2*RowByRowPerCommit+7; id++ {
		batch = append(batch, failure(id))
		if id%10 == 0 {
			batch = append(batch, success(1000+id, false))
		}
	}
	// Job 3's second completion (a retried write) joins it.
	batch = append(batch, failure(3))
	gs := splitRowByRow(batch)
	if len(gs) != 3 {
		t.Fatalf("%d transactions, want 3: %v", len(gs), groupIDs(gs))
	}
	total, successes := 0, 0
	where := map[uint64]int{}
	for i, g := range gs {
		jobs := map[uint64]bool{}
		for _, c := range g {
			total++
			if prev, ok := where[c.ID]; ok && prev != i {
				t.Fatalf("job %d's completions in transactions %d and %d", c.ID, prev, i)
			}
			where[c.ID] = i
			if rowByRow(c) {
				jobs[c.ID] = true
			} else {
				successes++
				if i != 0 {
					t.Fatalf("plain success %d in transaction %d, want the first", c.ID, i)
				}
			}
		}
		if len(jobs) > RowByRowPerCommit {
			t.Fatalf("transaction %d writes %d jobs row by row, want ≤ %d", i, len(jobs), RowByRowPerCommit)
		}
	}
	if total != len(batch) || successes != 10 {
		t.Fatalf("split kept %d of %d completions (%d successes, want 10)", total, len(batch), successes)
	}
	small := batch[:RowByRowPerCommit]
	if gs := splitRowByRow(small); len(gs) != 1 || len(gs[0]) != len(small) {
		t.Fatalf("a batch within the bound split into %v", groupIDs(gs))
	}
	var plain []jobq.Completion
	for id := uint64(1); id <= 1000; id++ {
		plain = append(plain, success(id, false))
	}
	if gs := splitRowByRow(plain); len(gs) != 1 {
		t.Fatalf("1,000 plain successes split into %d transactions, want 1", len(gs))
	}
}
