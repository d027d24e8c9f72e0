package sabotage

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/gen/jobqdb"
)

// rateWindowLocal is the rate-window sabotage: the claim of a rate-limited
// job type counts the window from the starts this replica made, kept in
// memory, and records nothing in rate_start — the classic "limiter in each
// process". Each replica then takes up to the whole limit per window, and
// the product's probe, which counts rate_start, never finds the window full.
// A per-key limit is counted the same way for each rate key: each replica
// takes up to the whole limit of every key per window.
type rateWindowLocal struct {
	db     *sql.DB
	mu     sync.Mutex
	starts map[rateWindowKey][]time.Time // this replica's recent starts (local clock)
}

// rateWindowKey is what one in-memory window counts: a job type, and the
// rate key under a per-key limit ("" otherwise).
type rateWindowKey struct{ jobType, rateKey string }

const (
	// rateLimitOf reads a type's rate limit.
	rateLimitOf = `SELECT rate_starts, rate_period_us, rate_per_key FROM job_type_control WHERE job_type = ? AND paused = 0`
	// rateLockDue locks due jobs of one type, as the product's limited claim
	// does, but under no control row lock and with no window count.
	rateLockDue = `SELECT id, COALESCE(rate_key, '') FROM job_queue
WHERE job_type = ? AND status = 'WAITING' AND scan_status = 'WAITING'
  AND lane = 0 AND run_at <= NOW(6)
ORDER BY priority DESC, run_at, id
LIMIT ?
FOR UPDATE SKIP LOCKED`
)

// claim claims jobs of jobType up to what this replica's own window allows;
// handled is false for a type without a rate limit (the product's claim
// serves it).
func (r *rateWindowLocal) claim(ctx context.Context, jobType string, p jobq.ClaimParams) (_ []jobq.ClaimedJob, handled bool, err error) {
	var n int
	var periodUs int64
	var perKey bool
	err = r.db.QueryRowContext(ctx, rateLimitOf, jobType).Scan(&n, &periodUs, &perKey)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && n <= 0) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, err
	}
	period := time.Duration(periodUs) * time.Microsecond
	now := time.Now()
	// used is this replica's starts in the window of w (pruned as read).
	used := func(w rateWindowKey) int {
		kept := r.starts[w][:0]
		for _, t := range r.starts[w] {
			if now.Sub(t) < period {
				kept = append(kept, t)
			}
		}
		r.starts[w] = kept
		return len(kept)
	}
	room := p.Limit
	if !perKey {
		r.mu.Lock()
		room = min(n-used(rateWindowKey{jobType: jobType}), p.Limit)
		r.mu.Unlock()
	}
	if room <= 0 {
		return nil, true, nil
	}
	tx, err := r.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, true, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, rateLockDue, jobType, room)
	if err != nil {
		return nil, true, err
	}
	var ids []uint64
	var windows []rateWindowKey // of each id
	taken := map[rateWindowKey]int{}
	r.mu.Lock()
	for rows.Next() {
		var id uint64
		w := rateWindowKey{jobType: jobType}
		if err := rows.Scan(&id, &w.rateKey); err != nil {
			rows.Close()
			r.mu.Unlock()
			return nil, true, err
		}
		if !perKey {
			w.rateKey = ""
		} else if used(w)+taken[w] >= n {
			continue // this key's local window is full: left WAITING
		}
		taken[w]++
		ids = append(ids, id)
		windows = append(windows, w)
	}
	r.mu.Unlock()
	rows.Close()
	if err := rows.Err(); err != nil || len(ids) == 0 {
		return nil, true, err
	}
	q := jobqdb.New(tx)
	owner := sql.NullString{String: p.Owner, Valid: true}
	if _, err := q.JobClaimMany(ctx, jobqdb.JobClaimManyParams{Owner: owner, LeaseUs: p.Lease.Microseconds(), Ids: ids}); err != nil {
		return nil, true, err
	}
	got, err := q.JobGetClaimed(ctx, jobqdb.JobGetClaimedParams{Ids: ids, Owner: owner})
	if err != nil {
		return nil, true, err
	}
	if err := tx.Commit(); err != nil {
		return nil, true, err
	}
	r.mu.Lock()
	for _, w := range windows[:len(got)] {
		r.starts[w] = append(r.starts[w], now)
	}
	r.mu.Unlock()
	return claimedFrom(got), true, nil
}
