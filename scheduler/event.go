package scheduler

import (
	"sync/atomic"
	"time"

	"github.com/jobq/jobq"
)

// EventKind names what an Event reports.
type EventKind string

// The events a scheduler emits. Each names the Event fields it sets.
const (
	// EventClaimed: a claim came back (Jobs, possibly none; Conflicts: cas
	// rows another replica won). The limited claim reports its jobs too.
	EventClaimed EventKind = "claimed"
	// EventScanned: a claim a scan sent ended (Duration: its round trip; N:
	// the jobs it took).
	EventScanned EventKind = "scanned"
	// EventScanDone: a scan ended, every claim it sent back and its jobs
	// dispatched (N: the jobs it dispatched).
	EventScanDone EventKind = "scan_done"
	// EventClaimFailed: a claim failed after its retries (Err); the next
	// scan tries again.
	EventClaimFailed EventKind = "claim_failed"
	// EventStarted: a claimed job's handler is about to run (Fence; Job:
	// the handler's job, read it, never change it; Duration: how long the
	// run waited in the run queue for a worker, 0 when one was free).
	EventStarted EventKind = "started"
	// EventGivenBack: the run queue released a run unstarted, back to
	// WAITING for any replica without spending a retry, because it waited
	// longer than RunQueueWait (Fence; Duration: how long it waited). Its
	// EventCompleted (Outcome released) follows.
	EventGivenBack EventKind = "given_back"
	// EventCompleted: a run's completion was written (Completion; Applied is
	// false for a stale completion the fence refused). Every claimed run
	// ends in exactly one EventCompleted or EventCompletionFailed.
	EventCompleted EventKind = "completed"
	// EventCompletionFailed: a run's completion could not be written after
	// retries (Completion, Err); its lease will expire and the job will be
	// rescued.
	EventCompletionFailed EventKind = "completion_failed"
	// EventRenewed: a heartbeat ended (N: the runs whose leases it renewed).
	EventRenewed EventKind = "renewed"
	// EventRenewalFailed: a heartbeat failed after retries (Err), or
	// skipped runs whose row another transaction held, leaving their leases
	// unrenewed (N: those runs; Err: errRowsBusy).
	EventRenewalFailed EventKind = "renewal_failed"
	// EventHeartbeatStall: a heartbeat began later than scheduled by more
	// than Lease/5 (Duration: how late); the process was not run in time.
	EventHeartbeatStall EventKind = "heartbeat_stall"
	// EventLeaseLost: a running handler was cancelled because its run lost
	// its lease (Fence).
	EventLeaseLost EventKind = "lease_lost"
	// EventRescued: a rescue pass ended (Fences: the expired runs it
	// returned, possibly none; N: the candidates it could not return —
	// their row held by another transaction, or completed, renewed or
	// rescued since the candidates were read).
	EventRescued EventKind = "rescued"
	// EventPromoted: a promoter pass ended (N: the SCHEDULED jobs it made
	// WAITING, possibly 0).
	EventPromoted EventKind = "promoted"
	// EventAdopted: a run whose claim committed although its answer was
	// lost was found (JobHeldBy) and dispatched (Fence).
	EventAdopted EventKind = "adopted"
	// EventDBError: a database operation failed, retried or not (Op, Err).
	EventDBError EventKind = "db_error"
	// EventDBRetry: a database operation is retried after a transient
	// error (Op, Err).
	EventDBRetry EventKind = "db_retry"
	// EventOpsRefreshed: the periodic planner re-read the job type controls
	// and schedules (N: the schedules it knows).
	EventOpsRefreshed EventKind = "ops_refreshed"
	// EventPeriodicFired: a periodic schedule was fired, or its fire failed
	// (Name, Fire, Err; Misfire: the instants it found missed).
	EventPeriodicFired EventKind = "periodic_fired"
	// EventPeriodicReleased: the periodic planner released the parked run
	// of a queue_one schedule whose previous run ended (Name).
	EventPeriodicReleased EventKind = "periodic_released"
	// EventCleaned: a retention pass ended (Purged).
	EventCleaned EventKind = "cleaned"
	// EventRateHeld: the limited claim's probe found due jobs of a job type
	// (Name) held back by its full rate window, which opens in Duration; the
	// scanner is woken then.
	EventRateHeld EventKind = "rate_held"
	// EventClaimSlotWait: a skiplocked claim found every claim slot held
	// (Config.ClaimSlots) and waited Duration for one; Result "acquired"
	// (a slot came free) or "timed_out" (none did within
	// store.ClaimSlotWait: the claim ran without one).
	EventClaimSlotWait EventKind = "claim_slot_wait"
	// EventFetchClaimed: a remote worker's fetch claimed jobs (Jobs).
	// EventClaimed is not emitted for them: the runs are the worker's, and
	// may be completed through another replica.
	EventFetchClaimed EventKind = "fetch_claimed"
	// EventFetched: a remote worker's fetch answered (Result: "jobs",
	// "empty" when its wait passed, "canceled" when the client went away,
	// or "error"; Duration: how long it was open; N: the jobs it returned;
	// Err).
	EventFetched EventKind = "fetched"
	// EventRemoteHeartbeat: a remote heartbeat answered N task tokens in
	// state Result ("renewed", "cancel_requested", "lost"); one event per
	// state.
	EventRemoteHeartbeat EventKind = "remote_heartbeat"
	// EventRemoteCompleted: a remote completion was answered (Result:
	// "applied", "stale", "conflict" or "forbidden"; Err). The run's
	// EventCompleted comes from the write itself.
	EventRemoteCompleted EventKind = "remote_completed"
)

// Event is one thing that happened in a replica's scheduler. Kind says
// which fields are set (see the EventKind constants); the others are zero.
// Slices in an Event are shared with the scheduler: observers must not
// modify them.
type Event struct {
	Kind EventKind
	// Jobs are the jobs of a claim (EventClaimed).
	Jobs []jobq.ClaimedJob
	// Conflicts is a cas claim's rows another replica won (EventClaimed).
	Conflicts int
	// N counts what the event is about (EventScanned, EventRenewed,
	// EventRenewalFailed, EventPromoted, EventOpsRefreshed, EventFetched,
	// EventRemoteHeartbeat, EventRescued's skipped candidates).
	N int
	// Duration is a claim's round trip (EventScanned), a heartbeat's
	// lateness (EventHeartbeatStall), a run's wait in the run queue
	// (EventStarted, EventGivenBack), a fetch's (EventFetched), the time
	// until a rate window opens (EventRateHeld) or a claim's wait for a
	// claim slot (EventClaimSlotWait).
	Duration time.Duration
	// Fence names one run (EventStarted, EventGivenBack, EventLeaseLost,
	// EventAdopted).
	Fence jobq.Fence
	// Job is the handler's job (EventStarted): read it, never change it.
	Job *Job
	// Result names a remote worker request's answer (EventFetched,
	// EventRemoteHeartbeat, EventRemoteCompleted) or how a claim slot wait
	// ended (EventClaimSlotWait).
	Result string
	// Fences are the runs of a rescue pass (EventRescued).
	Fences []jobq.Fence
	// Completion is a run's outcome (EventCompleted,
	// EventCompletionFailed); Applied is false for a refused (stale) one.
	Completion jobq.Completion
	Applied    bool
	// Op names a database operation (EventDBError, EventDBRetry).
	Op string
	// Err is the error of a failed operation.
	Err error
	// Name and Fire are a periodic schedule's fire (EventPeriodicFired);
	// Name alone the schedule of EventPeriodicReleased, or the job type
	// of EventRateHeld.
	Name string
	Fire jobq.PeriodicFireResult
	// Misfire is what the fire found missed (EventPeriodicFired).
	Misfire PeriodicMisfire
	// Purged is a retention pass's result (EventCleaned).
	Purged jobq.PurgeResult
}

// Stale reports whether e is a completion the fence refused (the run had
// lost its lease).
func (e Event) Stale() bool { return e.Kind == EventCompleted && !e.Applied }

// Observer receives a replica's events. Observe runs on scheduler
// goroutines, may be called concurrently (a draining replica keeps up to
// ClaimsInFlight claims running at once; every handler completes on its
// own) and must not block for long. Stats, the Prometheus metrics
// (metrics.Metrics.Observer) and tests (scheduler/schedulertest) are
// observers.
type Observer interface {
	Observe(e Event)
}

// ObserverFunc adapts a function to an Observer.
type ObserverFunc func(e Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// Observers returns an Observer handing each event to every non-nil one of
// obs in order (nil when there is none).
func Observers(obs ...Observer) Observer {
	var out multiObserver
	for _, o := range obs {
		if o != nil {
			out = append(out, o)
		}
	}
	switch len(out) {
	case 0:
		return nil
	case 1:
		return out[0]
	}
	return out
}

type multiObserver []Observer

func (m multiObserver) Observe(e Event) {
	for _, o := range m {
		o.Observe(e)
	}
}

// emitter hands a service's events to the scheduler (Scheduler.emit: the
// stats, then Config.Observer). A nil emitter drops them: a service built
// alone in a test without one.
type emitter func(Event)

func (em emitter) emit(e Event) {
	if em != nil {
		em(e)
	}
}

// stats counts events for Stats.
type stats struct {
	claimed, claimConflicts, claimErrors, completed, succeeded, failed, retried,
	stale, rescued, leaseLost, released, givenBack, adopted, dbRetries, heartbeatFails, heartbeatStalls, scans, promoted atomic.Int64
}

// Observe counts e.
func (st *stats) Observe(e Event) {
	switch e.Kind {
	case EventClaimed:
		st.claimed.Add(int64(len(e.Jobs)))
		st.claimConflicts.Add(int64(e.Conflicts))
	case EventScanned:
		st.scans.Add(1)
	case EventClaimFailed:
		st.claimErrors.Add(1)
	case EventCompleted:
		st.completed.Add(1)
		c := e.Completion
		switch {
		case !e.Applied:
			st.stale.Add(1)
		case c.Outcome == jobq.OutcomeSuccess:
			st.succeeded.Add(1)
		case c.Outcome == jobq.OutcomeReleased:
			st.released.Add(1)
		default:
			st.failed.Add(1)
			if c.Retry {
				st.retried.Add(1)
			}
		}
	case EventRenewalFailed:
		st.heartbeatFails.Add(1)
	case EventHeartbeatStall:
		st.heartbeatStalls.Add(1)
	case EventLeaseLost:
		st.leaseLost.Add(1)
	case EventRescued:
		st.rescued.Add(int64(len(e.Fences)))
	case EventPromoted:
		st.promoted.Add(int64(e.N))
	case EventGivenBack:
		st.givenBack.Add(1)
	case EventAdopted:
		st.adopted.Add(1)
	case EventDBRetry:
		st.dbRetries.Add(1)
	}
}

// emit hands e to the stats, then to Config.Observer.
func (s *Scheduler) emit(e Event) {
	s.stats.Observe(e)
	if s.cfg.Observer != nil {
		s.cfg.Observer.Observe(e)
	}
}
