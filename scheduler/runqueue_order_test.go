package scheduler_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
)

// startRecord is one handler start: the job's order key, in start order.
type startRecord struct {
	id       uint64
	priority int
	runAt    time.Time
}

// before reports whether a goes before b in claim order: priority high to
// low, then due time (run_at), then id.
func (a startRecord) before(b startRecord) bool {
	switch {
	case a.priority != b.priority:
		return a.priority > b.priority
	case !a.runAt.Equal(b.runAt):
		return a.runAt.Before(b.runAt)
	}
	return a.id < b.id
}

// orderViolations counts, over a start sequence, the pairs (a started
// before b) where b goes before a in claim order: priority inversions (b has
// the higher priority) and FIFO violations (same priority, b due earlier,
// or due at the same time with the smaller id). It also returns how many
// jobs started after a job of lower priority had started (the issue's
// "jobs started after a lower-priority one").
func orderViolations(seq []startRecord) (prioInv, fifo, jobsAfterLower int) {
	minPrio := 1 << 30
	for j, b := range seq {
		for _, a := range seq[:j] {
			if b.before(a) {
				if b.priority != a.priority {
					prioInv++
				} else {
					fifo++
				}
			}
		}
		if minPrio < b.priority {
			jobsAfterLower++
		}
		minPrio = min(minPrio, b.priority)
	}
	return prioInv, fifo, jobsAfterLower
}

// One replica with one worker starts 3,000 no-op jobs of interleaved
// priorities (10/5/0, by id) and scattered due times (run_at 0–49 s in the
// past, ties included) in strict claim order at the handler's start: 0
// priority inversions and 0 FIFO violations.
//
// Order is defined among jobs that were due and claimed before: a pair
// (a started before b) is a violation when b goes before a (priority desc,
// run_at, id) and b had been claimed by this replica before a's handler
// started. Every job here is WAITING and due before the replica starts, and
// claims take due jobs in that order, so a job that goes before another is
// claimed in the same claim or an earlier one — always before the other
// starts — and every pair out of order counts: the start order must be
// exactly the sorted order. (Each queued job used to wait for a worker in
// its own goroutine, and Go woke them in no order: 165–480 jobs started
// after a lower-priority one in the 3,000-job run.)
func TestRunQueueStartsInClaimOrder(t *testing.T) {
	t.Parallel()
	const n = 3000
	st := testdb.Store(t)
	var sb strings.Builder
	sb.WriteString(`INSERT INTO job_queue (job_key, job_type, params, request_hash, status, priority, run_at, create_time, update_time) VALUES `)
	prios := []int{10, 5, 0}
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		// (i*7)%50 seconds ago: due times out of id order, each shared by 60 jobs.
		fmt.Fprintf(&sb, "('ord-%d', 'rec', '{}', 'h', 'WAITING', %d, NOW(6) - INTERVAL %d SECOND, NOW(6), NOW(6))", i, prios[i%3], (i*7)%50)
	}
	if _, err := st.DB().Exec(sb.String()); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seq []startRecord
	done := make(chan struct{})
	reg := scheduler.NewRegistry()
	reg.Register("rec", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		mu.Lock()
		seq = append(seq, startRecord{job.ID, job.Priority, job.RunAt})
		if len(seq) == n {
			close(done)
		}
		mu.Unlock()
		return nil
	}))
	// The flags: one worker, every other setting at its default
	// (batch limit 500, run queue 500, one claim in flight).
	cfg := scheduler.Config{Owner: "ord", Workers: 1, Logger: bufferedLogger(t)}
	s := startScheduler(t, st, reg, cfg)
	s.Wake()
	closed(t, done, slowWait, "3,000 handler starts")
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	prioInv, fifo, afterLower := orderViolations(seq)
	t.Logf("%d starts: %d priority inversions, %d FIFO violations, %d jobs started after a lower-priority one; claims %d, given back %d",
		len(seq), prioInv, fifo, afterLower, s.Stats().Claimed, s.Stats().Released)
	if prioInv != 0 || fifo != 0 {
		t.Fatalf("start order: %d priority inversions and %d FIFO violations (%d jobs started after a lower-priority one), want 0 and 0",
			prioInv, fifo, afterLower)
	}
}
