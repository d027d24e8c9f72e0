package jobq

import (
	"encoding/json"
	"time"
)

// Bounds of what a run reports besides its outcome (docs/workers.md).
const (
	// MaxOutputBytes is the largest output of one attempt: a JSON value of
	// at most 65,536 bytes.
	MaxOutputBytes = 65536
	// MaxOutputDepth is how deep an output may nest objects and arrays:
	// 100, as params (a child reads its parents' outputs as it reads its
	// params, and a worker's JSON decoder need not take more).
	MaxOutputDepth = 100
	// MaxLogBytes is the most log an attempt keeps: 65,536 bytes in all.
	MaxLogBytes = 65536
	// MaxLogLineBytes is the longest log line: 4,096 bytes.
	MaxLogLineBytes = 4096
	// MaxProgressMessageRunes is the longest progress message.
	MaxProgressMessageRunes = 256
)

// Lanes say who runs a job (job_queue.lane): the replicas' own handlers or
// remote workers.
const (
	LaneLocal  = 0
	LaneRemote = 1
)

// WorkerOwnerPrefix starts job_queue.owner of a run held by a remote worker:
// "worker:<worker_id>".
const WorkerOwnerPrefix = "worker:"

// RemoteClaimParams configures a remote worker's fetch claim.
type RemoteClaimParams struct {
	Owner string   // "worker:<worker_id>"
	Types []string // the job types the worker takes (all remote)
	Limit int
	Lease time.Duration
	// Nonce is the claim's lease nonce (16 random bytes), stored on every
	// row it claims; task tokens derive their secrets from it.
	Nonce []byte
}

// TokenState is what a task token is checked against: one job row's run.
type TokenState struct {
	ID              uint64
	JobType         string
	Attempt         int
	Status          JobState
	Nonce           []byte
	CancelRequested bool
	RetryTimes      int
	MaxRetry        int
	RunAt           time.Time
	LeaseUntil      *time.Time
	Owner           string
	HasChildren     bool
	ConcurrencyKey  string
	// WorkflowID is the job's workflow (0: none), where a success's spawn
	// adds its jobs.
	WorkflowID uint64
	// Timeout is the job's per-attempt timeout (timeout_ms; 0: none) and
	// Running how long this run has gone on, from its claim's started_at
	// to now on the database clock.
	Timeout time.Duration
	Running time.Duration
}

// LeaseRenewal is the answer of a fenced renewal for one run.
type LeaseRenewal struct {
	Fence
	Renewed         bool
	CancelRequested bool
	LeaseUntil      time.Time // database clock; zero unless renewed
}

// LogLine is one line of an attempt's log.
type LogLine struct {
	Seq  int
	Line string
	Time time.Time
}

// RunReport is a run's progress report.
type RunReport struct {
	Fence
	Progress float64
	Message  string
}

// WorkerRuns is how many runs one worker holds (RUNNING rows it owns).
type WorkerRuns struct {
	WorkerID string
	Runs     int
}

// JobOutput is a job's output: that of the attempt that succeeded.
type JobOutput = json.RawMessage

// Own reports whether o is an outcome a run writes itself (SUCCESS, FAILED,
// CANCELED, RELEASED) rather than one written about it (LEASE_EXPIRED,
// STALE) or none.
func (o Outcome) Own() bool {
	switch o {
	case OutcomeSuccess, OutcomeFailed, OutcomeCanceled, OutcomeReleased:
		return true
	}
	return false
}

// JSONDepth returns how deep the valid JSON b nests objects and arrays (0
// for a scalar).
func JSONDepth(b []byte) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}
