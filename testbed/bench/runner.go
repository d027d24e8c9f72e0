package bench

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq/store"
)

// Strategy names of the runners the harness compares. The jobq strategies
// are scheduler.StrategySkipLocked and scheduler.StrategyCAS.
const (
	// StrategyCeiling is the raw SQL minimum of a job's life (see ceiling.go).
	StrategyCeiling = "ceiling"
	// StrategyCeilingQueue is the ceiling without the execution log.
	StrategyCeilingQueue = "ceiling-queue"
	// StrategyClassic is the classic design (see classic.go).
	StrategyClassic = "classic"
	StrategyCAS     = "cas"
	StrategySkip    = "skiplocked"
)

// Runner is one way of running the queue: started against the bench
// database, it claims and completes jobs until stopped.
type Runner interface {
	// Start launches the runner and returns at once.
	Start(ctx context.Context) error
	// Completed returns the jobs completed so far (committed SUCCESS).
	Completed() int64
	// Counters returns claim conflicts, database errors and statements so far.
	Counters() Counters
	// APIs returns the base URLs of the runner's HTTP APIs (empty without).
	APIs() []string
	// Stop stops the runner gracefully and releases its connections.
	Stop() error
}

// Counters are what a runner observed. A count of -1 means not observable
// (replicas run as processes).
type Counters struct {
	ClaimConflicts int64 `json:"claim_conflicts"` // cas rows another replica won
	Deadlocks      int64 `json:"deadlocks"`       // MySQL error 1213
	LockWaits      int64 `json:"lock_wait_timeouts"`
	OtherErrors    int64 `json:"other_db_errors"`
	Statements     int64 `json:"statements"`   // sent by the runner's pools (StmtCounter)
	RowsWritten    int64 `json:"rows_written"` // rows its writes changed (StmtCounter.Rows)
}

// Sub returns c − before.
func (c Counters) Sub(before Counters) Counters {
	if c.ClaimConflicts < 0 {
		return c
	}
	return Counters{
		ClaimConflicts: c.ClaimConflicts - before.ClaimConflicts, Deadlocks: c.Deadlocks - before.Deadlocks,
		LockWaits: c.LockWaits - before.LockWaits, OtherErrors: c.OtherErrors - before.OtherErrors,
		Statements: c.Statements - before.Statements, RowsWritten: c.RowsWritten - before.RowsWritten,
	}
}

// errCounts classifies database errors by MySQL error number
// (store.ErrorNumber): 1213 deadlock, 1205 lock wait timeout, other.
type errCounts struct{ deadlock, lockWait, other atomic.Int64 }

func (e *errCounts) add(err error) {
	switch store.ErrorNumber(err) {
	case store.ErrNumDeadlock:
		e.deadlock.Add(1)
	case store.ErrNumLockWaitTimeout:
		e.lockWait.Add(1)
	default:
		e.other.Add(1)
	}
}

// sleepCtx sleeps d or until ctx is done; false means ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
