package jobq

import (
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxErrorRunes is the longest error text stored in last_error and
// job_execution.error (columns are VARCHAR(2048)); longer text is cut.
const MaxErrorRunes = 2000

// SanitizeText makes s storable in a utf8mb4 VARCHAR column: invalid UTF-8
// becomes U+FFFD, NUL bytes are dropped, and the text is cut to max runes
// (with a trailing "…"). Bookkeeping must never fail because of an error
// message's bytes.
func SanitizeText(s string, max int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "")
	}
	if utf8.RuneCountInString(s) > max {
		r := []rune(s)
		s = string(r[:max-1]) + "…"
	}
	return s
}

// Job is one row of job_queue. Times are UTC. The API shows it as
// apitype.Job; this type carries no wire format.
type Job struct {
	ID              uint64
	JobKey          string
	JobType         string
	Params          json.RawMessage
	Status          JobState
	Priority        int
	RetryTimes      int
	MaxRetry        int
	TimeoutMs       int
	RunAt           time.Time
	Attempt         int
	Owner           string
	LeaseUntil      *time.Time
	LastError       string
	StartedAt       *time.Time
	FinishedAt      *time.Time
	CancelRequested bool
	CreateTime      time.Time
	UpdateTime      time.Time
	RequestHash     string
	// WorkflowID is the job's workflow (0 outside workflows) and
	// BlockedParents, for a BLOCKED job, how many parents it still waits for.
	WorkflowID     uint64
	BlockedParents int
	// UniqueUntil, when set, is when the job stops holding its job_key
	// (database clock); UniqueWhileActive, that it holds it only until it
	// is terminal. Neither: the key is held for good (the default).
	// KeyReleased reports that a later submit of the key released it (a
	// newer job holds the key now).
	UniqueUntil       *time.Time
	UniqueWhileActive bool
	KeyReleased       bool
	// ConcurrencyKey is the job's concurrency key ("" for none): at most
	// its key's limit of jobs with the key are admitted (WAITING,
	// SCHEDULED or RUNNING) at once; the others wait PARKED.
	ConcurrencyKey string
	// RateKey is the job's rate key ("" for none): under a per-key rate
	// limit of its type, the jobs of one key share that key's window
	// (docs/operations.md, "Rate limits").
	RateKey string
	// Output is the output of the attempt that succeeded (JobGet fills it
	// for a SUCCESS job); nil when there is none.
	Output json.RawMessage
}

// Terminal reports whether the job is SUCCESS, FAILED or CANCELED.
func (j Job) Terminal() bool {
	return j.Status.Terminal()
}

// Execution is one row of job_execution: one attempt of one job.
type Execution struct {
	JobID      uint64
	Attempt    int
	Owner      string
	StartedAt  time.Time
	FinishedAt *time.Time
	Outcome    Outcome
	Error      string
	// Output is the attempt's output (a JSON value); nil when it has none.
	Output json.RawMessage
	// Progress is the attempt's last progress report (0–1) and its message;
	// nil when it reported none.
	Progress        *float64
	ProgressMessage string
}

// SubmitParams is a validated submit. Params must already be a compact JSON
// object and RequestHash the hash of the canonical request (service package).
type SubmitParams struct {
	JobKey      string
	JobType     string
	Params      string
	RequestHash string
	Priority    int
	MaxRetry    int
	TimeoutMs   int
	RunAt       *time.Time // nil: due now on the database clock
	// UniqueForMs > 0 holds the key only that long after the insert (on
	// the database clock); UniqueWhileActive only until the job is
	// terminal (both: until the first of the two). After that a submit of
	// the same key creates a new job. Zero and false: held for good.
	UniqueForMs       int64
	UniqueWhileActive bool
	// ConcurrencyKey is the job's concurrency key ("" for none) and
	// ConcurrencyLimit its key's limit, 1..MaxConcurrencyLimit (the newest
	// submit's limit is the key's; 0 means 1).
	ConcurrencyKey   string
	ConcurrencyLimit int
	// RateKey is the job's rate key ("" for none, 1..MaxRateKeyRunes
	// characters): a per-key rate limit of its type counts the starts of
	// each key on their own.
	RateKey string
}

// Windowed reports whether the submit holds its key only for a window.
func (p SubmitParams) Windowed() bool { return p.UniqueForMs > 0 || p.UniqueWhileActive }

// MaxConcurrencyLimit is the largest limit a concurrency key may have.
const MaxConcurrencyLimit = 1000

// MaxConcurrencyKeyRunes is the longest concurrency key
// (job_queue.concurrency_key is VARCHAR(128)).
const MaxConcurrencyKeyRunes = 128

// MaxRateKeyRunes is the longest rate key (job_queue.rate_key is
// VARCHAR(128)).
const MaxRateKeyRunes = 128

// SubmitOutcome is what a batch submit (JobSubmitMany) did with one job.
type SubmitOutcome struct {
	// ID is the created job's id, or the id of the job that already had
	// the job_key.
	ID uint64
	// Created is true when this batch inserted the job.
	Created bool
	// Conflict is true when job_key already named a job submitted with a
	// different request (RequestHash); nothing was written for it.
	Conflict bool
}

// ListParams filters and pages JobList. Jobs come newest first (id DESC).
type ListParams struct {
	Status  JobState // "" for any
	JobType string   // "" for any
	// KeyPrefix keeps only jobs whose job_key starts with it; "" for any.
	KeyPrefix string
	BeforeID  uint64 // keyset cursor: only ids below it; 0 for the first page
	Limit     int    // page size, 1..1000
}

// Fence identifies one run of one job: the job id and its attempt, the
// fencing token every write of that run carries.
type Fence struct {
	ID      uint64
	Attempt int
}

// ClaimedJob is a job this replica just claimed: status RUNNING, owner set,
// attempt already incremented.
type ClaimedJob struct {
	ID         uint64
	JobKey     string
	JobType    string
	Params     json.RawMessage
	Priority   int
	RetryTimes int
	MaxRetry   int
	TimeoutMs  int
	RunAt      time.Time // when the job became due
	Attempt    int
	LeaseUntil time.Time // database clock
	StartedAt  time.Time // database clock, set by the claim
	CreateTime time.Time
	// HasChildren is true for a workflow job other jobs wait for: its
	// completion unblocks or cancels them (Completion.HasChildren).
	HasChildren bool
	// WorkflowID is the job's workflow; 0 outside workflows.
	WorkflowID uint64
	// ConcurrencyKey is the job's concurrency key ("" for none): its end
	// frees a slot of the key (Completion.ConcurrencyKey).
	ConcurrencyKey string
	// LeaseBase is when the claim that took the job began, on the
	// replica's clock (set by the scheduler), or when the statement that
	// stamped the lease was sent (set by the store): the database stamped
	// the lease later, so LeaseBase + Lease is never later than lease_until,
	// however long the claim took to return.
	LeaseBase time.Time
}

// Fence returns the run's fencing token.
func (c ClaimedJob) Fence() Fence { return Fence{ID: c.ID, Attempt: c.Attempt} }

// ClaimParams configures one claim.
type ClaimParams struct {
	Owner string        // replica id written to job_queue.owner
	Limit int           // at most this many jobs (the free worker slots, ≤ BatchLimit)
	Lease time.Duration // lease_until = NOW(6) + Lease
	// Slots, for a skiplocked claim, is the claim gate: the claim first
	// takes one of the cluster's claim slots 0..Slots-1 (a claim_gate row
	// lock held to its COMMIT), so at most Slots such claims run at once
	// across the replicas of one database; it waits up to
	// store.ClaimSlotWait (1 s) when all are held, then claims without one.
	// 0: no gate; at most ClaimSlotsMax.
	Slots int
	// OnSlotWait, when set, is called after a claim found every slot held
	// and waited for one: waited is how long, timedOut that none came free
	// (the claim then ran without a slot).
	OnSlotWait func(waited time.Duration, timedOut bool)
}

// ClaimSlotsMax is how many claim slots the claim_gate table holds
// (migration 020): ClaimParams.Slots above it count as this many.
const ClaimSlotsMax = 64

// ClaimCASParams configures the write half of a cas claim.
type ClaimCASParams struct {
	ClaimParams
	// Candidates come from JobScanAvailable; each is claimed by
	// UPDATE … WHERE id=? AND status='WAITING' AND attempt=?.
	Candidates []Fence
}

// LeaseRenewParams renews the leases of one owner's in-flight runs.
type LeaseRenewParams struct {
	Owner string
	Lease time.Duration
	IDs   []uint64
}

// FenceState is the current holder of a job, for fencing in-flight runs.
type FenceState struct {
	ID              uint64
	Attempt         int
	Status          JobState
	Owner           string
	CancelRequested bool
}

// Completion is the outcome of one run, written fenced by its attempt.
type Completion struct {
	Fence
	// JobType is the run's job type (metrics label; "" when not known).
	JobType string
	// Outcome is OutcomeSuccess, OutcomeFailed, OutcomeCanceled or
	// OutcomeReleased. A job whose cancel was requested ends CANCELED
	// whatever the outcome.
	Outcome Outcome
	// Error is the handler's error text (sanitised and cut to MaxErrorRunes).
	Error string
	// Retry, for OutcomeFailed/OutcomeCanceled: true re-queues the job as
	// WAITING after Backoff with retry_times+1; false ends it FAILED.
	Retry   bool
	Backoff time.Duration
	// Output is the run's output, a JSON value of at most MaxOutputBytes,
	// recorded in the attempt's execution row with its outcome; nil for none.
	Output json.RawMessage
	// HasChildren is ClaimedJob.HasChildren: the completion also settles
	// the job's workflow children in its transaction. It is a hint for the
	// batched path (a wrong one costs a split, never a child).
	HasChildren bool
	// ConcurrencyKey is ClaimedJob.ConcurrencyKey: a completion that ends
	// the job frees its key's slot and admits the key's next parked job in
	// its transaction. The key never changes after submit; for the batched
	// path it is also a hint (a wrong one costs a split, never a slot).
	ConcurrencyKey string
	// Spawn adds jobs to the run's workflow with a successful completion
	// (dynamic fan-out); nil for none.
	Spawn *Spawn
	// DueAt is the claimed job's run_at (ClaimedJob.RunAt), recorded as the
	// attempt's due_at. A failure that retries moves run_at before its
	// execution row is written, so it needs DueAt to write the row after
	// the job update; zero writes the row first instead.
	DueAt time.Time
}
