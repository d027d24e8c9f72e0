package scheduler

import (
	"context"
	"sync"
	"time"

	"github.com/jobq/jobq"
)

// run is one claimed run of one job, from dispatch until its completion
// committed (or could not be written): what the dispatcher hands an
// executor. A run this replica holds has ctx and cancel and is in the
// runTable; a run a remote worker fetched has fetch instead.
type run struct {
	job *Job
	// ctx is the context the run's work runs under; cancel ends it with a
	// cause (ErrLeaseLost, ErrCancelRequested, ErrShutdown).
	ctx    context.Context
	cancel context.CancelCauseFunc
	// fetch is the answer of the remote worker's fetch that claimed the
	// run (remoteExecutor); nil for a run this replica claimed.
	fetch *fetchAnswer
	// leaseDeadline is the local monotonic estimate of lease_until; lost is
	// set once the run was found to have lost its lease. Both are guarded by
	// the runTable's mutex.
	leaseDeadline time.Time
	lost          bool
	// finished is set when the handler returned and its outcome is being
	// written: the guard no longer gives the run up, and the heartbeat keeps
	// renewing it until the outcome commits (outcomeWriter), and this
	// replica's rescuer leaves it alone.
	finished bool
	// guard cancels the handler leaseGuardMargin before leaseDeadline unless
	// a renewal moves the deadline first (see heartbeat.guardFired).
	guard *time.Timer
	// ran is how long the handler ran (0: it never started) and givenBack
	// is set when the run queue gave the run back unstarted; both are
	// written and read by the goroutine that settles the run.
	ran       time.Duration
	givenBack bool
}

// runTable owns the in-flight runs of one replica: the dispatcher adds a
// run, the completer removes it, and the heartbeat renews and loses runs
// through it. Every access goes through its methods, under its mutex.
type runTable struct {
	mu   sync.Mutex
	runs map[jobq.Fence]*run
}

func newRunTable() *runTable { return &runTable{runs: map[jobq.Fence]*run{}} }

// add registers r and arms its guard to call guardFunc at guardDelay from
// now, under the table's lock so no renewal can race the arming.
func (t *runTable) add(r *run, guardDelay time.Duration, guardFunc func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.runs[r.job.Fence()] = r
	r.guard = time.AfterFunc(guardDelay, guardFunc)
}

// remove forgets the run of f and returns it (nil when unknown).
func (t *runTable) remove(f jobq.Fence) *run {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.runs[f]
	delete(t.runs, f)
	return r
}

// fences returns the fences of every run in the table.
func (t *runTable) fences() map[jobq.Fence]struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	fs := make(map[jobq.Fence]struct{}, len(t.runs))
	for f := range t.runs {
		fs[f] = struct{}{}
	}
	return fs
}

// holds reports whether the run of f is in the table.
func (t *runTable) holds(f jobq.Fence) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.runs[f]
	return ok
}

// len returns the number of in-flight runs.
func (t *runTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.runs)
}

// live returns the runs not yet lost and their distinct job ids.
func (t *runTable) live() (runs []*run, ids []uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	runs = make([]*run, 0, len(t.runs))
	ids = make([]uint64, 0, len(t.runs))
	seen := map[uint64]bool{}
	for _, r := range t.runs {
		if r.lost {
			continue
		}
		runs = append(runs, r)
		if !seen[r.job.ID] {
			seen[r.job.ID] = true
			ids = append(ids, r.job.ID)
		}
	}
	return runs, ids
}

// renewed moves the lease deadline of runs to deadline and re-arms the
// guards of those not lost to fire guardDelay(deadline) from now.
func (t *runTable) renewed(runs []*run, deadline time.Time, guardDelay time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range runs {
		r.leaseDeadline = deadline
		if !r.lost {
			r.guard.Reset(guardDelay)
		}
	}
}

// expiresBefore reports whether r's lease deadline is before t0 while its
// handler still runs (a finished run has no handler to cancel).
func (t *runTable) expiresBefore(r *run, t0 time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t0.After(r.leaseDeadline) && !r.finished
}

// startable reports whether r's handler may start at now: the run is not
// lost and its lease deadline is more than margin (the guard's) away.
func (t *runTable) startable(r *run, now time.Time, margin time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !r.lost && now.Before(r.leaseDeadline.Add(-margin))
}

// finish marks r's handler returned: its outcome is being written.
func (t *runTable) finish(r *run) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r.finished = true
}

// isFinished reports whether r's handler returned.
func (t *runTable) isFinished(r *run) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return r.finished
}

// writingOutcome reports whether f is a run of this replica whose handler
// returned and whose outcome is still being written.
func (t *runTable) writingOutcome(f jobq.Fence) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.runs[f]
	return r != nil && r.finished
}

// outcomeDeadline is the latest lease deadline among fences' runs minus
// margin; now when none of them is held any more.
func (t *runTable) outcomeDeadline(fences []jobq.Fence, margin time.Duration) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	var d time.Time
	for _, f := range fences {
		if r := t.runs[f]; r != nil && r.leaseDeadline.After(d) {
			d = r.leaseDeadline
		}
	}
	if d.IsZero() {
		return time.Now()
	}
	return d.Add(-margin)
}

// latestDeadline is the latest lease deadline among runs minus margin, and
// no earlier than floor.
func (t *runTable) latestDeadline(runs []*run, margin time.Duration, floor time.Time) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := floor
	for _, r := range runs {
		d = later(d, r.leaseDeadline.Add(-margin))
	}
	return d
}

// markLost marks r lost; false when it already was, or has finished.
func (t *runTable) markLost(r *run) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r.lost || t.runs[r.job.Fence()] != r {
		return false
	}
	r.lost = true
	return true
}
