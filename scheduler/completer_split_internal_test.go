package scheduler

import (
	"context"
	"errors"
	"testing"

	"github.com/jobq/jobq"
)

// widths is a ChildCounter answering from a map (the store's answer is
// tested in store: TestJobChildCounts).
type widths struct {
	m   map[uint64]int
	err error
}

func (w widths) JobCompleteMany(context.Context, []jobq.Completion) ([]bool, error) { return nil, nil }
func (w widths) JobChildCounts(_ context.Context, ids []uint64) (map[uint64]int, error) {
	out := map[uint64]int{}
	for _, id := range ids {
		if n, ok := w.m[id]; ok {
			out[id] = n
		}
	}
	return out, w.err
}

type plainStore struct{}

func (plainStore) JobCompleteMany(context.Context, []jobq.Completion) ([]bool, error) {
	return nil, nil
}

func success(id uint64, children bool) jobq.Completion {
	return jobq.Completion{Fence: jobq.Fence{ID: id, Attempt: 1}, Outcome: jobq.OutcomeSuccess, HasChildren: children}
}

func groupIDs(gs [][]jobq.Completion) [][]uint64 {
	out := make([][]uint64, len(gs))
	for i, g := range gs {
		for _, c := range g {
			out[i] = append(out[i], c.ID)
		}
	}
	return out
}

// TestSplitByUnblock: wide parents are written in groups of at most
// UnblockPerCommit children (a wider one alone), after the jobs without
// children; a batch that unblocks few, a store that cannot count and a
// failed count are written whole; a job's repeated completions stay in
// one group.
func TestSplitByUnblock(t *testing.T) {
	ctx := context.Background()
	batch := []jobq.Completion{
		success(1, true), success(2, false), success(3, true), success(4, true),
		success(5, false), success(6, true), success(3, true),
	}
	st := widths{m: map[uint64]int{1: 1000, 3: 300, 4: 150, 6: 100}}
	got := groupIDs(splitByUnblock(ctx, st, batch))
	want := [][]uint64{{2, 5}, {1}, {3, 3, 4}, {6}}
	if len(got) != len(want) {
		t.Fatalf("groups %v, want %v", got, want)
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("groups %v, want %v", got, want)
		}
		for k := range want[i] {
			if got[i][k] != want[i][k] {
				t.Fatalf("groups %v, want %v", got, want)
			}
		}
	}
	narrow := widths{m: map[uint64]int{1: 200, 3: 200, 4: 100, 6: 0}}
	for name, st := range map[string]completerStore{
		"narrow": narrow, "no counter": plainStore{},
		"count failed": widths{m: st.m, err: errors.New("database unavailable")},
	} {
		if gs := splitByUnblock(ctx, st, batch); len(gs) != 1 || len(gs[0]) != len(batch) {
			t.Errorf("%s: groups %v, want the batch whole", name, groupIDs(gs))
		}
	}
}
