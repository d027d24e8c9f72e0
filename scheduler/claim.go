package scheduler

import (
	"context"
	"time"

	"github.com/jobq/jobq"
)

// claimStore is what the claim strategies need from the store.
type claimStore interface {
	JobScanAvailable(ctx context.Context, limit int) ([]jobq.Fence, error)
	JobIdleProbe(ctx context.Context, limit int) (jobq.IdleProbe, error)
	JobClaimSkipLocked(ctx context.Context, p jobq.ClaimParams) ([]jobq.ClaimedJob, error)
	JobClaimCAS(ctx context.Context, p jobq.ClaimCASParams) ([]jobq.ClaimedJob, int, error)
}

// claimerParams configures the claimer.
type claimerParams struct {
	Store    claimStore
	Strategy string // StrategySkipLocked or StrategyCAS
	Owner    string
	Lease    time.Duration
	Slots    int // the claim gate's slots (Config.ClaimSlots; 0: none)
	Retry    dbRetrier
	Events   emitter     // EventClaimed
	Lost     *lostClaims // failed tries, for the scanner to reconcile
	// ScheduledFunc, when set, receives the earliest SCHEDULED run_at each
	// idle probe read, with the local time its answer arrived (the
	// promoter's observe: an idle replica's promoter needs no probe of its
	// own).
	ScheduledFunc func(sn jobq.ScheduledNext, received time.Time)
	// BatchLimit is the most jobs a claim asks for (Config.BatchLimit), and
	// the LIMIT of the probe a skiplocked claim sends after an empty one,
	// so that the probe also tells how long the queue is (nextClaimLimit).
	BatchLimit int
	// MinClaim is the smallest limit a claim is sent with (Config.Workers,
	// at most BatchLimit; 0: every claim asks for BatchLimit).
	MinClaim int
}

// claimer runs the configured claim strategy. It is not safe for concurrent
// use: each claim the scanner keeps in flight has its own.
type claimer struct {
	p         claimerParams
	lastEmpty bool
	lastFull  bool // the last claim filled its batch: the queue is long
	lastSize  int  // jobs the last claim took
	// next is the limit the next claim asks for (nextClaimLimit), before
	// the free slots cap it; 0 before the first claim.
	next int
}

func newClaimer(p claimerParams) *claimer { return &claimer{p: p, lastEmpty: true} }

// startDrainLike sets c up as a further claim lane of a drain that first
// claimed with first: the queue is known to be long, so c claims without
// probing and waits for as many slots as first's last claim took.
func (c *claimer) startDrainLike(first *claimer) {
	c.lastEmpty, c.lastFull, c.lastSize, c.next = false, true, first.lastSize, first.next
}

// limit is the limit c's next claim asks for, before the free slots cap
// it: MinClaim before its first claim (BatchLimit when MinClaim is 0).
func (c *claimer) limit() int {
	if c.p.MinClaim <= 0 {
		return c.p.BatchLimit
	}
	if c.next == 0 {
		return min(c.p.BatchLimit, c.p.MinClaim)
	}
	return c.next
}

// nextClaimLimit is the limit of the claim after one that was sent with
// limit asked and took got jobs, when the last limit computed was prev and
// a probe just before it saw probed due jobs (0: no probe): twice what it
// took, at least minClaim, at most batchLimit — so a claim follows the
// backlog — except that a full claim (got == asked: the queue is at least
// that long) never lowers the limit below prev or below what its probe saw.
// A full claim is often capped by the free slots rather than by the queue
// (the first claim after a quiet spell gets only the free workers, the run
// queue offering places only once handlers have returned): sizing the next
// one by it alone made every replica ramp up from 50 jobs in doublings, one
// claim round trip each. With 8 replicas on 2 cores a claim round trip
// under load took 0.3–2 s, the ramp 50 → 1,600 took 2.7 s of a 5 s bench
// window, and claims took 284–670 jobs on average against 1,222–1,705 on
// 1 replica (docs/bench.md, "Replicas that share a backlog"). A short
// claim (got < asked: the queue was shorter than asked) falls back to
// twice what it took, as before, and an empty one to minClaim.
func nextClaimLimit(asked, got, prev, probed, minClaim, batchLimit int) int {
	if minClaim <= 0 {
		return batchLimit
	}
	n := max(minClaim, 2*got)
	if got > 0 && got >= asked {
		n = max(n, prev, probed)
	}
	return min(batchLimit, n)
}

// slotWaited reports a claim's wait for a claim slot (EventClaimSlotWait).
func (c *claimer) slotWaited(waited time.Duration, timedOut bool) {
	if c.p.Events == nil {
		return
	}
	result := "acquired"
	if timedOut {
		result = "timed_out"
	}
	c.p.Events.emit(Event{Kind: EventClaimSlotWait, Duration: waited, Result: result})
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
	probed := 0 // due jobs the probe saw (skiplocked, after an empty claim)
	claim := jobq.ClaimParams{Owner: p.Owner, Limit: n, Lease: p.Lease, Slots: p.Slots, OnSlotWait: c.slotWaited}
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
			// The probe counts up to BatchLimit due jobs (at least 1): on an
			// empty queue it costs what a LIMIT 1 read costs, and on a queue
			// that just filled it tells the next claims how long it is.
			var probe jobq.IdleProbe
			probe, err = withRetryV(ctx, p.Retry, "claim.probe", claimMaxAttempts, func() (jobq.IdleProbe, error) {
				return p.Store.JobIdleProbe(ctx, max(1, p.BatchLimit))
			})
			if err == nil && p.ScheduledFunc != nil {
				p.ScheduledFunc(probe.Scheduled, time.Now())
			}
			if err != nil || probe.Due == 0 {
				break
			}
			probed = probe.Due
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
	c.next = nextClaimLimit(n, len(got.jobs), c.next, probed, p.MinClaim, p.BatchLimit)
	p.Events.emit(Event{Kind: EventClaimed, Jobs: got.jobs, Conflicts: got.conflicts})
	return got.jobs, nil
}
