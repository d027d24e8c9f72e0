package scheduler

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
)

// blockingCompleteStore is a completerStore whose writes report that they
// began (entered) and then wait until release is closed; every completion
// applies.
type blockingCompleteStore struct {
	entered chan []jobq.Completion
	release chan struct{}
}

func (s *blockingCompleteStore) JobCompleteMany(ctx context.Context, cs []jobq.Completion) ([]bool, error) {
	s.entered <- slices.Clone(cs)
	select {
	case <-s.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	applied := make([]bool, len(cs))
	for i := range applied {
		applied[i] = true
	}
	return applied, nil
}

// TestCompleterFlushesConcurrently: with two flushers, a second batch is
// written while the first is still being written; while both are busy the
// next batch fills up to Batch; Stop returns only after every batch in
// flight finished, each completion finished exactly once.
func TestCompleterFlushesConcurrently(t *testing.T) {
	t.Parallel()
	st := &blockingCompleteStore{entered: make(chan []jobq.Completion, 8), release: make(chan struct{})}
	var mu sync.Mutex
	finished := map[jobq.Fence]int{}
	c := newCompleter(completerParams{
		Store: st, Batch: 2, Linger: -1, QueueSize: 8, Work: newWorkTracker(), Flushers: 2,
		FinishFunc: func(c jobq.Completion, applied bool, err error) {
			if err != nil || !applied {
				t.Errorf("completion %+v: applied %v, err %v", c.Fence, applied, err)
			}
			mu.Lock()
			finished[c.Fence]++
			mu.Unlock()
		},
		Writer: outcomeWriter{Runs: newRunTable(), Lease: time.Minute, Retry: testRetrier(), Log: discardLog()},
		Log:    discardLog(),
	})
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	comp := func(id uint64) jobq.Completion {
		return jobq.Completion{Fence: jobq.Fence{ID: id, Attempt: 1}, Outcome: jobq.OutcomeSuccess}
	}
	entered := func() []jobq.Completion {
		t.Helper()
		select {
		case b := <-st.entered:
			return b
		case <-time.After(signalTimeout):
			t.Fatal("no batch write began")
			return nil
		}
	}
	c.submit(comp(1))
	if b := entered(); len(b) != 1 || b[0].ID != 1 {
		t.Fatalf("first batch %+v, want job 1", b)
	}
	// The first write is still blocked: a second one begins beside it.
	c.submit(comp(2))
	if b := entered(); len(b) != 1 || b[0].ID != 2 {
		t.Fatalf("second batch %+v, want job 2", b)
	}
	// Both flushers busy: jobs 3 and 4 wait together in the next batch.
	c.submit(comp(3))
	c.submit(comp(4))
	stopped := make(chan struct{})
	go func() { c.Stop(); close(stopped) }()
	close(st.release)
	if b := entered(); len(b) != 2 || b[0].ID != 3 || b[1].ID != 4 {
		t.Fatalf("third batch %+v, want jobs 3 and 4", b)
	}
	select {
	case <-stopped:
	case <-time.After(signalTimeout):
		t.Fatal("Stop did not return")
	}
	mu.Lock()
	defer mu.Unlock()
	for id := uint64(1); id <= 4; id++ {
		if n := finished[jobq.Fence{ID: id, Attempt: 1}]; n != 1 {
			t.Errorf("job %d finished %d times before Stop returned, want 1", id, n)
		}
	}
	if len(finished) != 4 {
		t.Errorf("finished %v", finished)
	}
}
