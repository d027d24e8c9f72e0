package scheduler

import (
	"context"
	"time"

	"github.com/jobq/jobq"
)

// claimStore is what the claim strategies need from the store.
type claimStore interface {
	JobScanAvailable(ctx context.Context, limit int) ([]jobq.Fence, error)
	JobIdleProbe(ctx context.Context) (jobq.IdleProbe, error)
	JobClaimSkipLocked(ctx context.Context, p jobq.ClaimParams) ([]jobq.ClaimedJob, error)
	JobClaimCAS(ctx context.Context, p jobq.ClaimCASParams) ([]jobq.ClaimedJob, int, error)
}

// claimerParams configures the claimer.
type claimerParams struct {
	Store    claimStore
	Strategy string // StrategySkipLocked or StrategyCAS
	Owner    string
	Lease    time.Duration
	Retry    dbRetrier
	Events   emitter     // EventClaimed
	Lost     *lostClaims // failed tries, for the scanner to reconcile
	// ScheduledFunc, when set, receives the earliest SCHEDULED run_at each
	// idle probe read, with the local time its answer arrived (the
	// promoter's observe: an idle replica's promoter needs no probe of its
	// own).
	ScheduledFunc func(sn jobq.ScheduledNext, received time.Time)
}

// claimer runs the configured claim strategy. It is not safe for concurrent
// use: each claim the scanner keeps in flight has its own.
type claimer struct {
	p         claimerParams
	lastEmpty bool
	lastFull  bool // the last claim filled its batch: the queue is long
	lastSize  int  // jobs the last claim took
}

func newClaimer(p claimerParams) *claimer { return &claimer{p: p, lastEmpty: true} }

// startDrainLike sets c up as a further claim lane of a drain that first
// claimed with first: the queue is known to be long, so c claims without
// probing and waits for as many slots as first's last claim took.
func (c *claimer) startDrainLike(first *claimer) {
	c.lastEmpty, c.lastFull, c.lastSize = false, true, first.lastSize
}

// casClaim is one cas claim's answer.
type casClaim struct {
	jobs      []jobq.ClaimedJob
	conflicts int
}

// claim takes up to n due jobs. A failed query returns an error (never an
// empty result). After an empty claim the skiplocked strategy first probes
// with one cheap non-locking read (JobIdleProbe), so an idle replica costs
// one query per scan; the same read tells the promoter when the next
// SCHEDULED job is due (ScheduledFunc).
func (c *claimer) claim(ctx context.Context, n int) ([]jobq.ClaimedJob, error) {
	p := c.p
	var got casClaim
	var err error
	claim := jobq.ClaimParams{Owner: p.Owner, Limit: n, Lease: p.Lease}
	switch p.Strategy {
	case StrategyCAS:
		var cands []jobq.Fence
		cands, err = withRetryV(ctx, p.Retry, "claim.scan", claimMaxAttempts, func() ([]jobq.Fence, error) {
			return p.Store.JobScanAvailable(ctx, n)
		})
		if err != nil || len(cands) == 0 {
			break
		}
		got, err = withRetryV(ctx, p.Retry, "claim.cas", claimMaxAttempts, func() (casClaim, error) {
			var conflicts int
			jobs, e := p.Lost.try(func() (jobs []jobq.ClaimedJob, e error) {
				jobs, conflicts, e = p.Store.JobClaimCAS(ctx, jobq.ClaimCASParams{
					ClaimParams: claim, Candidates: cands,
				})
				return jobs, e
			})
			return casClaim{jobs, conflicts}, e
		})
	default:
		if c.lastEmpty {
			var probe jobq.IdleProbe
			probe, err = withRetryV(ctx, p.Retry, "claim.probe", claimMaxAttempts, func() (jobq.IdleProbe, error) {
				return p.Store.JobIdleProbe(ctx)
			})
			if err == nil && p.ScheduledFunc != nil {
				p.ScheduledFunc(probe.Scheduled, time.Now())
			}
			if err != nil || !probe.Due {
				break
			}
		}
		got.jobs, err = withRetryV(ctx, p.Retry, "claim.skiplocked", claimMaxAttempts, func() ([]jobq.ClaimedJob, error) {
			return p.Lost.try(func() ([]jobq.ClaimedJob, error) { return p.Store.JobClaimSkipLocked(ctx, claim) })
		})
	}
	if err != nil {
		return nil, err
	}
	c.lastEmpty = len(got.jobs) == 0
	c.lastFull = len(got.jobs) == n
	c.lastSize = len(got.jobs)
	p.Events.emit(Event{Kind: EventClaimed, Jobs: got.jobs, Conflicts: got.conflicts})
	return got.jobs, nil
}
