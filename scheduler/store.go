package scheduler

import (
	"context"
	"database/sql"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/store"
)

// Store is the narrow persistence interface the scheduler runs on.
// *store.Store implements it; faultstore wraps it with pause points and
// injected errors.
type Store interface {
	JobScanAvailable(ctx context.Context, limit int) ([]jobq.Fence, error)
	JobClaimSkipLocked(ctx context.Context, p jobq.ClaimParams) ([]jobq.ClaimedJob, error)
	JobClaimCAS(ctx context.Context, p jobq.ClaimCASParams) ([]jobq.ClaimedJob, int, error)
	JobHeldBy(ctx context.Context, owner string, within time.Duration) ([]jobq.ClaimedJob, error)
	LeaseRenewMany(ctx context.Context, p jobq.LeaseRenewParams) ([]uint64, error)
	JobFenceStates(ctx context.Context, ids []uint64) ([]jobq.FenceState, error)
	JobCompleteMany(ctx context.Context, cs []jobq.Completion) ([]bool, error)
	JobCompleteTx(ctx context.Context, c jobq.Completion, fn func(ctx context.Context, tx *sql.Tx) error) (bool, error)
	JobRescueCandidates(ctx context.Context, limit int) ([]jobq.Fence, error)
	JobRescueExpired(ctx context.Context, f jobq.Fence) (bool, error)
	JobScheduledNext(ctx context.Context) (jobq.ScheduledNext, error)
	JobPromoteDue(ctx context.Context, limit int) (int, error)
	// OpsStore: limited job types, periodic schedules, retention. Required,
	// so that no store can switch them off by lacking a method.
	OpsStore
}

var _ Store = (*store.Store)(nil)
