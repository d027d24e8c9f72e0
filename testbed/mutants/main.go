// Command mutants plants known bugs in jobq one at a time and runs the tests
// that must catch each: `make mutants` (not in CI; minutes per mutant).
//
// It checks out HEAD into a temporary git worktree, runs every listed test
// once on the unmodified code (they must pass, or the table would mean
// nothing), then for each mutant applies its edits (exact text
// replacements, each of which must match exactly once), runs its tests,
// and restores the tree. A mutant whose edits no longer match, or that does
// not compile, is reported as such, never as caught. The worktree is
// removed at the end.
//
// A mutant is caught only by a named assertion: a listed test fails and its
// output contains the mutant's Rule, the text of the failure message that
// names the rule the bug breaks (this repository's tests fail with t.Fatalf
// or t.Errorf lines that say which rule was broken). A failure without that
// text is "timeout" when the output shows a wait that ran out ("panic: test
// timed out", or a wait helper's "timed out after …" / "timed out waiting
// …") and "unnamed" otherwise (the test failed for another reason); both
// count as not caught, as does "survived" (every test passed). The checks
// run in order until one catches the mutant by its rule.
//
// Usage: go run ./testbed/mutants [-run REGEXP] [-v]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// edit replaces Old (which must occur exactly once in File) with New.
type edit struct{ File, Old, New string }

// check is one package and the tests in it (a go test -run pattern).
type check struct{ Pkg, Run string }

type mutant struct {
	Name string
	Bug  string
	// Rule is text of the failure message by which a listed test names the
	// rule the bug breaks: the mutant counts as caught only when a failing
	// test's output contains it.
	Rule   string
	Edits  []edit
	Checks []check
}

const gen = "gen/jobqdb/jobs.sql.go"

var mutants = []mutant{
	{
		Name: "renew-by-id", Bug: "1: lease renewal by id alone (owner condition dropped)",
		Rule: "want no row",
		Edits: []edit{
			{gen, "AND l.status = 'RUNNING' AND l.owner = ? AND l.cancel_requested = 0", "AND l.status = 'RUNNING' AND ? IS NOT NULL AND l.cancel_requested = 0"},
		},
		Checks: []check{{"./store/", "^TestLeaseRenewOfLostRunMatchesNothing$"}, {"./scheduler/", "^TestLostRunIsNotRenewedAndItsHandlerCancelled$"}},
	},
	{
		Name: "claim-replica-clock", Bug: "2: skiplocked claim stamps started_at and lease_until from the replica's clock",
		Rule: "want the database clock",
		Edits: []edit{
			{gen, "    lease_until = NOW(6) + INTERVAL ? MICROSECOND,\n    started_at = NOW(6),\n    finished_at = NULL,\n    update_time = NOW(6)\nWHERE id IN (/*SLICE:ids*/?) AND status = 'WAITING'",
				"    lease_until = ? + INTERVAL ? MICROSECOND,\n    started_at = ?,\n    finished_at = NULL,\n    update_time = NOW(6)\nWHERE id IN (/*SLICE:ids*/?) AND status = 'WAITING'"},
			{gen, "var queryParams []interface{}\n\tqueryParams = append(queryParams, arg.Owner)\n\tqueryParams = append(queryParams, arg.LeaseUs)\n",
				"var queryParams []interface{}\n\tnow := time.Now().UTC()\n\tqueryParams = append(queryParams, arg.Owner, now)\n\tqueryParams = append(queryParams, arg.LeaseUs, now)\n"},
		},
		Checks: []check{{"./store/", "^TestClaimStampsDatabaseClock$"}},
	},
	{
		Name: "cas-claim-replica-clock", Bug: "2: cas claim stamps started_at and lease_until from the replica's clock",
		Rule: "want the database clock",
		Edits: []edit{
			{gen, "    lease_until = NOW(6) + INTERVAL ? MICROSECOND,\n    started_at = NOW(6),\n    finished_at = NULL,\n    update_time = NOW(6)\nWHERE id = ? AND status = 'WAITING' AND attempt = ?",
				"    lease_until = ? + INTERVAL ? MICROSECOND,\n    started_at = ?,\n    finished_at = NULL,\n    update_time = NOW(6)\nWHERE id = ? AND status = 'WAITING' AND attempt = ?"},
			{gen, "jobClaimCAS,\n\t\targ.Owner,\n\t\targ.LeaseUs,\n", "jobClaimCAS,\n\t\targ.Owner,\n\t\ttime.Now().UTC(),\n\t\targ.LeaseUs,\n\t\ttime.Now().UTC(),\n"},
		},
		Checks: []check{{"./store/", "^TestClaimStampsDatabaseClock$"}},
	},
	{
		Name: "hash-without-run_at", Bug: "3: idempotency hash leaves out run_at",
		Rule:   "want 409",
		Edits:  []edit{{"service/service.go", "p.MaxRetry, p.TimeoutMs, runAt}\n", "p.MaxRetry, p.TimeoutMs, runAt[:0]}\n"}},
		Checks: []check{{"./httpapi/", "^TestIdempotencyHashCoversEveryField$"}},
	},
	{
		Name: "hash-without-max_retry", Bug: "3: idempotency hash leaves out max_retry",
		Rule:   "want 409",
		Edits:  []edit{{"service/service.go", "p.MaxRetry, p.TimeoutMs, runAt}\n", "p.TimeoutMs, runAt}\n"}},
		Checks: []check{{"./httpapi/", "^TestIdempotencyHashCoversEveryField$"}},
	},
	{
		Name: "hash-without-timeout_ms", Bug: "3: idempotency hash leaves out timeout_ms",
		Rule:   "want 409",
		Edits:  []edit{{"service/service.go", "p.MaxRetry, p.TimeoutMs, runAt}\n", "p.MaxRetry, runAt}\n"}},
		Checks: []check{{"./httpapi/", "^TestIdempotencyHashCoversEveryField$"}},
	},
	{
		Name: "hash-run_at-offset", Bug: "3: run_at hashed with its UTC offset (same instant, another offset → 409)",
		Rule:   "want 200",
		Edits:  []edit{{"service/service.go", "\t\tt = t.UTC()\n", ""}},
		Checks: []check{{"./httpapi/", "^TestIdempotencyHashCoversEveryField$"}},
	},
	{
		Name: "success-fenced-by-status", Bug: "4: success completion fenced by status alone (attempt term dropped)",
		Rule: "want refused",
		Edits: []edit{{gen, "SET status = IF(cancel_requested = 1, 'CANCELED', 'SUCCESS'),\n    lease_until = NULL,\n    finished_at = NOW(6),\n    update_time = NOW(6)\nWHERE id = ? AND attempt = ? AND status = 'RUNNING'",
			"SET status = IF(cancel_requested = 1, 'CANCELED', 'SUCCESS'),\n    lease_until = NULL,\n    finished_at = NOW(6),\n    update_time = NOW(6)\nWHERE id = ? AND ? IS NOT NULL AND status = 'RUNNING'"}},
		Checks: []check{{"./store/", "^TestLateSuccessRefusedWhileNextRunIsRunning$"}},
	},
	{
		Name: "batched-success-fenced-by-status", Bug: "4: batched success completion fenced by status alone",
		Rule: "want refused",
		Edits: []edit{{"gen/jobqdb/complete_many.sql.go", "'SUCCESS'),\n    lease_until = NULL,\n    finished_at = NOW(6),\n    update_time = NOW(6)\nWHERE id IN (/*SLICE:ids*/?) AND status = 'RUNNING'\n  AND attempt = ?",
			"'SUCCESS'),\n    lease_until = NULL,\n    finished_at = NOW(6),\n    update_time = NOW(6)\nWHERE id IN (/*SLICE:ids*/?) AND status = 'RUNNING'\n  AND ? IS NOT NULL"}},
		Checks: []check{{"./store/", "^TestLateSuccessRefusedWhileNextRunIsRunning$"}},
	},
	{
		Name: "rescue-one-extra", Bug: "5: rescuer allows one extra rescue (retry_times <= max_retry)",
		Rule:   "after two rescues",
		Edits:  []edit{{gen, "                  WHEN retry_times < max_retry THEN 'WAITING'", "                  WHEN retry_times <= max_retry THEN 'WAITING'"}},
		Checks: []check{{"./store/", "^TestRescueGrantsMaxRetryThenFails$"}},
	},
	{
		Name: "skiplocked-ignores-run_at", Bug: "6: skiplocked claim ignores run_at",
		Rule: "executions started before their due time",
		Edits: []edit{{gen, "FROM job_queue\nWHERE scan_status = 'WAITING' AND lane = 0 AND run_at <= NOW(6)\n  AND job_type NOT IN (/*SLICE:excluded*/?)\nORDER BY priority DESC, run_at, id\nLIMIT ?\nFOR UPDATE SKIP LOCKED",
			"FROM job_queue\nWHERE scan_status = 'WAITING' AND lane = 0\n  AND job_type NOT IN (/*SLICE:excluded*/?)\nORDER BY priority DESC, run_at, id\nLIMIT ?\nFOR UPDATE SKIP LOCKED"}},
		Checks: []check{{"./scheduler/", "^TestNoExecutionBeforeDue$"}},
	},
	{
		Name: "claim-priority-asc", Bug: "7: skiplocked claim orders priority ASC",
		Rule:   "run order",
		Edits:  []edit{{gen, "ORDER BY priority DESC, run_at, id\nLIMIT ?\nFOR UPDATE SKIP LOCKED", "ORDER BY priority ASC, run_at, id\nLIMIT ?\nFOR UPDATE SKIP LOCKED"}},
		Checks: []check{{"./scheduler/", "^TestPriorityOrder$"}},
	},
	{
		Name: "scan-priority-asc", Bug: "7: cas scan orders priority ASC",
		Rule:   "run order",
		Edits:  []edit{{gen, "ORDER BY priority DESC, run_at, id\nLIMIT ?\n`\n\ntype JobScanAvailableRow", "ORDER BY priority ASC, run_at, id\nLIMIT ?\n`\n\ntype JobScanAvailableRow"}},
		Checks: []check{{"./scheduler/", "^TestPriorityOrder$"}},
	},
	{
		Name: "cancel-outcome-success", Bug: "audit: batched success records SUCCESS for a job that ended CANCELED",
		Rule:   "but its execution says",
		Edits:  []edit{{"gen/jobqdb/complete_many.sql.go", "NOW(6), IF(q.cancel_requested = 1, 'CANCELED', 'SUCCESS'), NULL\nFROM job_queue AS q FORCE INDEX (PRIMARY)\nWHERE q.id IN (/*SLICE:ids*/?)\n  AND (q.cancel_requested", "NOW(6), 'SUCCESS', NULL\nFROM job_queue AS q FORCE INDEX (PRIMARY)\nWHERE q.id IN (/*SLICE:ids*/?)\n  AND (q.cancel_requested"}},
		Checks: []check{{"./store/", "^TestCancel(BeforeCompletionRecordsCanceled|RaceJobAndAuditAgree)$"}},
	},
	{
		Name: "elided-success-not-recorded", Bug: "audit: a batched success's attempt (no execution row) is not read from its job row",
		Rule:   "the retried completion counted stale",
		Edits:  []edit{{"store/complete.go", "\tif err != nil || n == 0 {\n\t\treturn \"\", err\n\t}\n\treturn jobq.OutcomeSuccess, nil", "\t_ = n\n\treturn \"\", err"}},
		Checks: []check{{"./scheduler/", "^TestLostCommitAckIsNotStale$"}},
	},
	{
		Name: "elided-success-not-listed", Bug: "executions API: a batched success's attempt is missing from the list",
		Rule:   "want \"1:a:SUCCESS",
		Edits:  []edit{{"store/jobs.go", "case job.Status == jobq.StateSuccess && job.Attempt > 0 && last:", "case job.Status == jobq.StateSuccess && job.Attempt < 0 && last:"}},
		Checks: []check{{"./store/", "^TestBatchedSuccessAcrossAttempts$"}},
	},
	{
		Name: "promoter-drops-hint", Bug: "promoter: an idle probe's answer read before a hinted submit drops the hint",
		Rule:   "the submit's hint was dropped",
		Edits:  []edit{{"scheduler/promoter.go", "\t\t\t\tnext = o\n", "\t\t\t\tnext, pending = o, time.Time{}\n"}},
		Checks: []check{{"./scheduler/", "^TestPromoterHintSurvivesAnOlderProbe$"}},
	},
	{
		Name: "claim-slot-not-held", Bug: "claim gate: the slot is read, not locked, so every claim takes slot 0 at once",
		Rule:   "free while a claim holds the only one",
		Edits:  []edit{{gen, "ORDER BY slot\nLIMIT 1\nFOR UPDATE SKIP LOCKED\n`", "ORDER BY slot\nLIMIT 1\n`"}},
		Checks: []check{{"./store/", "^TestClaimGateHoldsASlotPerClaim$"}},
	},
	{
		Name: "claim-slot-wait-fails-claim", Bug: "claim gate: a slot wait that times out fails the claim instead of claiming without a slot",
		Rule:   "every claim slot stayed held",
		Edits:  []edit{{"store/claim.go", "\tif errors.Is(err, errClaimSlotsBusy) {\n", "\tif false && errors.Is(err, errClaimSlotsBusy) {\n"}},
		Checks: []check{{"./store/", "^TestClaimGateWaitEndsAndClaims$"}},
	},
	{
		Name: "key-pick-not-locked", Bug: "keys: the pick of a key's next parked job is a consistent read, whose none is trusted",
		Rule:   "want WAITING: admitted in r's slot",
		Edits:  []edit{{"store/keys.go", "q.id LIMIT 1 FOR UPDATE)", "q.id LIMIT 1)"}},
		Checks: []check{{"./store/", "^TestKeyedCompletionSeesAJobParkedWhileItWaited$"}},
	},
	{
		Name: "parked-cancel-row-first", Bug: "keys: a cancel of a PARKED job locks its row without its key, deadlocking with the key's locking pick",
		Rule:   "cancel ",
		Edits:  []edit{{"store/jobs.go", "} else if len(st) == 1 && jobq.JobState(st[0].Status) == jobq.StateParked {", "} else if false && len(st) == 1 {"}},
		Checks: []check{{"./store/", "^TestKeyedCancelsRaceCompletions$"}},
	},
	{
		Name: "running-counted-as-waiting", Bug: "stats: RUNNING jobs, indexed as WAITING by type, are counted as WAITING too",
		Rule:   "by type and status",
		Edits:  []edit{{"store/ops.go", "\t\t\t\tn -= c\n", "\t\t\t\tn -= 0\n"}},
		Checks: []check{{"./store/", "^TestParkedAndWaitingToldApart$"}},
	},
	{
		Name: "running-listed-as-waiting", Bug: "listing: a read by type and status names type_status only, so a type's RUNNING jobs list as WAITING ones",
		Rule:   "list WAITING",
		Edits:  []edit{{gen, "AND type_status = ? AND status = ?\n  AND id < ?", "AND type_status = ? AND ? <> ''\n  AND id < ?"}},
		Checks: []check{{"./store/", "^TestParkedAndWaitingToldApart$"}},
	},
	{
		Name: "sleep-params-unbounded", Bug: "params: built-in types accept any ms",
		Rule:   "want 400 naming",
		Edits:  []edit{{"jobtypes/jobtypes.go", "if err != nil || n < 0 || n > b.max {", "if err != nil || n < 0 {"}},
		Checks: []check{{"./httpapi/", "^TestBuiltinParamsValidatedAtSubmit$"}},
	},
	{
		Name: "cas-unguarded", Bug: "sabotage cas-guard: cas claim on status alone (ABA)",
		Rule:   "cas claim with the stale candidate",
		Edits:  []edit{{gen, "WHERE id = ? AND status = 'WAITING' AND attempt = ?\n`\n\ntype JobClaimCASParams", "WHERE id = ? AND status = 'WAITING' AND ? IS NOT NULL\n`\n\ntype JobClaimCASParams"}},
		Checks: []check{{"./store/", "^TestCASClaimRefusesStaleCandidate$"}},
	},
	{
		Name: "rescue-ignores-lease", Bug: "sabotage rescuer: rescue without the lease condition",
		Rule: "rescue of a renewed run",
		Edits: []edit{
			{gen, "WHERE id = ? AND attempt = ?\n  AND status = 'RUNNING' AND lease_until < NOW(6)", "WHERE id = ? AND attempt = ?\n  AND status = 'RUNNING'"},
			{gen, "  AND q.status = 'RUNNING' AND q.lease_until < NOW(6)\nFOR UPDATE", "  AND q.status = 'RUNNING'\nFOR UPDATE"},
		},
		Checks: []check{{"./store/", "^TestRescueSkipsLeaseRenewedAfterTheRead$"}},
	},
	// Planted in the code added with the run queue, claims in flight, the
	// completion split, the outcome writer's retry until the lease
	// deadline, the heartbeat, the promoter, the DST planner, batch submit
	// and the chaos checker. Each edit is small: re-point it when the code
	// it names moves.
	{
		Name: "queued-run-not-renewed", Bug: "a queued run joins the run table (renewed, guarded) only when a worker takes it",
		Rule: "queued run not renewed while it waited",
		Edits: []edit{
			{"scheduler/dispatcher.go", "\td.runs.add(r, guard, func() { d.heartbeat.guardFired(r) })\n", ""},
			{"scheduler/dispatcher.go", "func (x *localExecutor) runQueued(q *queuedRun, queued time.Duration) {\n", "func (x *localExecutor) runQueued(q *queuedRun, queued time.Duration) {\n\tx.d.runs.add(q.r, x.d.heartbeat.guardDelay(q.r.leaseDeadline), func() { x.d.heartbeat.guardFired(q.r) })\n"},
		},
		Checks: []check{{"./scheduler/", "^TestQueuedRunsRenewedWhileTheyWait$"}},
	},
	{
		Name: "outcome-retry-past-deadline", Bug: "the outcome write retries any transient error past the lease deadline (not only while the server refuses writes)",
		Rule:   "outcome write retried past the lease deadline on a transient error",
		Edits:  []edit{{"scheduler/outcome.go", "!(refusesWrites(err) && now.Sub(start) < outcomeRefusalLimit*w.Lease)", "!(now.Sub(start) < outcomeRefusalLimit*w.Lease)"}},
		Checks: []check{{"./scheduler/", "^TestOutcomeWriteGivesUpAtTheLeaseDeadline$/^transient$"}},
	},
	{
		Name: "outcome-refusal-not-retried", Bug: "the outcome write gives up at the lease deadline while the server refuses writes (read-only)",
		Rule:   "outcome write refused by a read-only server given up",
		Edits:  []edit{{"scheduler/outcome.go", "!(refusesWrites(err) && now.Sub(start) < outcomeRefusalLimit*w.Lease)", "!(refusesWrites(err) && now.Sub(start) < 0)"}},
		Checks: []check{{"./scheduler/", "^TestOutcomeWriteGivesUpAtTheLeaseDeadline$/^read-only$"}},
	},
	{
		Name: "given-up-write-keeps-run", Bug: "a given-up outcome write leaves its run in the run table (renewed for ever, never rescued)",
		Rule:   "run renewed after its outcome write was given up",
		Edits:  []edit{{"scheduler/dispatcher.go", "\tif r := d.runs.remove(c.Fence); r != nil {\n", "\tif writeErr != nil {\n\t} else if r := d.runs.remove(c.Fence); r != nil {\n"}},
		Checks: []check{{"./scheduler/", "^TestGivenUpOutcomeWriteLeavesTheRunToTheRescuer$"}},
	},
	{
		Name: "heartbeat-any-running-held", Bug: "the heartbeat takes any RUNNING row as still held, whatever its owner and attempt",
		Rule:   "run whose job another owner holds not cancelled within one heartbeat",
		Edits:  []edit{{"scheduler/heartbeat.go", "holds := ok && st.Status == jobq.StateRunning && st.Owner == p.Owner && st.Attempt == r.job.Attempt", "holds := ok && st.Status == jobq.StateRunning"}},
		Checks: []check{{"./scheduler/", "^TestRunHeldByAnotherOwnerCancelledWithinOneHeartbeat$"}},
	},
	{
		Name: "runqueue-ignores-recent", Bug: "the run queue offers every place, whatever finished recently",
		Rule:   "run queue offered places for finishes outside its window",
		Edits:  []edit{{"scheduler/pool.go", "places := min(s.queueMax, s.recent.places(time.Now(), s.workers))\n", "places := s.queueMax\n"}},
		Checks: []check{{"./scheduler/", "^TestRunQueueOffersPlacesOnlyForRecentFinishes$"}},
	},
	{
		Name: "runqueue-window-never-slides", Bug: "the run queue's count of recent finishes never leaves its 100 ms window",
		Rule:   "run queue offered places for finishes outside its window",
		Edits:  []edit{{"scheduler/pool.go", "\tcase d < runQueueHorizon:\n", "\tcase d < 1000*runQueueHorizon:\n"}},
		Checks: []check{{"./scheduler/", "^TestRunQueueOffersPlacesOnlyForRecentFinishes$"}},
	},
	{
		Name: "promoter-early", Bug: "the promoter makes jobs WAITING up to 1 s before their run_at",
		Rule:   "promoter promoted a job before its run_at",
		Edits:  []edit{{gen, "WHERE due_status = 'SCHEDULED' AND run_at <= NOW(6)\nORDER BY run_at\nLIMIT ?\nFOR UPDATE SKIP LOCKED", "WHERE due_status = 'SCHEDULED' AND run_at <= NOW(6) + INTERVAL 1 SECOND\nORDER BY run_at\nLIMIT ?\nFOR UPDATE SKIP LOCKED"}},
		Checks: []check{{"./scheduler/", "^TestPromoterNeverPromotesBeforeRunAt$"}},
	},
	{
		Name: "serve-no-idle-tx-timeout", Bug: "jobq serve no longer sets idle_transaction_timeout on its sessions",
		Rule:   "serve's sessions must carry idle_transaction_timeout",
		Edits:  []edit{{"app/app.go", "store.PoolConfig{MaxOpen: pool, IdleTxTimeout: r.cfg.Scheduler.Lease / 5}", "store.PoolConfig{MaxOpen: pool}"}},
		Checks: []check{{"./app/", "^TestServeSessionsCarryIdleTransactionTimeout$"}},
	},
	{
		Name: "batch-conflict-as-existing", Bug: "batch submit's one-by-one fallback answers a conflicting body as existing",
		Rule:   "batch item answered unlike a single submit",
		Edits:  []edit{{"store/submit_many.go", "out[i] = jobq.SubmitOutcome{ID: job.ID, Conflict: true}", "out[i] = jobq.SubmitOutcome{ID: job.ID}"}},
		Checks: []check{{"./service/", "^(TestBatchOverlappedByAConcurrentSubmitAnswersAsSingleSubmits|TestOverlappingConcurrentBatchesAnswerAsSingleSubmits)$"}},
	},
	{
		Name: "split-without-fence-read", Bug: "the completion split takes every fenced success as live (the stale one sinks each split: row by row)",
		Rule:   "want the split batch's one insert",
		Edits:  []edit{{"store/complete.go", "if c.Outcome == jobq.OutcomeSuccess && live[c.Fence] {", "if c.Outcome == jobq.OutcomeSuccess {"}},
		Checks: []check{{"./store/", "^TestStaleSuccessSplitsTheBatch$"}},
	},
	{
		Name: "split-tried-once", Bug: "a batch overtaken by a rescue during its split goes row by row at once (no second split)",
		Rule:   "is split again, up to 3 times",
		Edits:  []edit{{"store/complete.go", "const splitTries = 3", "const splitTries = 1"}},
		Checks: []check{{"./store/", "^TestRunTurningStaleDuringTheSplit$"}},
	},
	{
		Name: "dst-repeat-second", Bug: "DST planner: a local time that occurs twice fires at its second occurrence",
		Rule:   "DST rule broken",
		Edits:  []edit{{"cronplan/wallclock.go", "(first.IsZero() || u.Before(first))", "(first.IsZero() || u.After(first))"}},
		Checks: []check{{"./cronplan/", "^TestDSTRule$"}},
	},
	{
		Name: "dst-gap-old-offset", Bug: "DST planner: a skipped local time fires at the wall time read with the old offset (an hour after the gap), as robfig/cron does",
		Rule:   "DST rule broken",
		Edits:  []edit{{"cronplan/wallclock.go", "\treturn start\n}", "\t_ = start\n\treturn wall.Add(-time.Duration(before) * time.Second)\n}"}},
		Checks: []check{{"./cronplan/", "^TestDSTRule$"}},
	},
	{
		Name: "checker-reset-excuses-release", Bug: "chaos checker: a connection reset excuses any release",
		Rule:   "a reset (retried) explains no release but a lost claim's",
		Edits:  []edit{{"testbed/chaos/checker/checker.go", "(f.excuses(h.Lease) || lostClaim)", "(f.excuses(h.Lease) || lostClaim || f.Kind == \"reset\")"}},
		Checks: []check{{"./testbed/chaos/checker/", "^TestUnexplainedReleaseReported$"}},
	},
	{
		Name: "checker-stop-excuses-earlier-release", Bug: "chaos checker: the final stop excuses releases at shutdown that came before it",
		Rule:   "the final stop explains no release at shutdown before it",
		Edits:  []edit{{"testbed/chaos/checker/checker.go", "if !h.Stopped.IsZero() && !e.FinishedAt.Before(h.Stopped) {", "if !h.Stopped.IsZero() {"}},
		Checks: []check{{"./testbed/chaos/checker/", "^TestUnexplainedReleaseReported$"}},
	},
	{
		Name: "complete-secret-unchecked", Bug: "remote executor: a completion (log, progress) whose task token's secret does not match is accepted",
		Rule: "want 403 forbidden naming task_token",
		Edits: []edit{{"scheduler/remote.go", "\tif !pt.verify(st.Nonce) || (allow != nil && !allow(st.JobType)) {\n\t\treturn ErrTokenForbidden",
			"\tif allow != nil && !allow(st.JobType) {\n\t\treturn ErrTokenForbidden"}},
		Checks: []check{{"./app/", "^TestWorkerForgedAndStaleTokensChangeNothing$"}},
	},
	{
		Name: "heartbeat-secret-unchecked", Bug: "remote executor: a heartbeat whose task token's secret does not match renews the lease",
		Rule:   "want one lost",
		Edits:  []edit{{"scheduler/remote.go", "st.Attempt != pt.Attempt || !pt.verify(st.Nonce) || (allow", "st.Attempt != pt.Attempt || (allow"}},
		Checks: []check{{"./app/", "^TestWorkerForgedAndStaleTokensChangeNothing$"}},
	},
	{
		Name: "renew-fenced-attempt-ge", Bug: "remote renewal fenced by attempt >= (a stale attempt's heartbeat renews the run holding the job now)",
		Rule:   "a stale attempt's renewal moved the lease",
		Edits:  []edit{{"store/workers.go", `") AND status = 'RUNNING' AND attempt = CASE id")`, `") AND status = 'RUNNING' AND attempt >= CASE id")`}},
		Checks: []check{{"./store/", "^TestRemoteRenewalFencedByAttempt$"}},
	},
	{
		Name: "token-secret-lenient", Bug: "task token secret decoded leniently (padding bits ignored: a second spelling of the secret is accepted)",
		Rule:   "accepted as the real one",
		Edits:  []edit{{"scheduler/remote.go", "base64.RawURLEncoding.Strict().DecodeString(parts[2])", "base64.RawURLEncoding.DecodeString(parts[2])"}},
		Checks: []check{{"./scheduler/", "^(TestTaskTokenSecretHasOneSpelling|TestParseTaskTokenStrictSecret)$"}},
	},
	{
		Name: "unblock-outside-completion-tx", Bug: "workflow: a success's children are unblocked on another connection, outside the completion's transaction (kept when it rolls back)",
		Rule: "child unblocked by a completion that rolled back",
		Edits: []edit{{"store/complete.go", "\tif c.HasChildren || c.ConcurrencyKey != \"\" {\n\t\tif err := settleOne(ctx, q, c.ID, t); err != nil {\n",
			"\tif c.HasChildren || c.ConcurrencyKey != \"\" {\n\t\tif end, err := q.JobEndState(ctx, c.ID); err != nil {\n\t\t\treturn false, err\n\t\t} else if c.HasChildren && jobq.JobState(end.Status) == jobq.StateSuccess {\n" +
				"\t\t\tif _, err := settleChildren(ctx, s.q, []uint64{c.ID}, nil); err != nil {\n\t\t\t\treturn false, err\n\t\t\t}\n\t\t} else if err := settleOne(ctx, q, c.ID, t); err != nil {\n"}},
		Checks: []check{{"./store/", "^TestWorkflowChildUnblockedInTheCompletionTransaction$"}},
	},
	{
		Name: "retried-completion-settles-again", Bug: "workflow: a completion retried after a lost acknowledgement decrements its children's counters again",
		Rule: "a retried completion settled its children again",
		Edits: []edit{{"store/complete.go", "if done, err := alreadyApplied(ctx, q, c); err != nil || done {\n",
			"if done, err := alreadyApplied(ctx, q, c); err != nil || done {\n\t\t\tif err == nil && c.HasChildren {\n\t\t\t\terr = settleOne(ctx, q, c.ID, keyTally{})\n\t\t\t}\n"}},
		Checks: []check{{"./store/", "^TestWorkflowRetriedCompletionSettlesChildrenOnce$"}},
	},
	{
		Name: "failed-parent-decrements-cancel-edge", Bug: "workflow: a parent that failed for good decrements its children on 'cancel' edges (they run) instead of cancelling them",
		Rule:   "after a failed:",
		Edits:  []edit{{"store/workflow.go", "if jobq.OnParentFailure(e.OnParentFailure) == jobq.OnParentFailureRun {", "if jobq.OnParentFailure(e.OnParentFailure) != \"\" {"}},
		Checks: []check{{"./store/", "^TestWorkflowFailurePolicyAndRetry$"}},
	},
	{
		Name: "give-back-spends-retry", Bug: "run queue: a given-back run is failed with a retry (retry_times+1) instead of released",
		Rule: "a give-back spends no retry",
		Edits: []edit{{"scheduler/dispatcher.go", "x.d.settle(q.r, q.h, releaseUnstarted(q.r.job, \"released: waited in the run queue longer than the run-queue wait; back to WAITING for any replica\"))",
			"x.d.settle(q.r, q.h, jobq.Completion{Fence: q.r.job.Fence(), JobType: q.r.job.JobType, Outcome: jobq.OutcomeFailed, Retry: true, Error: \"given back\", DueAt: q.r.job.RunAt})"}},
		Checks: []check{{"./scheduler/", "^TestRunQueueGivesBackWithoutSpendingARetry$"}},
	},
	{
		Name: "give-back-never", Bug: "run queue: the give-back sweep is never armed (a queued run waits for this replica's worker however long)",
		Rule:   "queued run not given back",
		Edits:  []edit{{"scheduler/runqueue.go", "if rq.wait <= 0 || rq.stopped || rq.sweepArmed {", "if rq.wait > 0 || rq.stopped || rq.sweepArmed {"}},
		Checks: []check{{"./scheduler/", "^TestRunQueueGivesBackWithoutSpendingARetry$"}},
	},
	{
		Name: "remote-timeout-ignored", Bug: "remote: a run past its timeout_ms is renewed at every heartbeat (the worker holds the job as long as it likes)",
		Rule:   "want lost",
		Edits:  []edit{{"scheduler/remote.go", "if st.Timeout > 0 && st.Running > st.Timeout+x.cfg.HeartbeatInterval {", "if st.Timeout < 0 && st.Running > st.Timeout+x.cfg.HeartbeatInterval {"}},
		Checks: []check{{"./app/", "^TestWorkerRunPastTimeoutFailsAtHeartbeat$"}},
	},
	{
		Name: "batch-answer-retried", Bug: "client: a batch completion answered 200 without one result per completion is retried as a batch until the lease ends",
		Rule:   "never sent alone",
		Edits:  []edit{{"client/worker_complete.go", "case errors.Is(err, errBatchShape):", "case errors.Is(err, errBatchShape) && false:"}},
		Checks: []check{{"./client/", "^TestWorkerBatchAnswerWithoutResultsSendsAlone$"}},
	},
	{
		Name: "split-drops-wide-parent", Bug: "completer: the split of a batch by unblock width loses the last group of parents",
		Rule:   "want [[2 5] [1] [3 3 4] [6]]",
		Edits:  []edit{{"scheduler/completer_split.go", "	if len(cur) > 0 {\n\t\tgroups = append(groups, cur)\n\t}", "	_ = cur"}},
		Checks: []check{{"./scheduler/", "^TestSplitByWidths$"}},
	},
	{
		Name: "rate-window-not-counted", Bug: "rate limit: the limited claim counts the starts after NOW(6) + P (none) instead of the window",
		Rule:   "second claim in the same window took",
		Edits:  []edit{{"gen/jobqdb/ops.sql.go", "WHERE job_type = ?\n  AND started_at > NOW(6) - INTERVAL ? MICROSECOND\n`", "WHERE job_type = ?\n  AND started_at > NOW(6) + INTERVAL ? MICROSECOND\n`"}},
		Checks: []check{{"./store/", "^TestRateLimitedClaimTakesWhatTheWindowAllows$"}},
	},
	{
		Name: "rate-start-not-recorded", Bug: "rate limit: the limited claim records none of its starts in rate_start",
		Rule:   "second claim in the same window took",
		Edits:  []edit{{"store/ops.go", "q.RateStartRecord(ctx, ids)", "q.RateStartRecord(ctx, nil)"}},
		Checks: []check{{"./store/", "^TestRateLimitedClaimTakesWhatTheWindowAllows$"}},
	},
	{
		Name: "rate-limited-in-fast-claim", Bug: "rate limit: the ordinary skiplocked claim takes rate-limited types (TypesExcluded leaves them in)",
		Rule:   "of a rate-limited type",
		Edits:  []edit{{gen, "WHERE paused = 1 OR max_running > 0 OR rate_starts > 0\n", "WHERE paused = 1 OR max_running > 0\n"}},
		Checks: []check{{"./store/", "^TestRateLimitedClaimTakesWhatTheWindowAllows$"}},
	},
	{
		Name: "unique-window-never-passes", Bug: "uniqueness window: a key held for unique_for_ms is released only a day after its window",
		Rule:   "after the window",
		Edits:  []edit{{gen, "AND ((unique_until IS NOT NULL AND unique_until <= NOW(6))\n", "AND ((unique_until IS NOT NULL AND unique_until <= NOW(6) - INTERVAL 1 DAY)\n"}},
		Checks: []check{{"./store/", "^TestUniqueForWindow$"}},
	},
	{
		Name: "unique-while-active-released-early", Bug: "uniqueness window: a key held while active is released while its job still waits or runs",
		Rule:   "while WAITING",
		Edits:  []edit{{gen, "OR (unique_while_active = 1 AND status IN ('SUCCESS', 'FAILED', 'CANCELED')))\n`", "OR (unique_while_active = 1 AND status IN ('WAITING', 'RUNNING', 'SUCCESS', 'FAILED', 'CANCELED')))\n`"}},
		Checks: []check{{"./store/", "^TestUniqueWhileActive$"}},
	},
	{
		Name: "unique-permanent-released", Bug: "uniqueness window: a permanent job_key (no window) is released once its job is terminal",
		Rule: "resubmit of a terminal permanent key",
		Edits: []edit{
			{"store/jobs.go", "if existing.UniqueUntil != nil || existing.UniqueWhileActive {", "if existing.ID != 0 {"},
			{gen, "OR (unique_while_active = 1 AND status IN ('SUCCESS', 'FAILED', 'CANCELED')))\n`", "OR (status IN ('SUCCESS', 'FAILED', 'CANCELED')))\n`"},
		},
		Checks: []check{{"./store/", "^TestUniqueDefaultKeyIsPermanent$"}},
	},
	{
		Name: "overlap-skip-fires", Bug: "overlap policy skip: an instant fires while the schedule's previous run is still running",
		Rule:   "want each skipped for overlap",
		Edits:  []edit{{"store/fire.go", "\tcase jobq.OverlapSkip:\n\t\tif busy {", "\tcase jobq.OverlapSkip:\n\t\tif busy && st == \"\" {"}},
		Checks: []check{{"./scheduler/", "^TestOverlapSkipWhileRunning$"}},
	},
	{
		Name: "overlap-queue-one-parks-many", Bug: "overlap policy queue_one: every instant while a run is busy parks another run (no limit of one)",
		Rule:   "want at most one",
		Edits:  []edit{{"store/fire.go", "if busy && runs.queued != 0 {", "if busy && runs.queued != 0 && st == \"\" {"}},
		Checks: []check{{"./scheduler/", "^TestOverlapQueueOneParksAndReleases$"}},
	},
	{
		Name: "overlap-cancel-previous-keeps", Bug: "overlap policy cancel_previous: the next instant fires without cancelling the run still going",
		Rule:   "without a cancel request",
		Edits:  []edit{{"store/fire.go", "\tcase jobq.OverlapCancelPrevious:\n\t\tif busy {", "\tcase jobq.OverlapCancelPrevious:\n\t\tif busy && st == \"\" {"}},
		Checks: []check{{"./scheduler/", "^TestOverlapCancelPrevious$"}},
	},
	{
		Name: "rate-key-claim-uncounted", Bug: "rate limit per key: the limited claim checks each key's recorded window but not the starts it takes in the same claim",
		Rule:   "first claim took",
		Edits:  []edit{{"store/ops.go", "if wins[c.RateKey].starts+taken[c.RateKey] < limit {", "if wins[c.RateKey].starts < limit {"}},
		Checks: []check{{"./store/", "^TestRateLimitPerKeyClaim$"}},
	},
	{
		Name: "rate-key-never-released", Bug: "rate limit per key: a key's HELD jobs are never released when its window opens",
		Rule:   "claim after the windows opened took",
		Edits:  []edit{{"store/ops.go", "due, err := q.RateHoldDue(ctx, jobqdb.RateHoldDueParams{JobType: jobType, Limit: rateReleaseKeys})", "due, err := []string(nil), error(nil)"}},
		Checks: []check{{"./store/", "^TestRateLimitPerKeyClaim$"}},
	},
	{
		Name: "unwritten-holds-no-place", Bug: "run queue: completions waiting unwritten hold no place (a replica whose writes fall behind claims on)",
		Rule:   "want 550",
		Edits:  []edit{{"scheduler/pool.go", "places -= max(0, int(s.unwritten.Load())-s.unwrittenAllowed)", "places -= 0"}},
		Checks: []check{{"./scheduler/", "^TestUnwrittenCompletionsHoldRunQueuePlaces$"}},
	},
	{
		Name: "give-back-while-writes-behind", Bug: "run queue: a queue that stands because its completions are unwritten gives its jobs back anyway",
		Rule:   "given back while the writes were behind",
		Edits:  []edit{{"scheduler/runqueue.go", "if now.Sub(rq.taken) <= rq.wait || (rq.writesBehindFunc != nil && rq.writesBehindFunc()) {", "if now.Sub(rq.taken) <= rq.wait {"}},
		Checks: []check{{"./scheduler/", "^TestRunQueueKeepsJobsWhileWritesAreBehind$"}},
	},
}

func main() {
	only := flag.String("run", "", "only mutants whose name matches this regexp")
	verbose := flag.Bool("v", false, "print the failing tests' output of each caught mutant")
	flag.Parse()
	if err := run(*only, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		os.Exit(1)
	}
}

func run(only string, verbose bool) error {
	re, err := regexp.Compile(only)
	if err != nil {
		return err
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return fmt.Errorf("not in a git checkout: %w", err)
	}
	repo := strings.TrimSpace(string(top))
	dir, err := os.MkdirTemp("", "jobq-mutants-")
	if err != nil {
		return err
	}
	if out, err := exec.Command("git", "-C", repo, "worktree", "add", "--detach", dir, "HEAD").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("git worktree add: %v\n%s", err, out)
	}
	defer func() {
		if out, err := exec.Command("git", "-C", repo, "worktree", "remove", "--force", dir).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "mutants: git worktree remove %s: %v\n%s", dir, err, out)
		}
	}()
	head, _ := exec.Command("git", "-C", repo, "rev-parse", "--short", "HEAD").Output()
	fmt.Printf("mutants of HEAD %s in %s (removed at the end)\n", strings.TrimSpace(string(head)), dir)

	var selected []mutant
	for _, m := range mutants {
		if re.MatchString(m.Name) {
			selected = append(selected, m)
		}
	}
	// Baseline: every test a selected mutant uses passes on the real code.
	seen := map[check]bool{}
	for _, m := range selected {
		for _, c := range m.Checks {
			if seen[c] {
				continue
			}
			seen[c] = true
			if out, err := goTest(dir, c); err != nil {
				return fmt.Errorf("baseline: %s -run %s fails on the unmodified code:\n%s", c.Pkg, c.Run, out)
			}
		}
	}
	fmt.Printf("baseline: %d tests pass on the unmodified code\n\n", len(seen))

	type row struct {
		m   mutant
		res result
	}
	var rows []row
	caught := 0
	for _, m := range selected {
		start := time.Now()
		res := try(dir, m)
		if res.verdict == "caught" {
			caught++
		}
		rows = append(rows, row{m, res})
		fmt.Printf("%-38s %-9s %-10s %6.1fs  %s\n", m.Name, res.verdict, res.how, time.Since(start).Seconds(), res.by)
		if verbose && res.out != "" {
			fmt.Println(indent(res.out))
		}
		if out, err := exec.Command("git", "-C", dir, "checkout", "--", ".").CombinedOutput(); err != nil {
			return fmt.Errorf("restore worktree: %v\n%s", err, out)
		}
	}
	fmt.Printf("\n| mutant | planted bug | rule the test must name | caught by | how | verdict |\n|---|---|---|---|---|---|\n")
	for _, r := range rows {
		by := r.res.by
		if by == "" {
			var tests []string
			for _, c := range r.m.Checks {
				tests = append(tests, fmt.Sprintf("`%s` %s", c.Pkg, strings.Trim(c.Run, "^$")))
			}
			by = "(none of " + strings.Join(tests, ", ") + ")"
		}
		fmt.Printf("| %s | %s | %q | %s | %s | %s |\n", r.m.Name, r.m.Bug, r.m.Rule, by, r.res.how, r.res.verdict)
	}
	fmt.Printf("\n%d caught by a named assertion, %d not (of %d mutants)\n", caught, len(rows)-caught, len(rows))
	if caught != len(rows) {
		return fmt.Errorf("%d mutants not caught by a named assertion", len(rows)-caught)
	}
	return nil
}

// result is what became of one mutant.
type result struct {
	// verdict: "caught" (a listed test failed naming the mutant's rule),
	// "timeout" (one failed only by a wait that ran out), "unnamed" (one
	// failed, neither naming the rule nor by a timeout), "survived" (all
	// passed), "n/a" (an edit no longer matches), "broken" (no build).
	verdict string
	// how is "assertion", "timeout", "other failure" or "-".
	how string
	// by names the failing test(s) of the deciding check: `pkg` TestName.
	by  string
	out string
}

// timeoutMarkers are what a failing test's output shows when a wait ran
// out rather than an assertion failed: go test's own deadline and this
// repository's wait helpers (waitFor, recv: "timed out after 2m0s waiting
// for …"; a few tests: "timed out waiting for …").
var timeoutMarkers = []string{"panic: test timed out", "timed out after", "timed out waiting"}

var failLine = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)

// try applies m's edits in dir and runs its checks in order until one
// fails naming m.Rule (caught); the first other failure decides the
// verdict otherwise.
func try(dir string, m mutant) result {
	for _, e := range m.Edits {
		path := filepath.Join(dir, e.File)
		b, err := os.ReadFile(path)
		if err != nil {
			return result{verdict: "n/a", how: "-", out: err.Error()}
		}
		if n := strings.Count(string(b), e.Old); n != 1 {
			return result{verdict: "n/a", how: "-", out: fmt.Sprintf("%s: the text to replace occurs %d times, want 1", e.File, n)}
		}
		if err := os.WriteFile(path, []byte(strings.Replace(string(b), e.Old, e.New, 1)), 0o644); err != nil {
			return result{verdict: "n/a", how: "-", out: err.Error()}
		}
	}
	res := result{verdict: "survived", how: "-"}
	for _, c := range m.Checks {
		out, err := goTest(dir, c)
		if err == nil {
			continue
		}
		if strings.Contains(out, "[build failed]") || strings.Contains(out, "[setup failed]") {
			return result{verdict: "broken", how: "-", out: out}
		}
		var failed []string
		for _, f := range failLine.FindAllStringSubmatch(out, -1) {
			failed = append(failed, f[1])
		}
		by := fmt.Sprintf("`%s` %s", c.Pkg, strings.Join(failed, ", "))
		if m.Rule != "" && strings.Contains(out, m.Rule) {
			return result{verdict: "caught", how: "assertion", by: by, out: out}
		}
		if res.verdict != "survived" {
			continue
		}
		res = result{verdict: "unnamed", how: "other failure", by: by, out: out}
		for _, mk := range timeoutMarkers {
			if strings.Contains(out, mk) {
				res.verdict, res.how = "timeout", "timeout"
				break
			}
		}
	}
	return res
}

func goTest(dir string, c check) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	// go test's own deadline first, so a hung test says so ("panic: test
	// timed out") before the context kills it.
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-timeout", "6m", "-run", c.Run, c.Pkg)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > 30 {
		lines = append(lines[:30], "…")
	}
	return "    " + strings.Join(lines, "\n    ")
}
