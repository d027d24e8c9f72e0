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
	// Due counts the WAITING jobs of lane 0 whose type is not paused or
	// limited that are due (what the scan would claim), up to the probe's
	// limit.
	Due int
	// Scheduled is the earliest SCHEDULED run_at and the database clock.
	Scheduled ScheduledNext
}
