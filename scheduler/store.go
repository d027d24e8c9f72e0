package scheduler

import (
	"context"
	"time"

	"github.com/jobq/jobq"
)

// Store is the narrow persistence interface the scheduler runs on, written
// in jobq types only: no driver, no *sql.Tx. The MySQL adapter (*store.Store)
// implements it and checks so at compile time; testbed/faultstore and
// testbed/sabotage wrap it; scheduler/storetest is the contract every
// implementation and decorator must pass. An implementation returns its
// transient errors marked (storeerr.Error) so the scheduler can retry them.
type Store interface {
	JobScanAvailable(ctx context.Context, limit int) ([]jobq.Fence, error)
	JobIdleProbe(ctx context.Context, limit int) (jobq.IdleProbe, error)
	JobClaimSkipLocked(ctx context.Context, p jobq.ClaimParams) ([]jobq.ClaimedJob, error)
	JobClaimCAS(ctx context.Context, p jobq.ClaimCASParams) ([]jobq.ClaimedJob, int, error)
	JobHeldBy(ctx context.Context, owner string, within time.Duration) ([]jobq.ClaimedJob, error)
	LeaseRenewMany(ctx context.Context, p jobq.LeaseRenewParams) ([]uint64, error)
	JobFenceStates(ctx context.Context, ids []uint64) ([]jobq.FenceState, error)
	JobCompleteMany(ctx context.Context, cs []jobq.Completion) ([]bool, error)
	JobCompleteTx(ctx context.Context, c jobq.Completion, fn func(ctx context.Context, tx jobq.Tx) error) (bool, error)
	JobRescueCandidates(ctx context.Context, limit int) ([]jobq.Fence, error)
	JobRescueExpired(ctx context.Context, f jobq.Fence) (bool, error)
	JobScheduledNext(ctx context.Context) (jobq.ScheduledNext, error)
	JobPromoteDue(ctx context.Context, limit int) (int, error)
	// OpsStore: limited job types, periodic schedules, retention. Required,
	// so that no store can switch them off by lacking a method.
	OpsStore
}
