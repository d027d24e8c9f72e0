package scheduler

import (
	"time"

	"github.com/jobq/jobq"
)

// The timings below are all derived from the lease, and each encodes one
// rule of the lease design (docs/architecture.md, "The scheduler loop"). They are named
// here, once, so that a change to one is a change to the rule it states.

// heartbeatIntervalFor is the default HeartbeatInterval: Lease/3.
// Rule: a run survives two consecutive failed renewals — the third beat
// still lands inside the lease — so one slow or lost statement never costs
// a healthy run its job.
func heartbeatIntervalFor(lease time.Duration) time.Duration { return lease / 3 }

// leaseGuardMargin is how long before its local lease deadline a run's
// guard timer cancels the handler when no renewal moved the deadline:
// Lease/5. Rule: a handler stops while its lease is still valid, so no
// other replica can hold the job while this one still works on it. The
// margin covers the gap between the local clock and the database's stamp
// (the local deadline counts from when the claim or renewal was sent, before
// the database set lease_until) and the handler's time to notice its
// cancelled context.
func leaseGuardMargin(lease time.Duration) time.Duration { return lease / 5 }

// heartbeatStallThreshold is how late a heartbeat may begin before the
// replica reports a stall: leaseGuardMargin. Rule: a beat later than that
// eats into the margin that keeps a run's handler inside its lease, so a
// lease lost with no database trouble is always preceded, or followed, by
// the replica saying it was not run in time.
func heartbeatStallThreshold(lease time.Duration) time.Duration { return leaseGuardMargin(lease) }

// completionWriteTimeout bounds one try of an outcome write past the runs'
// retry deadline (outcomeWriter.write): 2×Lease. Rule: a statement hung that
// long is moot — the lease expired and a rescuer has returned the job, so
// the write would only be refused as stale; give up and let the rescue stand.
func completionWriteTimeout(lease time.Duration) time.Duration { return 2 * lease }

// shutdownCancelWait is how long Stop waits for handlers to return after
// cancelling them at ShutdownTimeout: one Lease. Rule: a handler that ignores
// cancellation for a whole lease has lost its job to the rescuer anyway;
// Stop returns an error instead of waiting for it forever.
func shutdownCancelWait(lease time.Duration) time.Duration { return lease }

// firstLeaseDeadline is a freshly claimed run's local lease deadline: the
// moment its claim began (base; now when unknown) + Lease. Rule: the local
// estimate must never be later than the database's lease_until, which the
// claim's UPDATE stamped after base. Counting from dispatch instead made a
// claim that took long to return — a cas claim waiting on a slow peer's
// locks for seconds after winning a row — keep a local deadline seconds
// past lease_until: the run worked on after its lease expired and was
// rescued meanwhile. Now its guard fires in time (at once, when the claim
// took longer than the lease less the guard's margin).
func firstLeaseDeadline(base time.Time, lease time.Duration) time.Time {
	if base.IsZero() {
		base = time.Now()
	}
	return base.Add(lease)
}

// claimStamped runs one claim try and stamps the jobs it returns with when
// the try began (ClaimedJob.LeaseBase).
func claimStamped(fn func() ([]jobq.ClaimedJob, error)) ([]jobq.ClaimedJob, error) {
	began := time.Now()
	jobs, err := fn()
	for i := range jobs {
		jobs[i].LeaseBase = began
	}
	return jobs, err
}
