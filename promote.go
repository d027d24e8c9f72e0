package jobq

import "time"

// ScheduledNext is the promoter's probe: when the earliest SCHEDULED job is
// due and the database clock at the time of the read.
type ScheduledNext struct {
	// Next is the earliest run_at among SCHEDULED jobs; zero when none is.
	Next time.Time
	// DBNow is NOW(6) read in the same statement.
	DBNow time.Time
}

// IdleProbe is the idle scan's probe (store.JobIdleProbe): whether a job is
// due for the replicas' handlers, and the promoter's ScheduledNext, read in
// one statement.
type IdleProbe struct {
	// Due is true when at least one WAITING job of lane 0 whose type is
	// not paused or limited is due (what the scan would claim).
	Due bool
	// Scheduled is the earliest SCHEDULED run_at and the database clock.
	Scheduled ScheduledNext
}
