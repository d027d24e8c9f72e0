package scheduler

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

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

// limitingStore is an UnblockLimiter over a map of widths: a limited batch
// of two or more parents wider than the limit between them is refused
// (nothing written), as the store refuses it; every write is recorded.
type limitingStore struct {
	m       map[uint64]int
	written [][]uint64
	refused int
}

func (s *limitingStore) JobCompleteMany(_ context.Context, cs []jobq.Completion) ([]bool, error) {
	ids := make([]uint64, len(cs))
	applied := make([]bool, len(cs))
	for i, c := range cs {
		ids[i], applied[i] = c.ID, true
	}
	s.written = append(s.written, ids)
	return applied, nil
}

func (s *limitingStore) JobCompleteManyLimited(ctx context.Context, cs []jobq.Completion, maxUnblock int) ([]bool, error) {
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
	if len(w) > 1 && total > maxUnblock {
		s.refused++
		return nil, &jobq.UnblockTooWideError{Widths: w, Limit: maxUnblock}
	}
	return s.JobCompleteMany(ctx, cs)
}

// TestFlushSplitsARefusedBatch: with an UnblockLimiter store a narrow batch
// is written whole in one try; a batch the store refuses as too wide is
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
