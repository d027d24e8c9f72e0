package scheduler

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/store"
)

// OutcomeRetryMaxBackoff caps one backoff between tries of an outcome write,
// so a write is retried within a second of the database accepting writes again.
const OutcomeRetryMaxBackoff = time.Second

// outcomeRefusalLimit bounds, in leases, how long an outcome write goes on
// being retried past its run's lease deadline while the database answers
// that it refuses writes (see writeOutcome).
const outcomeRefusalLimit = 10

// writeOutcome runs fn, an outcome write (success, failure, release or the
// stale marking that goes with them; batched or transactional) for the runs
// fences, and retries transient errors with capped backoff (DBRetry.Initial
// doubling up to OutcomeRetryMaxBackoff, full jitter) for as long as the runs
// hold their leases: until the latest of their lease deadlines minus the
// heartbeat's guard margin (Lease/5). The deadline is re-read before every
// try, so each renewal the heartbeat makes meanwhile moves it.
//
// Past that deadline the write is retried only while the server answers
// that it refuses writes (read-only, a Galera node not ready: Cause
// "read_only" or "wsrep_not_ready"), for at most outcomeRefusalLimit leases:
// no rescue can commit on a server that refuses writes, and the write is
// fenced by attempt, so a late try either records the outcome or is refused
// as stale — never both. Any other error past the deadline ends the tries.
//
// Each try gets a context ending two leases after the current deadline (or
// after now, if later), so a hung connection cannot hold the completer for
// ever; a try cut short that way is moot, as the job will have been rescued.
// Sabotage.NoOutcomeRetry (and DBRetry.Disabled) make one try only.
func (s *Scheduler) writeOutcome(op string, fences []jobq.Fence, fn func(ctx context.Context) error) error {
	backoff := s.cfg.DBRetry.Initial
	if backoff <= 0 {
		backoff = 10 * time.Millisecond
	}
	start := time.Now()
	for {
		deadline := s.outcomeDeadline(fences)
		ctx, cancel := context.WithDeadline(context.Background(), later(deadline, time.Now()).Add(2*s.cfg.Lease))
		err := fn(ctx)
		cancel()
		if err != nil && s.cfg.Hooks.DBErrorFunc != nil {
			s.cfg.Hooks.DBErrorFunc(op, err)
		}
		if err == nil || s.cfg.Sabotage.NoOutcomeRetry || s.cfg.DBRetry.Disabled || !store.IsRetryable(err) {
			return err
		}
		now := time.Now()
		if now.After(s.outcomeDeadline(fences)) && !(refusesWrites(err) && now.Sub(start) < outcomeRefusalLimit*s.cfg.Lease) {
			return err
		}
		s.stats.dbRetries.Add(1)
		s.log.Debug("retrying outcome write", "op", op, "runs", len(fences), "cause", store.Cause(err), "err", err)
		time.Sleep(time.Duration(rand.Int64N(int64(backoff))) + 1)
		backoff = min(2*backoff, OutcomeRetryMaxBackoff)
	}
}

// refusesWrites reports whether err says the server is up but refuses
// writes: read-only or a Galera node that is not ready.
func refusesWrites(err error) bool {
	c := store.Cause(err)
	return c == "read_only" || c == "wsrep_not_ready"
}

// outcomeDeadline is the latest lease deadline among fences' runs, minus the
// guard margin (Lease/5); now when none of them is held any more.
func (s *Scheduler) outcomeDeadline(fences []jobq.Fence) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d time.Time
	for _, f := range fences {
		if r := s.runs[f]; r != nil && r.leaseDeadline.After(d) {
			d = r.leaseDeadline
		}
	}
	if d.IsZero() {
		return time.Now()
	}
	return d.Add(-s.cfg.Lease / 5)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
