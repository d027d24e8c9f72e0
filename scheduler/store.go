package scheduler

import (
	"context"
	"database/sql"

	"github.com/jobq/jobq/store"
)

// Store is the narrow persistence interface the scheduler runs on.
// *store.Store implements it; faultstore wraps it with pause points and
// injected errors.
type Store interface {
	JobScanAvailable(ctx context.Context, limit int) ([]store.Fence, error)
	JobClaimSkipLocked(ctx context.Context, p store.ClaimParams) ([]store.ClaimedJob, error)
	JobClaimCAS(ctx context.Context, p store.ClaimCASParams) ([]store.ClaimedJob, int, error)
	LeaseRenewMany(ctx context.Context, p store.LeaseRenewParams) (int64, error)
	JobFenceStates(ctx context.Context, ids []uint64) ([]store.FenceState, error)
	JobCompleteMany(ctx context.Context, cs []store.Completion) ([]bool, error)
	JobCompleteTx(ctx context.Context, c store.Completion, fn func(ctx context.Context, tx *sql.Tx) error) (bool, error)
	JobRescueCandidates(ctx context.Context, limit int) ([]store.Fence, error)
	JobRescueExpired(ctx context.Context, f store.Fence) (bool, error)
}

var _ Store = (*store.Store)(nil)
