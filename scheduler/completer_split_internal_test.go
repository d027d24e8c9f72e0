package scheduler

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq"
)

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

// TestSplitByWidths: wide parents are written in groups of at most
// UnblockPerCommit children (a wider one alone), after the jobs without
// children; a job's repeated completions stay in one group.
func TestSplitByWidths(t *testing.T) {
	batch := []jobq.Completion{
		success(1, true), success(2, false), success(3, true), success(4, true),
		success(5, false), success(6, true), success(3, true),
	}
	got := groupIDs(splitByWidths(batch, map[uint64]int{1: 1000, 3: 300, 4: 150, 6: 100}))
	want := [][]uint64{{2, 5}, {1}, {3, 3, 4}, {6}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("groups %v, want %v", got, want)
	}
}

// limitingStore applies the context's unblock limit over a map of widths:
// a batch of two or more parents wider than the limit between them is
// refused (nothing written), as the store refuses it; every write is
// recorded.
type limitingStore struct {
	m       map[uint64]int
	written [][]uint64
	refused int
}

func (s *limitingStore) JobCompleteMany(ctx context.Context, cs []jobq.Completion) ([]bool, error) {
	w := map[uint64]int{}
	total := 0
	for _, c := range cs {
		if n, ok := s.m[c.ID]; ok && c.HasChildren && c.Outcome == jobq.OutcomeSuccess {
			if _, seen := w[c.ID]; !seen {
				total += n
			}
			w[c.ID] = n
		}
	}
	if limit := jobq.UnblockLimit(ctx); limit > 0 && len(w) > 1 && total > limit {
		s.refused++
		return nil, &jobq.UnblockTooWideError{Widths: w, Limit: limit}
	}
	ids := make([]uint64, len(cs))
	applied := make([]bool, len(cs))
	for i, c := range cs {
		ids[i], applied[i] = c.ID, true
	}
	s.written = append(s.written, ids)
	return applied, nil
}

// TestFlushSplitsARefusedBatch: a narrow batch is written whole in one try
// (with the limit in its context); a batch the store refuses as too wide is
// written again in the groups of splitByWidths, each completion reported
// once, none reported for the refused try.
func TestFlushSplitsARefusedBatch(t *testing.T) {
	batch := []jobq.Completion{
		success(1, true), success(2, false), success(3, true), success(4, true),
		success(5, false), success(6, true), success(3, true),
	}
	for _, tc := range []struct {
		name    string
		widths  map[uint64]int
		refused int
		want    [][]uint64
	}{
		{"narrow", map[uint64]int{1: 200, 3: 200, 4: 100}, 0, [][]uint64{{1, 2, 3, 4, 5, 6, 3}}},
		{"wide", map[uint64]int{1: 1000, 3: 300, 4: 150, 6: 100}, 1, [][]uint64{{2, 5}, {1}, {3, 3, 4}, {6}}},
	} {
		st := &limitingStore{m: tc.widths}
		reported := map[uint64]int{}
		c := newCompleter(completerParams{
			Store: st, Batch: 10, Linger: -1, QueueSize: 10, Work: newWorkTracker(), Flushers: 1,
			FinishFunc: func(c jobq.Completion, applied bool, err error) {
				if err != nil || !applied {
					t.Errorf("%s: completion %d: applied %v, err %v", tc.name, c.ID, applied, err)
				}
				reported[c.ID]++
			},
			Writer: outcomeWriter{Runs: newRunTable(), Lease: time.Minute, Retry: testRetrier(), Log: discardLog()},
			Log:    discardLog(),
		})
		c.flush(batch)
		if st.refused != tc.refused || !slices.EqualFunc(st.written, tc.want, slices.Equal) {
			t.Errorf("%s: refused %d, written %v; want refused %d, written %v", tc.name, st.refused, st.written, tc.refused, tc.want)
		}
		if want := map[uint64]int{1: 1, 2: 1, 3: 2, 4: 1, 5: 1, 6: 1}; !maps.Equal(reported, want) {
			t.Errorf("%s: reported %v, want %v", tc.name, reported, want)
		}
	}
}
