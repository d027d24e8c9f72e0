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
