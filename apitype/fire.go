package apitype

import (
	"time"

	"github.com/jobq/jobq"
)

// FireEntry is one row of a schedule's fire ledger: what became of one
// due instant (GET /v1/periodic/{name}/history). Times are UTC.
type FireEntry struct {
	// Instant is the scheduled instant.
	Instant time.Time `json:"instant"`
	// Fate is "fired" (enqueued on time), "late" (enqueued after the misfire
	// threshold) or "skipped" (did not run; Reason says why).
	Fate string `json:"fate"`
	// JobID is the instant's job; WorkflowID the workflow a workflow
	// schedule started. Absent for a skipped instant.
	JobID      uint64 `json:"job_id,omitempty"`
	WorkflowID uint64 `json:"workflow_id,omitempty"`
	// Reason is "misfire" or "overlap" for a skipped instant, absent otherwise.
	Reason string `json:"reason,omitempty"`
	// LateMs is how long after the instant the fire was recorded, in ms.
	LateMs int64 `json:"late_ms"`
	// Covers is how many instants the row stands for: 1, or more for the
	// summary row of a long outage (the instants from Instant up to the
	// next newer row, all skipped).
	Covers int64 `json:"covers"`
}

// FireHistory is one page of a schedule's fire ledger, newest instant
// first. NextBefore, when set, is the before= of the next (older) page.
type FireHistory struct {
	Name       string      `json:"name"`
	History    []FireEntry `json:"history"`
	NextBefore *time.Time  `json:"next_before,omitempty"`
}

// FireEntryFrom converts a ledger row.
func FireEntryFrom(e jobq.FireEntry) FireEntry {
	return FireEntry{Instant: e.Instant, Fate: e.Fate, JobID: e.JobID, WorkflowID: e.WorkflowID,
		Reason: e.Reason, LateMs: e.LateMs, Covers: e.Covers}
}
