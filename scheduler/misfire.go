package scheduler

import "time"

// PeriodicMisfire is what one fire of a schedule found missed (the
// misfire policy's part of EventPeriodicFired): instants older than the
// misfire threshold that no replica fired in time. Replicas firing the same
// cursor report the same From.
type PeriodicMisfire struct {
	// Missed counts the missed instants (at most cronplan.MissedMax); 0
	// when the fire was on time.
	Missed int
	// Skipped counts those that will never run: all of them under the skip
	// policy, all but the latest under once (which runs it late).
	Skipped int
	// From and To are the earliest and latest missed instant.
	From, To time.Time
	// Policy is the schedule's misfire policy (jobq.MisfireSkip, MisfireOnce).
	Policy string
}
