package scheduler

import (
	"context"

	"github.com/jobq/jobq"
)

// claimMaxAttempts bounds the retries of one claim: after that the scan
// gives up, logs the error and counts it (Stats.ClaimErrors), and the next
// tick tries again — so an outage shows in logs and metrics instead of
// hiding in an endless retry loop.
const claimMaxAttempts = 5

// claimer runs the configured claim strategy.
type claimer struct {
	s         *Scheduler
	lastEmpty bool
	lastFull  bool // the last claim filled its batch: the queue is long
	lastSize  int  // jobs the last claim took
}

func newClaimer(s *Scheduler) *claimer { return &claimer{s: s, lastEmpty: true} }

// claim takes up to n due jobs. A failed query returns an error (never an
// empty result). After an empty claim the skiplocked strategy first probes
// with one cheap non-locking read, so an idle replica costs one query per scan.
func (c *claimer) claim(ctx context.Context, n int) ([]jobq.ClaimedJob, error) {
	s := c.s
	var jobs []jobq.ClaimedJob
	var conflicts int
	var err error
	switch s.cfg.Strategy {
	case StrategyCAS:
		var cands []jobq.Fence
		err = s.dbRetry(ctx, "claim.scan", claimMaxAttempts, func() error {
			var e error
			cands, e = s.store.JobScanAvailable(ctx, n)
			return e
		})
		if err != nil || len(cands) == 0 {
			break
		}
		err = s.dbRetry(ctx, "claim.cas", claimMaxAttempts, func() error {
			var e error
			jobs, conflicts, e = s.store.JobClaimCAS(ctx, jobq.ClaimCASParams{
				ClaimParams: jobq.ClaimParams{Owner: s.cfg.Owner, Limit: n, Lease: s.cfg.Lease},
				Candidates:  cands, Unguarded: s.cfg.Sabotage.NoCASGuard,
			})
			return e
		})
	default:
		if c.lastEmpty {
			var probe []jobq.Fence
			err = s.dbRetry(ctx, "claim.probe", claimMaxAttempts, func() error {
				var e error
				probe, e = s.store.JobScanAvailable(ctx, 1)
				return e
			})
			if err != nil || len(probe) == 0 {
				break
			}
		}
		err = s.dbRetry(ctx, "claim.skiplocked", claimMaxAttempts, func() error {
			var e error
			// A short queue: claim at READ COMMITTED so the claim does not
			// lock the gap where submits insert (store.claimTx).
			jobs, e = s.store.JobClaimSkipLocked(ctx, jobq.ClaimParams{Owner: s.cfg.Owner, Limit: n, Lease: s.cfg.Lease,
				ReadCommitted: !c.lastFull})
			return e
		})
	}
	if err != nil {
		return nil, err
	}
	c.lastEmpty = len(jobs) == 0
	c.lastFull = len(jobs) == n
	c.lastSize = len(jobs)
	s.stats.claimed.Add(int64(len(jobs)))
	s.stats.claimConflicts.Add(int64(conflicts))
	if s.cfg.Hooks.ClaimedFunc != nil {
		s.cfg.Hooks.ClaimedFunc(jobs, conflicts)
	}
	return jobs, nil
}
