package sabotage

import (
	"context"
	"database/sql"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/scheduler"
)

// keyEarlyFree is the key-early-free switch's decorator: a claim of a keyed
// job frees its slot at once, as a naive implementation that counts only
// waiting jobs would: after the claim, in a statement of its own and
// without the key row's lock or count, the key's next parked job is made
// WAITING. The claimed job still runs, so the key has one more run in
// flight than its limit allows (concurrency_key_overlap).
type keyEarlyFree struct {
	scheduler.Store
	DB *sql.DB
}

// admitNextSQL admits a key's best parked job without looking at the count.
const admitNextSQL = `UPDATE job_queue SET status = 'WAITING', update_time = NOW(6)
WHERE parked_key = ? ORDER BY priority DESC, run_at, id LIMIT 1`

func (k *keyEarlyFree) free(ctx context.Context, claimed []jobq.ClaimedJob) {
	for _, c := range claimed {
		if c.ConcurrencyKey != "" {
			_, _ = k.DB.ExecContext(ctx, admitNextSQL, c.ConcurrencyKey)
		}
	}
}

// JobClaimSkipLocked claims, then frees the claimed keyed jobs' slots.
func (k *keyEarlyFree) JobClaimSkipLocked(ctx context.Context, p jobq.ClaimParams) ([]jobq.ClaimedJob, error) {
	r, err := k.Store.JobClaimSkipLocked(ctx, p)
	k.free(ctx, r)
	return r, err
}

// JobClaimCAS claims, then frees the claimed keyed jobs' slots.
func (k *keyEarlyFree) JobClaimCAS(ctx context.Context, p jobq.ClaimCASParams) ([]jobq.ClaimedJob, int, error) {
	r, n, err := k.Store.JobClaimCAS(ctx, p)
	k.free(ctx, r)
	return r, n, err
}
