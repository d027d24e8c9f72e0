package scheduler

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
)

// hintStore answers the promoter's probe from a settable earliest run_at
// and counts the probes.
type hintStore struct {
	mu     sync.Mutex
	next   time.Time // zero: nothing SCHEDULED
	probes chan time.Time
}

func (s *hintStore) JobScheduledNext(ctx context.Context) (jobq.ScheduledNext, error) {
	s.mu.Lock()
	next := s.next
	s.mu.Unlock()
	now := time.Now()
	select {
	case s.probes <- now:
	default:
	}
	return jobq.ScheduledNext{Next: next, DBNow: now}, nil
}

func (s *hintStore) JobPromoteDue(ctx context.Context, limit int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.next.IsZero() && !s.next.After(time.Now()) {
		s.next = time.Time{}
		return 1, nil
	}
	return 0, nil
}

// A local submit's hint (promoteAt) survives an idle scan's probe answered
// after it but read before the submit committed: that probe saw nothing
// SCHEDULED, and the job must still be promoted at its run_at, not a
// PromoteInterval later.
func TestPromoterHintSurvivesAnOlderProbe(t *testing.T) {
	st := &hintStore{probes: make(chan time.Time, 16)}
	pr := newPromoter(promoterParams{Store: st, Interval: 10 * time.Second, Batch: 10, WakeFunc: func() {},
		Log: slog.New(slog.DiscardHandler)})
	if err := pr.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer pr.Stop()
	<-st.probes // the first pass, at once
	// The scan's probe is sent: nothing SCHEDULED yet.
	probeRead := jobq.ScheduledNext{DBNow: time.Now()}
	// The submit commits a job due in 100ms and hints the promoter.
	runAt := time.Now().Add(100 * time.Millisecond)
	st.mu.Lock()
	st.next = runAt
	st.mu.Unlock()
	pr.promoteAt(runAt)
	// The promoter takes the hint (its loop drains the poke) before the
	// probe's answer arrives.
	for len(pr.poke) > 0 {
		runtime.Gosched()
	}
	pr.observe(probeRead, time.Now())
	// Without the hint the next pass is the probe's plan: Interval (10s)
	// after it. The hint's pass comes at the job's run_at.
	at := <-st.probes
	if at.After(runAt.Add(pr.p.Interval / 2)) {
		t.Fatalf("the submit's hint was dropped: the promoter probed %v after the job's run_at, on the probe's plan (Interval %v)", at.Sub(runAt), pr.p.Interval)
	}
}
