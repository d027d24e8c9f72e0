package checker

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Check names, used in Violation.Check and the report.
const (
	// CheckLost: an acknowledged job that is in job_queue but not terminal
	// at the end of the run.
	CheckLost = "lost"
	// CheckAckedMissing: a submit was acknowledged (2xx with a job id) but
	// job_queue has no job with that id and key afterwards — the database
	// lost an acknowledged commit (an async failover does this). Matched by
	// id and key, because a new primary may hand the lost id to another job.
	CheckAckedMissing  = "acknowledged_submit_missing"
	CheckStuck         = "stuck"
	CheckTxDuplicate   = "duplicated_tx_effects"
	CheckOverlap       = "overlapping_leases"
	CheckStaleAccepted = "stale_completions_accepted"
	CheckPhantom       = "phantom_jobs"
	CheckPoison        = "poison_not_failed"
	// CheckClaimedEarly: an attempt started before the job was due (its
	// execution's started_at < due_at, the run_at it was claimed at) — the
	// cas claim's ABA race: a job re-queued with a retry backoff between
	// another replica's read and its unguarded update.
	CheckClaimedEarly = "claimed_before_due"
	// CheckWorkAfterLoss: a run's work went on after its lease was lost —
	// its "end" effect is later than the loss (its rescue, or the next
	// attempt's claim) by more than WorkAfterLossTolerance, once any fault
	// that froze or cut off its replica at that moment is over.
	CheckWorkAfterLoss = "work_after_lease_lost"
	// CheckUnexplainedRescue: a run was rescued (LEASE_EXPIRED: neither its
	// completion nor its refusal was ever written) although no fault on its
	// replica or the database explains it — a live, connected replica
	// dropped the outcome (for example, a lost connection or a deadlock on
	// the completion that was not retried).
	CheckUnexplainedRescue = "unexplained_rescues"
	// CheckUnexplainedRelease: a run was handed back unfinished (RELEASED)
	// although neither a shutdown of its replica (a SIGTERM on its
	// incarnation, or the harness stopping every replica at the end) nor a
	// fault on its replica or the database explains it — for example a run
	// whose lease ran out while it waited in the run queue of a live,
	// connected replica (its queued lease was not renewed).
	CheckUnexplainedRelease = "unexplained_releases"
	// CheckMissingExecution: the execution rows of a job are not exactly one
	// per attempt that started — attempts 1 … attempt, less the in-flight
	// attempt of a RUNNING job (its row is written when its outcome is
	// known: completion, failure, release, rescue or stale refusal).
	CheckMissingExecution = "missing_executions"
	// CheckStatusVsLastExecution: a terminal job's status contradicts its
	// last execution's outcome (see statusVsLastExecution for the mapping) —
	// the audit trail says something the job row does not.
	CheckStatusVsLastExecution = "status_vs_last_execution"
	// CheckRerunAfterSuccess: an attempt finished its work successfully —
	// its "end" effect exists and its execution did not end FAILED or
	// CANCELED — and yet a later attempt of the job was claimed after that,
	// while no fault that can cost a live run its lease (Fault.excuses) hit
	// its replica or the database between the two claims. The finished
	// run's outcome write was dropped: a read-only database or a lost
	// connection that was not retried until the lease deadline.
	CheckRerunAfterSuccess = "rerun_after_success"
	// CheckFailedAfterSuccess: a job ended FAILED although one of its
	// attempts finished its work successfully (as above) before the job
	// ended, with no excusing fault between that attempt's claim and the end.
	CheckFailedAfterSuccess = "failed_after_success"
	// CheckLateCompletionAccepted: a remote worker's completion was
	// answered "applied" although its attempt had lost the job — the
	// attempt's execution was closed by a rescue (LEASE_EXPIRED) or a
	// refusal (STALE), or it has no execution row while a later attempt
	// does. A late completion must be refused (409 stale).
	CheckLateCompletionAccepted = "late_completion_accepted"
	// CheckAppliedTwice: one job's completions were applied twice — two
	// different outcomes answered "applied" for one attempt, or "applied"
	// successes for two different attempts. A repeated completion is
	// answered "applied" again only when it is the same outcome of the same
	// attempt, which changes nothing.
	CheckAppliedTwice = "completion_applied_twice"
	// CheckWorkerOverlap: two remote workers held one job's lease at once —
	// attempt k+1 of a worker claimed before attempt k of another worker
	// ended (its completion or its rescue).
	CheckWorkerOverlap = "worker_overlap"
	// CheckLostAfterAck: a completion answered "applied" whose job did not
	// end that way: its attempt's execution does not record that outcome
	// (success SUCCESS, failure FAILED, release RELEASED), or a success's
	// job did not end SUCCESS.
	CheckLostAfterAck = "lost_after_ack"
)

// ReadOnlyExcuse is how long a read-only fault must last, as a fraction
// of the lease, before it may cost a run its lease and so excuse a rescue
// or a re-run: 7·Lease/15 = Lease − Lease/3 (a run's last renewal may be a
// heartbeat interval old) − Lease/5 (the guard's margin). Shorter refusals
// are ridden out: outcome writes and renewals are retried until the lease
// deadline minus the margin.
func ReadOnlyExcuse(lease time.Duration) time.Duration { return lease * 7 / 15 }

// PoisonType is the job type that kills its replica (jobtypes.Poison).
const PoisonType = "poison"

// maxExamples caps the examples each violation lists.
const maxExamples = 10

// Result is the checker's verdict. Its JSON form is part of result.json
// (see chaos.ResultFile for the whole schema).
type Result struct {
	// Valid is true when no check found a violation.
	Valid bool `json:"valid"`
	// Violations lists each failed check with a count and examples; empty
	// when Valid.
	Violations []Violation `json:"violations"`
	Counts     Counts      `json:"counts"`
	// ExecutionsPerJob maps "executions of one job" to how many
	// acknowledged jobs had that many (1 is the norm; more means retries or
	// rescues).
	ExecutionsPerJob map[int]int `json:"executions_per_job"`
	// Pickup is pickup latency: first claim (attempt 1 started_at) minus
	// create_time, over acknowledged jobs.
	Pickup Percentiles `json:"pickup_latency"`
	// EndToEnd is terminal finished_at minus create_time.
	EndToEnd Percentiles `json:"end_to_end_latency"`
	// NonTx reports repeated non-transactional effects: the at-least-once
	// cost, not a violation.
	NonTx NonTxReport `json:"non_tx_effects"`
	// Faults has one entry per injected fault with its recovery figures.
	Faults []FaultResult `json:"faults"`
	// Timeline is throughput and backlog per TimelineStep since Start.
	Timeline []Point `json:"timeline"`
	// Schedules has one entry per periodic schedule of the run: its
	// instants and their fates as the fire checks found them.
	Schedules []ScheduleResult `json:"schedules,omitempty"`
}

// Violation is one failed check.
type Violation struct {
	Check    string   `json:"check"`
	Count    int      `json:"count"`
	Examples []string `json:"examples"`
}

// Counts are the run's totals.
type Counts struct {
	Submitted    int `json:"submitted"`
	Acknowledged int `json:"acknowledged"`
	// Unacknowledged submits got no 2xx; UnackedStored of them exist in
	// job_queue anyway (the answer was lost, not the job) and run normally.
	Unacknowledged int `json:"unacknowledged"`
	UnackedStored  int `json:"unacknowledged_but_stored"`
	// Completed acknowledged jobs ended SUCCESS, FAILED or CANCELED;
	// ByStatus splits every acknowledged job by its final status.
	Completed int            `json:"completed"`
	ByStatus  map[string]int `json:"by_status"`
	// Lost acknowledged jobs are in job_queue but not terminal at the end;
	// Stuck of them are RUNNING past lease + rescue interval.
	Lost  int `json:"lost"`
	Stuck int `json:"stuck"`
	// AckedMissing acknowledged submits have no job with their id and key
	// in job_queue at the end (see CheckAckedMissing).
	AckedMissing int `json:"acknowledged_submit_missing"`
	// Phantom jobs are in job_queue but not in the submit log.
	Phantom int `json:"phantom"`
	// PoisonJobs are acknowledged jobs of PoisonType; PoisonFailed of them
	// ended FAILED after exactly max_retry+1 claims, as they must.
	PoisonJobs   int `json:"poison_jobs"`
	PoisonFailed int `json:"poison_failed"`
	// TxEffectDuplicates is jobs with more than one transactional effect.
	TxEffectDuplicates int `json:"tx_effect_duplicates"`
	// OverlappingLeases is pairs of consecutive attempts of one job whose
	// ownership intervals overlap.
	OverlappingLeases int `json:"overlapping_leases"`
	// StaleCompletionsAccepted is jobs where a write of a run that no longer
	// owned the job took effect.
	StaleCompletionsAccepted int `json:"stale_completions_accepted"`
	// ClaimedBeforeDue is attempts that started before their due_at.
	ClaimedBeforeDue int `json:"claimed_before_due"`
	// WorkAfterLeaseLost is runs whose "end" effect came more than
	// WorkAfterLossTolerance after they lost their lease (see
	// CheckWorkAfterLoss).
	WorkAfterLeaseLost int `json:"work_after_lease_lost"`
	// UnexplainedRescues is LEASE_EXPIRED executions that no fault explains
	// (see CheckUnexplainedRescue).
	UnexplainedRescues int `json:"unexplained_rescues"`
	// UnexplainedReleases is RELEASED executions that no shutdown or fault
	// explains (see CheckUnexplainedRelease).
	UnexplainedReleases int `json:"unexplained_releases"`
	// MissingExecutions is jobs whose execution rows are not exactly one per
	// started attempt.
	MissingExecutions int `json:"missing_executions"`
	// StatusVsLastExecution is terminal jobs whose last execution's outcome
	// contradicts their status (see CheckStatusVsLastExecution).
	StatusVsLastExecution int `json:"status_vs_last_execution"`
	// RerunAfterSuccess is jobs re-run after an attempt finished its work
	// successfully, FailedAfterSuccess jobs that ended FAILED although one
	// did, with no excusing fault (see CheckRerunAfterSuccess).
	RerunAfterSuccess  int `json:"rerun_after_success"`
	FailedAfterSuccess int `json:"failed_after_success"`
	// LateCompletionsAccepted, CompletionsAppliedTwice, WorkerOverlaps and
	// LostAfterAck count the remote checks' violations (see their Check
	// constants).
	LateCompletionsAccepted int `json:"late_completions_accepted"`
	CompletionsAppliedTwice int `json:"completions_applied_twice"`
	WorkerOverlaps          int `json:"worker_overlaps"`
	LostAfterAck            int `json:"lost_after_ack"`
	// Completions is the remote completions in the acknowledgement log;
	// LateCompletionsRefused of them were answered 409 stale (the attempt
	// had lost the job); AcksRetried were sent again after their answer was
	// cut (ack-loss) and answered "applied"; DuplicateCompletions were the
	// first copy of a completion sent twice (duplicate-complete).
	Completions            int `json:"remote_completions"`
	LateCompletionsRefused int `json:"late_completions_refused"`
	AcksRetried            int `json:"acks_retried"`
	DuplicateCompletions   int `json:"duplicate_completions"`
	// RescuesAfterSlowRenewal is LEASE_EXPIRED executions no injected fault
	// explains but whose replica logged a renewal the database did not
	// answer in time while the run held the job (a loaded machine, not a
	// dropped outcome): reported, not a violation.
	RescuesAfterSlowRenewal int `json:"rescues_after_slow_renewal"`
	// RescuesAfterStall is LEASE_EXPIRED executions no injected fault or
	// slow renewal explains but whose replica incarnation logged a stall
	// (its heartbeat was not run in time: a CPU-starved machine) that
	// overlapped the run's claim-to-rescue window: reported, not a
	// violation.
	RescuesAfterStall int `json:"rescues_after_stall"`
	// ReleasesAfterSlowRenewal and ReleasesAfterStall are RELEASED
	// executions no shutdown or injected fault explains but that a slow
	// renewal or a stall of their replica does (as for rescues): reported,
	// not a violation.
	ReleasesAfterSlowRenewal int `json:"releases_after_slow_renewal"`
	ReleasesAfterStall       int `json:"releases_after_stall"`
	// ReleasesGivenBack is RELEASED executions the run queue gave back by
	// design: queued behind busy workers longer than the run-queue wait,
	// released unstarted (no retry spent) for any replica to claim.
	// Counted, not a violation.
	ReleasesGivenBack int `json:"releases_given_back"`
	// WorkerLapses is remote worker runs rescued after the lease of their
	// last renewal (or of their claim) ran out: the worker did not renew in
	// time. Each is a stall of that worker over [its lease's end, the
	// rescue], which excuses the rescue and a re-run as a replica's stall
	// does (counted in RescuesAfterStall).
	WorkerLapses int `json:"worker_lapses"`
	// StaleCompletionsRefused is executions the fence refused (outcome STALE).
	StaleCompletionsRefused int `json:"stale_completions_refused"`
	// Executions is job_execution rows. Rescued of them had their lease
	// expire and were returned by a rescuer: LeaseExpired plus the STALE
	// ones (rescued first, then refused when the late run tried to
	// complete). Released returned at shutdown, Failed ended by a failed
	// attempt.
	Executions   int `json:"executions"`
	Rescued      int `json:"rescued"`
	LeaseExpired int `json:"lease_expired"`
	Released     int `json:"released"`
	Failed       int `json:"failed_attempts"`
}

// NonTxReport is the at-least-once cost.
type NonTxReport struct {
	// DuplicatedJobs have more than one non_tx effect row.
	DuplicatedJobs int `json:"duplicated_jobs"`
	// ExtraEffects is non_tx rows beyond the first per job.
	ExtraEffects int `json:"extra_effects"`
	// Explained of DuplicatedJobs have every extra effect written by an
	// attempt that did not succeed (rescued, stale, released or failed) —
	// the expected physics of a run interrupted after its side effect.
	Explained int `json:"explained"`
	// InterruptingFaults is faults that can interrupt runs mid-job (kill,
	// pause, term, db-restart, partition, clock-skew).
	InterruptingFaults int `json:"interrupting_faults"`
	// InterruptedRuns is executions that ended LEASE_EXPIRED, STALE or
	// RELEASED.
	InterruptedRuns int `json:"interrupted_runs"`
}

// Percentiles summarise a latency distribution in milliseconds.
type Percentiles struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p999_ms"`
	Max   float64 `json:"max_ms"`
	Mean  float64 `json:"mean_ms"`
}

// FaultResult is one fault with its recovery figures. Durations are
// seconds; -1 means "did not happen before the end of the run".
type FaultResult struct {
	Fault
	// Unavailability is the longest interval in [Start, End+Lease+
	// RescueInterval+5s] with no attempt finishing while jobs were pending.
	Unavailability float64 `json:"unavailability_s"`
	// Orphans are runs in flight on the target at Start that did not finish
	// on their own (rescued, stale, released or never closed); RePicked of
	// them were claimed again, RePickP50/Max seconds after Start.
	Orphans   int     `json:"orphans"`
	RePicked  int     `json:"re_picked"`
	RePickP50 float64 `json:"re_pick_p50_s"`
	RePickMax float64 `json:"re_pick_max_s"`
	// BacklogAtStart is jobs submitted and not terminal at Start;
	// BacklogRecovery is seconds from Start until the backlog was back at
	// or below it, after End.
	BacklogAtStart  int     `json:"backlog_at_start"`
	BacklogRecovery float64 `json:"backlog_recovery_s"`
}

// Point is one timeline sample: T seconds since Start, attempts finished
// SUCCESS per second in (T-step, T], and the backlog (submitted, not
// terminal) at T.
type Point struct {
	T          float64 `json:"t_s"`
	Throughput float64 `json:"throughput_per_s"`
	Backlog    int     `json:"backlog"`
}

// TimelineStep is the timeline's resolution.
const TimelineStep = 500 * time.Millisecond

// Check judges h.
func Check(h History) *Result {
	r := &Result{ExecutionsPerJob: map[int]int{}, Counts: Counts{ByStatus: map[string]int{}}}
	c := &r.Counts
	h.Stalls = append(slices.Clone(h.Stalls), workerLapses(h, c)...)
	jobs := make(map[uint64]*Job, len(h.Jobs))
	byKey := make(map[string]*Job, len(h.Jobs))
	for i := range h.Jobs {
		jobs[h.Jobs[i].ID] = &h.Jobs[i]
		byKey[h.Jobs[i].Key] = &h.Jobs[i]
	}
	execs := map[uint64][]Execution{}
	for _, e := range h.Executions {
		execs[e.JobID] = append(execs[e.JobID], e)
		c.Executions++
		switch e.Outcome {
		case OutcomeLeaseExpired:
			c.LeaseExpired++
		case OutcomeReleased:
			c.Released++
		case OutcomeStale:
			c.StaleCompletionsRefused++
		case OutcomeFailed:
			c.Failed++
		}
	}
	for id := range execs {
		slices.SortFunc(execs[id], func(a, b Execution) int { return a.Attempt - b.Attempt })
	}
	effects := map[uint64][]Effect{}
	for _, e := range h.Effects {
		effects[e.JobID] = append(effects[e.JobID], e)
	}

	// A schedule's jobs are submitted by the schedule (its ledger names them).
	h.Submits = append(slices.Clone(h.Submits), scheduleSubmits(h, jobs)...)
	var lost, missing, stuck, txDup, overlap, stale, phantom, poison []string
	var early, afterLoss, unexplained, unexplainedRel, noExecRow, disagree, rerun, failedAfter []string
	submitted := map[string]bool{}
	for _, s := range h.Submits {
		submitted[s.Key] = true
		c.Submitted++
		if !s.Acked() {
			c.Unacknowledged++
			if _, ok := byKey[s.Key]; ok {
				c.UnackedStored++
			}
			continue
		}
		c.Acknowledged++
		j, ok := jobs[s.JobID]
		if !ok || j.Key != s.Key {
			why := "no such id"
			if ok {
				why = fmt.Sprintf("id %d is now job %s", j.ID, j.Key)
			}
			missing = append(missing, fmt.Sprintf("job %d (%s): acknowledged by %s at %s but not in job_queue (%s)",
				s.JobID, s.Key, s.Replica, s.AckedAt.Format(time.RFC3339Nano), why))
			continue
		}
		c.ByStatus[j.Status]++
		r.ExecutionsPerJob[len(execs[j.ID])]++
		if j.Type == PoisonType {
			c.PoisonJobs++
			if j.Status == StatusFailed && len(execs[j.ID]) == j.MaxRetry+1 {
				c.PoisonFailed++
			} else {
				poison = append(poison, fmt.Sprintf("job %d: poison job %s after %d claims (max_retry %d); want FAILED after %d",
					j.ID, j.Status, len(execs[j.ID]), j.MaxRetry, j.MaxRetry+1))
			}
		}
		if j.Terminal() {
			c.Completed++
			continue
		}
		lost = append(lost, fmt.Sprintf("job %d (%s): %s at the end (attempt %d, owner %q)", j.ID, j.Key, j.Status, j.Attempt, j.Owner))
		if j.Status == StatusRunning && j.LeaseUntil != nil && j.LeaseUntil.Add(h.RescueInterval).Before(h.End) {
			stuck = append(stuck, fmt.Sprintf("job %d: RUNNING, lease of attempt %d (owner %q) expired %s before the end",
				j.ID, j.Attempt, j.Owner, h.End.Sub(*j.LeaseUntil).Round(time.Millisecond)))
		}
	}
	for _, j := range h.Jobs {
		if !submitted[j.Key] {
			phantom = append(phantom, fmt.Sprintf("job %d (%s): not in the submit log", j.ID, j.Key))
		}
	}

	ids := slices.Sorted(maps.Keys(jobs))
	for _, id := range ids {
		j := jobs[id]
		ex := execs[id]
		byAttempt := make(map[int]Execution, len(ex))
		for _, e := range ex {
			byAttempt[e.Attempt] = e
		}
		// Overlapping leases: attempt k must have ended (its own completion
		// or its rescue) before attempt k+1 was claimed.
		for k := 0; k+1 < len(ex); k++ {
			a, b := ex[k], ex[k+1]
			switch {
			case a.FinishedAt == nil:
				overlap = append(overlap, fmt.Sprintf("job %d: attempt %d (%s) never ended, attempt %d (%s) claimed at %s",
					id, a.Attempt, a.Owner, b.Attempt, b.Owner, b.StartedAt.Format(time.RFC3339Nano)))
			case a.FinishedAt.After(b.StartedAt):
				overlap = append(overlap, fmt.Sprintf("job %d: attempt %d (%s) held the job until %s, attempt %d (%s) claimed it %s earlier",
					id, a.Attempt, a.Owner, a.FinishedAt.Format(time.RFC3339Nano), b.Attempt, b.Owner, a.FinishedAt.Sub(b.StartedAt)))
			}
		}
		// Stale completions accepted.
		var why []string
		txCount := 0
		for _, e := range effects[id] {
			if e.Kind != EffectTx {
				continue
			}
			txCount++
			if x, ok := byAttempt[e.Attempt]; !ok || x.Outcome != OutcomeSuccess {
				why = append(why, fmt.Sprintf("tx effect of attempt %d (%s) whose execution ended %q", e.Attempt, e.Owner, x.Outcome))
			}
		}
		if txCount > 1 {
			txDup = append(txDup, fmt.Sprintf("job %d: %d transactional effects", id, txCount))
		}
		if len(ex) > 0 {
			last := ex[len(ex)-1]
			if j.Status == StatusSuccess && last.Outcome != OutcomeSuccess {
				why = append(why, fmt.Sprintf("job SUCCESS but its latest attempt %d (%s) ended %q", last.Attempt, last.Owner, last.Outcome))
			}
			for _, e := range ex[:len(ex)-1] {
				if e.Outcome == OutcomeSuccess {
					why = append(why, fmt.Sprintf("attempt %d (%s) recorded SUCCESS yet attempt %d was claimed after it", e.Attempt, e.Owner, last.Attempt))
				}
			}
		}
		if len(why) > 0 {
			stale = append(stale, fmt.Sprintf("job %d: %s", id, why[0]))
		}
		if m := missingExecutions(j, ex); m != "" {
			noExecRow = append(noExecRow, m)
		}
		if d := statusVsLastExecution(j, ex); d != "" {
			disagree = append(disagree, d)
		}
		if s := rerunAfterSuccess(h, j, ex, effects[id]); s != "" {
			rerun = append(rerun, s)
		}
		if s := failedAfterSuccess(h, j, ex, effects[id]); s != "" {
			failedAfter = append(failedAfter, s)
		}
		early = append(early, claimedEarly(id, ex)...)
		afterLoss = append(afterLoss, workAfterLoss(h, id, ex, effects[id])...)
		// Non-transactional duplicates.
		var nonTx []Effect
		for _, e := range effects[id] {
			if e.Kind == EffectNonTx {
				nonTx = append(nonTx, e)
			}
		}
		if len(nonTx) > 1 {
			r.NonTx.DuplicatedJobs++
			r.NonTx.ExtraEffects += len(nonTx) - 1
			explained := true
			successes := 0
			for _, e := range nonTx {
				if byAttempt[e.Attempt].Outcome == OutcomeSuccess {
					successes++
				}
			}
			if successes > 1 {
				explained = false
			}
			if explained {
				r.NonTx.Explained++
			}
		}
	}
	for _, e := range h.Executions {
		if e.Outcome == OutcomeLeaseExpired || e.Outcome == OutcomeStale || e.Outcome == OutcomeReleased {
			r.NonTx.InterruptedRuns++
		}
		if u := unexplainedRescue(h, e); u != "" {
			switch {
			case slowRenewal(h, e):
				c.RescuesAfterSlowRenewal++
			case stalled(h, e.Owner, e.StartedAt, *e.FinishedAt):
				c.RescuesAfterStall++
			default:
				unexplained = append(unexplained, u)
			}
		}
		if e.Outcome == OutcomeReleased && strings.HasPrefix(e.Error, releasedGivenBack) {
			c.ReleasesGivenBack++
			continue
		}
		if u := unexplainedRelease(h, e); u != "" {
			switch {
			case slowRenewal(h, e):
				c.ReleasesAfterSlowRenewal++
			case stalled(h, e.Owner, e.StartedAt, *e.FinishedAt):
				c.ReleasesAfterStall++
			default:
				unexplainedRel = append(unexplainedRel, u)
			}
		}
	}
	for _, f := range h.Faults {
		if f.Interrupts() {
			r.NonTx.InterruptingFaults++
		}
	}
	late, twice, wOverlap, lostAck := remoteChecks(h, jobs, execs, c)
	c.Rescued = c.LeaseExpired + c.StaleCompletionsRefused
	c.Lost, c.AckedMissing, c.Stuck, c.TxEffectDuplicates = len(lost), len(missing), len(stuck), len(txDup)
	c.OverlappingLeases, c.StaleCompletionsAccepted, c.Phantom = len(overlap), len(stale), len(phantom)
	c.ClaimedBeforeDue, c.WorkAfterLeaseLost, c.UnexplainedRescues = len(early), len(afterLoss), len(unexplained)
	c.UnexplainedReleases = len(unexplainedRel)
	c.MissingExecutions = len(noExecRow)
	c.StatusVsLastExecution = len(disagree)
	c.RerunAfterSuccess, c.FailedAfterSuccess = len(rerun), len(failedAfter)
	for _, v := range []struct {
		check string
		ex    []string
	}{
		{CheckLost, lost}, {CheckAckedMissing, missing}, {CheckStuck, stuck}, {CheckTxDuplicate, txDup},
		{CheckOverlap, overlap}, {CheckStaleAccepted, stale}, {CheckPhantom, phantom}, {CheckPoison, poison},
		{CheckClaimedEarly, early}, {CheckWorkAfterLoss, afterLoss}, {CheckUnexplainedRescue, unexplained},
		{CheckUnexplainedRelease, unexplainedRel},
		{CheckMissingExecution, noExecRow},
		{CheckStatusVsLastExecution, disagree}, {CheckRerunAfterSuccess, rerun}, {CheckFailedAfterSuccess, failedAfter},
		{CheckLateCompletionAccepted, late}, {CheckAppliedTwice, twice}, {CheckWorkerOverlap, wOverlap}, {CheckLostAfterAck, lostAck},
	} {
		if len(v.ex) > 0 {
			r.Violations = append(r.Violations, Violation{Check: v.check, Count: len(v.ex), Examples: v.ex[:min(len(v.ex), maxExamples)]})
		}
	}
	r.Violations = append(r.Violations, checkWorkflows(h, jobs, execs)...)
	fireViolations, schedules := checkFires(h, jobs)
	r.Violations, r.Schedules = append(r.Violations, fireViolations...), schedules
	r.Violations = append(r.Violations, checkRateLimits(h, jobs, execs)...)
	r.Violations = append(r.Violations, checkKeys(h, jobs, execs)...)
	r.Valid = len(r.Violations) == 0

	r.Pickup, r.EndToEnd = latencies(h, jobs, execs)
	bl := newBacklog(h, jobs)
	r.Faults = faultResults(h, execs, bl)
	r.Timeline = timeline(h, bl)
	return r
}

// WorkAfterLossTolerance is how long after losing its lease a run's "end"
// effect may still be written, as a fraction of the lease: a handler is
// cancelled Lease/5 before its local lease deadline, or within a heartbeat
// (Lease/3) of a rescue it did not foresee, and an end marker it sent just
// before may still be in flight.
const WorkAfterLossTolerance = 0.5

// missingExecutions describes how one job's execution rows (sorted by
// attempt) differ from one row per started attempt, or returns "".
func missingExecutions(j *Job, ex []Execution) string {
	want := j.Attempt
	if j.Status == StatusRunning {
		want-- // in flight: no row until its outcome is known
	}
	for i, e := range ex {
		if e.Attempt != i+1 {
			return fmt.Sprintf("job %d: attempt %d (%s) has row %d of %d; want attempts 1…%d once each", j.ID, e.Attempt, e.Owner, i+1, len(ex), want)
		}
	}
	if len(ex) < want {
		return fmt.Sprintf("job %d: %s at attempt %d, but only attempts 1…%d have an execution row", j.ID, j.Status, j.Attempt, len(ex))
	}
	if len(ex) > j.Attempt {
		return fmt.Sprintf("job %d: %d execution rows for %d attempts", j.ID, len(ex), j.Attempt)
	}
	return ""
}

// statusVsLastExecution describes how terminal job j contradicts ex, its
// executions in attempt order; "" when they agree. The mapping:
//   - SUCCESS: the last execution is SUCCESS (a last STALE one is reported
//     by stale_completions_accepted instead);
//   - FAILED: the last execution is FAILED, LEASE_EXPIRED (rescued with no
//     retry left) or STALE (rescued so, then its late write refused);
//   - CANCELED: the last execution is not SUCCESS; and when the run itself
//     ended the job (its execution closed at or after the job's
//     finished_at) it says CANCELED or LEASE_EXPIRED — a FAILED or RELEASED
//     one is only right for a job cancelled later while WAITING.
//
// A terminal job whose last execution is still open contradicts it too.
func statusVsLastExecution(j *Job, ex []Execution) string {
	if !j.Terminal() || len(ex) == 0 {
		return ""
	}
	last := ex[len(ex)-1]
	bad := false
	switch {
	case last.Outcome == "" || last.FinishedAt == nil:
		bad = true
	case j.Status == StatusSuccess:
		bad = last.Outcome != OutcomeSuccess && last.Outcome != OutcomeStale
	case j.Status == StatusFailed:
		bad = last.Outcome != OutcomeFailed && last.Outcome != OutcomeLeaseExpired && last.Outcome != OutcomeStale
	case j.Status == StatusCanceled:
		byRun := j.FinishedAt != nil && !last.FinishedAt.Before(*j.FinishedAt)
		bad = last.Outcome == OutcomeSuccess || (byRun && (last.Outcome == OutcomeFailed || last.Outcome == OutcomeReleased))
	}
	if !bad {
		return ""
	}
	return fmt.Sprintf("job %d: %s but its last execution (attempt %d, %s) says %q", j.ID, j.Status, last.Attempt, last.Owner, last.Outcome)
}

// claimedEarly lists the attempts of one job that started before they were
// due.
func claimedEarly(id uint64, ex []Execution) []string {
	var out []string
	for _, e := range ex {
		if e.DueAt != nil && e.StartedAt.Before(*e.DueAt) {
			out = append(out, fmt.Sprintf("job %d: attempt %d (%s) claimed at %s, %s before it was due",
				id, e.Attempt, e.Owner, e.StartedAt.Format(time.RFC3339Nano), e.DueAt.Sub(e.StartedAt)))
		}
	}
	return out
}

// workAfterLoss lists the runs of one job whose work ended (their "end"
// effect) well after they lost their lease. A run lost its lease when it
// was rescued (LEASE_EXPIRED, or STALE: rescued first, refused later) or,
// at the latest, when the next attempt was claimed. A replica that was
// frozen (pause) or cut off (partition, database down) at that moment
// could not act on the loss before the fault ended — and an end marker it
// sent before the cut can arrive at the heal — so the clock starts at the
// fault's end; likewise at the end of a stall the replica logged (its
// heartbeat was not run: CPU starvation) that spanned the loss.
func workAfterLoss(h History, id uint64, ex []Execution, effects []Effect) []string {
	tol := time.Duration(WorkAfterLossTolerance * float64(h.Lease))
	var out []string
	for k, e := range ex {
		var lostAt time.Time
		if e.FinishedAt != nil && (e.Outcome == OutcomeLeaseExpired || e.Outcome == OutcomeStale) {
			lostAt = *e.FinishedAt
		}
		if k+1 < len(ex) && (lostAt.IsZero() || ex[k+1].StartedAt.Before(lostAt)) {
			lostAt = ex[k+1].StartedAt
		}
		if lostAt.IsZero() {
			continue
		}
		from := lostAt
		for _, f := range h.Faults {
			if f.hits(e.Owner) && !f.Start.After(lostAt) && !f.End.Before(e.StartedAt) && f.End.After(from) {
				from = f.End
			}
		}
		// A replica that logged a stall spanning the loss was not run: it
		// could not cancel the handler before the stall ended.
		for _, st := range h.Stalls {
			if st.Owner == e.Owner && !st.From.After(lostAt) && !st.To.Before(lostAt) && st.To.After(from) {
				from = st.To
			}
		}
		for _, ef := range effects {
			if ef.Kind == EffectEnd && ef.Attempt == e.Attempt && ef.CreatedAt.Sub(from) > tol {
				out = append(out, fmt.Sprintf("job %d: attempt %d (%s) lost its lease at %s, its work ended %s later",
					id, e.Attempt, e.Owner, lostAt.Format(time.RFC3339Nano), ef.CreatedAt.Sub(lostAt).Round(time.Millisecond)))
				break
			}
		}
	}
	return out
}

// unexplainedRescue describes e if it was rescued (LEASE_EXPIRED) while no
// excusing fault touched its replica or the database between its claim and
// one lease after the fault ended; "" otherwise.
func unexplainedRescue(h History, e Execution) string {
	if e.Outcome != OutcomeLeaseExpired || e.FinishedAt == nil {
		return ""
	}
	for _, f := range excusingFaults(h) {
		if f.excuses(h.Lease) && f.hits(e.Owner) && !f.Start.After(*e.FinishedAt) && !f.End.Add(h.Lease).Before(e.StartedAt) {
			return ""
		}
	}
	return fmt.Sprintf("job %d: attempt %d (%s) claimed at %s was rescued at %s; no fault on its replica or the database explains it",
		e.JobID, e.Attempt, e.Owner, e.StartedAt.Format(time.RFC3339Nano), e.FinishedAt.Format(time.RFC3339Nano))
}

// ReleasedAtShutdown begins the error of a run released because its
// replica was shutting down (scheduler: "released at shutdown: …").
const ReleasedAtShutdown = "released at shutdown"

// releasedGivenBack begins the error of a run the run queue gave back
// unstarted (scheduler: "released: waited in the run queue longer than
// the run-queue wait; …"), a release by design.
const releasedGivenBack = "released: waited in the run queue longer than the run-queue wait"

// releasedLostClaim is the error of a run released because its claim's
// answer was lost on the way back (a cut connection) and no worker slot
// was free when the replica adopted it.
const releasedLostClaim = "released: its claim's answer was lost"

// unexplainedRelease describes e if it was released (RELEASED) while
// nothing explains it; "" otherwise. A release at shutdown is explained by
// a SIGTERM of its replica incarnation before it or by the harness's final
// stop (History.Stopped); any release by a fault on its replica or the
// database between its claim and one lease after the fault ended — a fault
// that may cost a run its lease (Fault.excuses), or, for a release of a
// claim whose answer was lost, any fault that touched the link.
func unexplainedRelease(h History, e Execution) string {
	if e.Outcome != OutcomeReleased || e.FinishedAt == nil {
		return ""
	}
	if strings.HasPrefix(e.Error, ReleasedAtShutdown) {
		if !h.Stopped.IsZero() && !e.FinishedAt.Before(h.Stopped) {
			return ""
		}
		for _, f := range h.Faults {
			if f.Kind == "term" && f.Owner == e.Owner && !f.Start.After(*e.FinishedAt) {
				return ""
			}
		}
	}
	lostClaim := strings.HasPrefix(e.Error, releasedLostClaim)
	for _, f := range excusingFaults(h) {
		if (f.excuses(h.Lease) || lostClaim) && f.hits(e.Owner) && !f.Start.After(*e.FinishedAt) && !f.End.Add(h.Lease).Before(e.StartedAt) {
			return ""
		}
	}
	return fmt.Sprintf("job %d: attempt %d (%s) claimed at %s was released at %s (%q); no shutdown or fault on its replica or the database explains it",
		e.JobID, e.Attempt, e.Owner, e.StartedAt.Format(time.RFC3339Nano), e.FinishedAt.Format(time.RFC3339Nano), e.Error)
}

// slowRenewal reports whether e's replica logged a renewal the database did
// not answer in time between e's claim and its rescue.
func slowRenewal(h History, e Execution) bool {
	for _, r := range h.SlowRenewals {
		if r.Owner == e.Owner && !r.At.Before(e.StartedAt) && e.FinishedAt != nil && !r.At.After(*e.FinishedAt) {
			return true
		}
	}
	return false
}

// stalled reports whether owner logged a stall that overlapped [from, to].
func stalled(h History, owner string, from, to time.Time) bool {
	for _, st := range h.Stalls {
		if st.Owner == owner && !st.From.After(to) && !st.To.Before(from) {
			return true
		}
	}
	return false
}

func latencies(h History, jobs map[uint64]*Job, execs map[uint64][]Execution) (pickup, e2e Percentiles) {
	hp := hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)
	he := hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)
	for _, s := range h.Submits {
		j, ok := jobs[s.JobID]
		if !s.Acked() || !ok {
			continue
		}
		if ex := execs[j.ID]; len(ex) > 0 && ex[0].Attempt == 1 {
			_ = hp.RecordValue(max(ex[0].StartedAt.Sub(j.CreateTime).Microseconds(), 1))
		}
		if j.Terminal() && j.FinishedAt != nil {
			_ = he.RecordValue(max(j.FinishedAt.Sub(j.CreateTime).Microseconds(), 1))
		}
	}
	return percentiles(hp), percentiles(he)
}

func percentiles(h *hdrhistogram.Histogram) Percentiles {
	ms := func(us int64) float64 { return float64(us) / 1000 }
	if h.TotalCount() == 0 {
		return Percentiles{}
	}
	return Percentiles{
		Count: h.TotalCount(), P50: ms(h.ValueAtQuantile(50)), P90: ms(h.ValueAtQuantile(90)),
		P99: ms(h.ValueAtQuantile(99)), P999: ms(h.ValueAtQuantile(99.9)), Max: ms(h.Max()), Mean: h.Mean() / 1000,
	}
}

// backlog answers "how many submitted jobs were not terminal at t" from the
// sorted create and terminal-finish times of the jobs in job_queue.
type backlog struct{ created, finished []time.Time }

func newBacklog(h History, jobs map[uint64]*Job) *backlog {
	b := &backlog{}
	for _, j := range jobs {
		b.created = append(b.created, j.CreateTime)
		if j.Terminal() && j.FinishedAt != nil {
			b.finished = append(b.finished, *j.FinishedAt)
		}
	}
	sortTimes(b.created)
	sortTimes(b.finished)
	return b
}

func sortTimes(ts []time.Time) { sort.Slice(ts, func(i, k int) bool { return ts[i].Before(ts[k]) }) }

// countLE returns how many of the sorted ts are ≤ t.
func countLE(ts []time.Time, t time.Time) int {
	return sort.Search(len(ts), func(i int) bool { return ts[i].After(t) })
}

func (b *backlog) at(t time.Time) int { return countLE(b.created, t) - countLE(b.finished, t) }

func faultResults(h History, execs map[uint64][]Execution, bl *backlog) []FaultResult {
	var done []time.Time // attempts that finished by their own run
	for _, ex := range execs {
		for _, e := range ex {
			if e.FinishedAt != nil && (e.Outcome == OutcomeSuccess || e.Outcome == OutcomeFailed || e.Outcome == OutcomeCanceled) {
				done = append(done, *e.FinishedAt)
			}
		}
	}
	sortTimes(done)
	var out []FaultResult
	for _, f := range h.Faults {
		fr := FaultResult{Fault: f, BacklogAtStart: bl.at(f.Start), BacklogRecovery: -1}
		// Unavailability: the longest completion gap while work was pending.
		winEnd := f.End.Add(h.Lease + h.RescueInterval + 5*time.Second)
		if winEnd.After(h.End) {
			winEnd = h.End
		}
		prev := f.Start
		var longest time.Duration
		for i := countLE(done, f.Start); i <= len(done); i++ {
			next := winEnd
			if i < len(done) && done[i].Before(winEnd) {
				next = done[i]
			}
			if bl.at(prev) > 0 && next.Sub(prev) > longest {
				longest = next.Sub(prev)
			}
			if !next.Before(winEnd) {
				break
			}
			prev = next
		}
		fr.Unavailability = longest.Seconds()
		// Orphans and their re-pick.
		var repick []float64
		for _, ex := range execs {
			for k, e := range ex {
				if f.Owner != "" && e.Owner != f.Owner {
					continue
				}
				if e.StartedAt.After(f.Start) || (e.FinishedAt != nil && !e.FinishedAt.After(f.Start)) {
					continue
				}
				if e.Outcome == OutcomeSuccess || e.Outcome == OutcomeFailed || e.Outcome == OutcomeCanceled {
					continue
				}
				fr.Orphans++
				if k+1 < len(ex) {
					repick = append(repick, ex[k+1].StartedAt.Sub(f.Start).Seconds())
				}
			}
		}
		fr.RePicked = len(repick)
		if len(repick) > 0 {
			slices.Sort(repick)
			fr.RePickP50, fr.RePickMax = repick[(len(repick)-1)/2], repick[len(repick)-1]
		}
		for t := f.End; !t.After(h.End); t = t.Add(50 * time.Millisecond) {
			if bl.at(t) <= fr.BacklogAtStart {
				fr.BacklogRecovery = t.Sub(f.Start).Seconds()
				break
			}
		}
		out = append(out, fr)
	}
	return out
}

func timeline(h History, bl *backlog) []Point {
	if !h.End.After(h.Start) {
		return nil
	}
	var succ []time.Time
	for _, e := range h.Executions {
		if e.FinishedAt != nil && e.Outcome == OutcomeSuccess {
			succ = append(succ, *e.FinishedAt)
		}
	}
	sortTimes(succ)
	var pts []Point
	for t := h.Start.Add(TimelineStep); ; t = t.Add(TimelineStep) {
		if t.After(h.End) {
			t = h.End
		}
		n := countLE(succ, t) - countLE(succ, t.Add(-TimelineStep))
		pts = append(pts, Point{T: t.Sub(h.Start).Seconds(), Throughput: float64(n) / TimelineStep.Seconds(), Backlog: bl.at(t)})
		if !t.Before(h.End) {
			return pts
		}
	}
}

// finishedWork returns the attempts of ex that finished their work
// successfully: their "end" effect exists (its time by attempt) and their
// execution did not end FAILED or CANCELED.
func finishedWork(ex []Execution, effects []Effect) (attempts []Execution, endAt map[int]time.Time) {
	endAt = map[int]time.Time{}
	for _, e := range effects {
		if e.Kind == EffectEnd {
			endAt[e.Attempt] = e.CreatedAt
		}
	}
	for _, x := range ex {
		if _, ok := endAt[x.Attempt]; ok && x.Outcome != OutcomeFailed && x.Outcome != OutcomeCanceled {
			attempts = append(attempts, x)
		}
	}
	return attempts, endAt
}

// excusedBetween reports whether a fault that can cost a live run of owner
// its lease overlapped [from, to] (or ended less than a lease before from),
// or owner logged a renewal the database did not answer in time within
// [from, to], or a stall overlapping it (a loaded machine, as for rescues:
// slowRenewal, stalled).
func excusedBetween(h History, owner string, from, to time.Time) bool {
	if stalled(h, owner, from, to) {
		return true
	}
	for _, f := range excusingFaults(h) {
		if f.excuses(h.Lease) && f.hits(owner) && !f.Start.After(to) && !f.End.Add(h.Lease).Before(from) {
			return true
		}
	}
	for _, r := range h.SlowRenewals {
		if r.Owner == owner && !r.At.Before(from) && !r.At.After(to) {
			return true
		}
	}
	return false
}

// rerunAfterSuccess describes job j's first re-run after an attempt that
// finished its work successfully (CheckRerunAfterSuccess), or "".
func rerunAfterSuccess(h History, j *Job, ex []Execution, effects []Effect) string {
	done, endAt := finishedWork(ex, effects)
	for _, a := range done {
		for _, b := range ex {
			if b.Attempt <= a.Attempt || b.StartedAt.Before(endAt[a.Attempt]) || excusedBetween(h, a.Owner, a.StartedAt, b.StartedAt) {
				continue
			}
			return fmt.Sprintf("job %d: attempt %d (%s) finished its work at %s (execution %q), yet attempt %d (%s) was claimed at %s; no fault explains it",
				j.ID, a.Attempt, a.Owner, endAt[a.Attempt].Format(time.RFC3339Nano), a.Outcome, b.Attempt, b.Owner, b.StartedAt.Format(time.RFC3339Nano))
		}
	}
	return ""
}

// failedAfterSuccess describes job j when it ended FAILED after an attempt
// finished its work successfully (CheckFailedAfterSuccess), or "".
func failedAfterSuccess(h History, j *Job, ex []Execution, effects []Effect) string {
	if j.Status != StatusFailed {
		return ""
	}
	end := h.End
	if j.FinishedAt != nil {
		end = *j.FinishedAt
	}
	done, endAt := finishedWork(ex, effects)
	for _, a := range done {
		if endAt[a.Attempt].After(end) || excusedBetween(h, a.Owner, a.StartedAt, end) {
			continue
		}
		return fmt.Sprintf("job %d: FAILED (%q) at %s although attempt %d (%s) finished its work at %s (execution %q); no fault explains it",
			j.ID, j.LastError, end.Format(time.RFC3339Nano), a.Attempt, a.Owner, endAt[a.Attempt].Format(time.RFC3339Nano), a.Outcome)
	}
	return ""
}
