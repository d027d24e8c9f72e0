package scheduler_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/service"
	"github.com/jobq/jobq/store"
	"github.com/jobq/jobq/testbed/faultstore"
)

// claimCounter is a store whose skiplocked claims count the jobs they
// return, so a test tells a job a claim took from one a completion handed
// off.
type claimCounter struct {
	*store.Store
	mu      sync.Mutex
	claimed map[uint64]int
}

func (c *claimCounter) JobClaimSkipLocked(ctx context.Context, p jobq.ClaimParams) ([]jobq.ClaimedJob, error) {
	cj, err := c.Store.JobClaimSkipLocked(ctx, p)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, j := range cj {
		c.claimed[j.ID]++
	}
	return cj, err
}

func (c *claimCounter) claims(id uint64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.claimed[id]
}

// runLog records each handler run by job id: its attempts and owners.
type runLog struct {
	mu   sync.Mutex
	runs map[uint64][]string
}

func (l *runLog) handler() scheduler.Handler {
	return scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.runs == nil {
			l.runs = map[uint64][]string{}
		}
		l.runs[job.ID] = append(l.runs[job.ID], fmt.Sprintf("%s#%d %s", job.Owner, job.Attempt, job.Params))
		return nil
	})
}

func (l *runLog) of(id uint64) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runs[id]
}

// A key's jobs after the first need no claim: each completion hands the
// key's next job to the replica that completed, which runs it once, at
// attempt 1, with its params. With NoKeyHandoff every job is claimed.
func TestKeyHandoffRunsWithoutClaim(t *testing.T) {
	t.Parallel()
	for _, off := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoKeyHandoff=%v", off), func(t *testing.T) {
			t.Parallel()
			st := testdb.Store(t)
			cc := &claimCounter{Store: st, claimed: map[uint64]int{}}
			var log runLog
			reg := scheduler.NewRegistry()
			reg.Register("keyed", log.handler())
			svc := service.New(service.Options{Store: st})
			var ids []uint64
			for i := range 4 {
				ids = append(ids, submitKeyed(t, svc, fmt.Sprintf("h-%d", i), "keyed", "k", 1, 0, 0).ID)
			}
			cfg := fastConfig("r1")
			cfg.NoKeyHandoff = off
			startScheduler(t, cc, reg, cfg)
			waitSucceeded(t, len(ids))
			for i, id := range ids {
				if runs := log.of(id); len(runs) != 1 || runs[0] != "r1#1 {}" {
					t.Fatalf("job %d ran %v, want once: r1#1 {}", id, runs)
				}
				want := 1
				if i > 0 && !off {
					want = 0 // handed off by the completion of the job before
				}
				if got := cc.claims(id); got != want {
					t.Fatalf("job %d was claimed %d times, want %d", id, got, want)
				}
			}
			if n := events(t).Count(scheduler.EventClaimed, func(e scheduler.Event) bool { return len(e.Jobs) > 0 }); n != len(ids) {
				t.Fatalf("%d claimed events with jobs, want %d (a hand-off reports its job as claimed)", n, len(ids))
			}
		})
	}
}

// A completion whose hand-off committed but whose answer was lost is
// written again (the retry finds its outcome applied and hands nothing
// off), and the handed job, RUNNING under this replica and unknown to it,
// is found by its owner (JobHeldBy) and run once — not left for a rescue.
func TestKeyHandoffLostCompletionAck(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	fs := faultstore.Wrap(st)
	var log runLog
	reg := scheduler.NewRegistry()
	reg.Register("keyed", log.handler())
	svc := service.New(service.Options{Store: st})
	first := submitKeyed(t, svc, "lost-1", "keyed", "k", 1, 3, 0)
	next := submitKeyed(t, svc, "lost-2", "keyed", "k", 1, 3, 0)
	fs.FailNext("JobCompleteMany.after", 1, mysql.ErrInvalidConn)
	s := startScheduler(t, fs, reg, fastConfig("r1"))
	waitFinished(t, st, next.ID, jobq.OutcomeSuccess)
	for _, id := range []uint64{first.ID, next.ID} {
		if runs := log.of(id); len(runs) != 1 || runs[0] != "r1#1 {}" {
			t.Fatalf("job %d ran %v, want once: r1#1 {} (the handed job adopted, not rescued)", id, runs)
		}
	}
	if n := events(t).Count(scheduler.EventAdopted, func(e scheduler.Event) bool { return e.Fence.ID == next.ID }); n != 1 {
		t.Fatalf("the handed job was adopted %d times, want 1", n)
	}
	if ex := execSummary(executions(t, st, next.ID)); len(ex) != 1 {
		t.Fatalf("executions of the handed job %v, want one SUCCESS (no LEASE_EXPIRED attempt)", ex)
	}
	if stats := s.Stats(); stats.Adopted != 1 || stats.Rescued != 0 {
		t.Fatalf("stats: adopted %d rescued %d; want 1 adopted, none rescued", stats.Adopted, stats.Rescued)
	}
}
