package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/scheduler/schedulertest"
	"github.com/jobq/jobq/store"
)

// gateWait bounds the waits below (a hang, not a timing assertion).
const gateWait = time.Minute

// runLog counts each job's runs and fails the test when one job runs twice
// at once.
type runLog struct {
	t       *testing.T
	mu      sync.Mutex
	running map[uint64]int
	runs    map[uint64]int
}

func (l *runLog) handler() scheduler.Handler {
	return scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		l.mu.Lock()
		l.running[job.ID]++
		l.runs[job.ID]++
		if l.running[job.ID] > 1 {
			l.t.Errorf("job %d runs twice at once", job.ID)
		}
		l.mu.Unlock()
		l.mu.Lock()
		l.running[job.ID]--
		l.mu.Unlock()
		return nil
	})
}

// A replica frozen mid-claim holding the only claim slot (--claim-slots 1)
// does not stop a second replica on the same database: its claims wait for
// the slot at most ClaimSlotWait each, then claim without one, and it
// drains every job but the frozen claim's. When the frozen replica resumes
// it runs the jobs it holds; every job then ran exactly once (attempt 1).
func TestClaimGateFrozenReplicaPeerDrains(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	frozen, peer := storePair(t, 16)
	const jobs, frozenBatch = 30, 5
	for i := range jobs {
		if _, _, err := frozen.JobSubmit(ctx, jobq.SubmitParams{JobKey: fmt.Sprintf("f%d", i), JobType: "t", Params: `{}`, RequestHash: "h"}); err != nil {
			t.Fatal(err)
		}
	}
	locked, thaw := make(chan struct{}), make(chan struct{})
	var once sync.Once
	store.SetAfterClaimLock(frozen, func(context.Context, *sql.Tx) {
		first := false
		once.Do(func() { first = true })
		if first {
			close(locked)
			<-thaw
		}
	})
	var thawOnce sync.Once
	release := func() { thawOnce.Do(func() { close(thaw) }) }
	t.Cleanup(release)

	log := &runLog{t: t, running: map[uint64]int{}, runs: map[uint64]int{}}
	start := func(st *store.Store, owner string, batch int, rec *schedulertest.Recorder) {
		reg := scheduler.NewRegistry()
		reg.Register("t", log.handler())
		cfg := scheduler.Config{
			Owner: owner, PollInterval: 50 * time.Millisecond, PollJitter: 10 * time.Millisecond,
			Lease: 30 * time.Second, RescueInterval: time.Hour, BatchLimit: batch, ClaimSlots: 1,
			Workers: 10, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			ShutdownTimeout: 5 * time.Second, Observer: rec,
		}
		s, err := scheduler.New(st, reg, cfg, true)
		if err != nil {
			t.Fatalf("new scheduler %s: %v", owner, err)
		}
		if err := s.Start(ctx); err != nil {
			t.Fatalf("start %s: %v", owner, err)
		}
		t.Cleanup(func() { release(); _ = s.Stop() })
	}
	frozenRec, peerRec := schedulertest.NewRecorder(), schedulertest.NewRecorder()
	start(frozen, "frozen", frozenBatch, frozenRec)
	select {
	case <-locked:
	case <-time.After(gateWait):
		t.Fatal("the frozen replica's claim never reached its locking read")
	}
	// The frozen claim holds the only slot.
	if s := takeSlot(t, peer, 1); s != -1 {
		t.Fatalf("slot %d free while the frozen claim holds the only one", s)
	}
	start(peer, "peer", 3, peerRec)
	succeeded := schedulertest.Applied(jobq.OutcomeSuccess)
	peerRec.WaitN(t, scheduler.EventCompleted, succeeded, jobs-frozenBatch, gateWait)
	var waiting int
	if err := peer.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM job_queue WHERE status = 'WAITING'").Scan(&waiting); err != nil {
		t.Fatal(err)
	}
	if waiting != frozenBatch {
		// The frozen claim's rows are locked but not yet claimed.
		t.Fatalf("%d jobs WAITING after the peer drained, want the %d the frozen claim holds", waiting, frozenBatch)
	}
	release()
	frozenRec.WaitN(t, scheduler.EventCompleted, succeeded, frozenBatch, gateWait)
	var done, maxAttempt int
	if err := peer.DB().QueryRowContext(ctx, "SELECT COUNT(*), MAX(attempt) FROM job_queue WHERE status = 'SUCCESS'").Scan(&done, &maxAttempt); err != nil {
		t.Fatal(err)
	}
	if done != jobs || maxAttempt != 1 {
		t.Fatalf("%d jobs SUCCESS with max attempt %d, want %d at attempt 1", done, maxAttempt, jobs)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.runs) != jobs {
		t.Fatalf("%d jobs ran, want %d", len(log.runs), jobs)
	}
	for id, n := range log.runs {
		if n != 1 {
			t.Fatalf("job %d ran %d times, want once", id, n)
		}
	}
}
