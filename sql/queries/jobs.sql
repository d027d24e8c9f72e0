-- Every statement the scheduler and the API run against job_queue and
-- job_execution. sqlc generates gen/jobqdb from this file.
-- All times come from the database clock (NOW(6)).

-- name: JobInsert :execlastid
INSERT INTO job_queue (
    job_key, job_type, params, request_hash, status, priority, max_retry,
    timeout_ms, run_at, create_time, update_time, lane
) VALUES (
    sqlc.arg(job_key), sqlc.arg(job_type), sqlc.arg(params), sqlc.arg(request_hash),
    'WAITING', sqlc.arg(priority), sqlc.arg(max_retry), sqlc.arg(timeout_ms),
    NOW(6), NOW(6), NOW(6), sqlc.arg(lane)
);

-- name: JobInsertAt :execlastid
-- A submit with a run_at: SCHEDULED while run_at is ahead of the database
-- clock (the promoter makes it WAITING when due), WAITING at once otherwise.
INSERT INTO job_queue (
    job_key, job_type, params, request_hash, status, priority, max_retry,
    timeout_ms, run_at, create_time, update_time, lane
) VALUES (
    sqlc.arg(job_key), sqlc.arg(job_type), sqlc.arg(params), sqlc.arg(request_hash),
    IF(sqlc.arg(run_at) > NOW(6), 'SCHEDULED', 'WAITING'), sqlc.arg(priority), sqlc.arg(max_retry), sqlc.arg(timeout_ms),
    sqlc.arg(run_at), NOW(6), NOW(6), sqlc.arg(lane)
);

-- name: JobKeysLookup :many
-- A batch submit's read of the keys that already exist (uk_job_key), and of
-- the ids of the jobs it just inserted. The batch's multi-row INSERT itself
-- is built in store/submit_many.go: sqlc cannot express a VALUES list of
-- variable length. It has JobInsert's columns and defaults.
-- Only the keys' holders (key_release = 0): released jobs gave their key
-- up. windowed: the holder holds its key only for a window (a submit of the
-- key may release it: the batch then goes job by job).
SELECT id, job_key, request_hash, (unique_until IS NOT NULL OR unique_while_active = 1) AS windowed
FROM job_queue WHERE key_release = 0 AND job_key IN (sqlc.slice(job_keys));

-- name: JobGetByID :one
SELECT * FROM job_queue WHERE id = ?;

-- name: JobGetByKey :one
-- The key's holder, or (every job of the key released its key) the newest:
-- a holder is always the newest job of its key.
SELECT * FROM job_queue WHERE job_key = ? ORDER BY id DESC LIMIT 1;

-- name: JobInsertUnique :execlastid
-- JobInsertAt for a submit with a uniqueness window: unique_until is
-- NOW(6) + unique_for_ms (NULL for 0), run_at NULL means due now, rate_key
-- NULL none.
INSERT INTO job_queue (
    job_key, job_type, params, request_hash, status, priority, max_retry,
    timeout_ms, run_at, create_time, update_time, lane, unique_until, unique_while_active, rate_key
) VALUES (
    sqlc.arg(job_key), sqlc.arg(job_type), sqlc.arg(params), sqlc.arg(request_hash),
    IF(COALESCE(sqlc.narg(run_at), NOW(6)) > NOW(6), 'SCHEDULED', 'WAITING'), sqlc.arg(priority), sqlc.arg(max_retry), sqlc.arg(timeout_ms),
    COALESCE(sqlc.narg(run_at), NOW(6)), NOW(6), NOW(6), sqlc.arg(lane),
    IF(CAST(sqlc.arg(unique_for_ms) AS SIGNED) > 0, TIMESTAMPADD(MICROSECOND, 1000 * CAST(sqlc.arg(unique_for_ms) AS SIGNED), NOW(6)), NULL),
    sqlc.arg(unique_while_active), sqlc.narg(rate_key)
);

-- name: JobKeyHolderLock :one
-- The current holder of a job_key, locked (a batch submit's re-read after
-- JobKeyRelease matched nothing because a concurrent submit had replaced
-- the holder it read).
SELECT id, request_hash FROM job_queue FORCE INDEX (uk_job_key)
WHERE job_key = ? AND key_release = 0
FOR UPDATE;

-- name: JobKeyRelease :execrows
-- Releases job_key from its holder when the holder's window has passed
-- (unique_until on the database clock) or, held only while active, it is
-- terminal; a permanent holder is never released. Runs in the submit's
-- transaction, which then inserts the new job: the holder's index entry
-- stays locked until then, so concurrent submits of the key make one job.
UPDATE job_queue FORCE INDEX (uk_job_key)
SET key_release = id, update_time = NOW(6)
WHERE job_key = ? AND key_release = 0
  AND ((unique_until IS NOT NULL AND unique_until <= NOW(6))
       OR (unique_while_active = 1 AND status IN ('SUCCESS', 'FAILED', 'CANCELED')));

-- name: JobList :many
SELECT * FROM job_queue
WHERE id < sqlc.arg(before_id)
ORDER BY id DESC
LIMIT ?;

-- name: JobListWaiting :many
-- WAITING jobs, from idx_scan's WAITING range (idx_lease keys PARKED jobs
-- as WAITING too).
SELECT * FROM job_queue
WHERE scan_status = 'WAITING' AND status = 'WAITING' AND id < sqlc.arg(before_id)
ORDER BY id DESC
LIMIT ?;

-- name: JobListParked :many
-- PARKED jobs, from idx_key_parked (parked_key is set only while a job is
-- PARKED).
SELECT * FROM job_queue
WHERE parked_key IS NOT NULL AND status = 'PARKED' AND id < sqlc.arg(before_id)
ORDER BY id DESC
LIMIT ?;

-- name: JobListByStatus :many
SELECT * FROM job_queue
WHERE index_status = sqlc.arg(index_status) AND status = sqlc.arg(status) AND id < sqlc.arg(before_id)
ORDER BY id DESC
LIMIT ?;

-- name: JobListByType :many
SELECT * FROM job_queue
WHERE job_type = sqlc.arg(job_type) AND id < sqlc.arg(before_id)
ORDER BY id DESC
LIMIT ?;

-- name: JobListRunningByType :many
-- A type's RUNNING jobs, from idx_lease's RUNNING range (in idx_type_status
-- they sit among the type's WAITING backlog).
SELECT * FROM job_queue FORCE INDEX (idx_lease)
WHERE index_status = 'RUNNING' AND status = 'RUNNING' AND job_type = sqlc.arg(job_type) AND id < sqlc.arg(before_id)
ORDER BY id DESC
LIMIT ?;

-- name: JobListByTypeStatus :many
SELECT * FROM job_queue
WHERE job_type = sqlc.arg(job_type) AND type_status = sqlc.arg(type_status) AND status = sqlc.arg(status)
  AND id < sqlc.arg(before_id)
ORDER BY id DESC
LIMIT ?;

-- name: JobListByKeyPrefix :many
-- Jobs whose job_key starts with a prefix: key_like is the prefix with LIKE's
-- wildcards escaped, then '%', so the range is read from uk_job_key. Status
-- and job_type '' match any. FORCE INDEX: left alone, the optimizer takes
-- ORDER BY id DESC LIMIT as a reason to walk the primary key backwards,
-- which reads the whole table when the matching keys are few or old
-- (1M rows, prefix matching 11 %: 3.6 s; with the hint 0.6 s). The hint
-- bounds a page's cost by the number of keys with the prefix.
SELECT * FROM job_queue FORCE INDEX (uk_job_key)
WHERE job_key LIKE sqlc.arg(key_like)
  AND (sqlc.arg(status) = '' OR status = sqlc.arg(status))
  AND (sqlc.arg(job_type) = '' OR job_type = sqlc.arg(job_type))
  AND id < sqlc.arg(before_id)
ORDER BY id DESC
LIMIT ?;

-- name: JobScanAvailable :many
-- The scan: ids and fencing tokens of due WAITING jobs, in idx_scan order.
-- idx_scan is on scan_status (status while WAITING, else NULL: migration
-- 018), which every read of idx_scan names: MariaDB uses an index on a
-- virtual column only for a query that names the column.
-- Used as the idle probe and as the read half of the cas claim. Only lane 0
-- (jobs the replicas' handlers run; lane 1 is fetched by remote workers). Paused and
-- limited job types (job_type_control: paused, a concurrency limit or a rate
-- limit) are left out in the same statement: the subquery is materialized
-- once, so no type control costs no extra query.
SELECT id, attempt FROM job_queue
WHERE scan_status = 'WAITING' AND lane = 0 AND run_at <= NOW(6)
  AND job_type NOT IN (SELECT c.job_type FROM job_type_control AS c WHERE c.paused = 1 OR c.max_running > 0 OR c.rate_starts > 0)
ORDER BY priority DESC, run_at, id
LIMIT ?;

-- name: JobIdleProbe :one
-- The skiplocked scan's idle probe and the promoter's probe in one round
-- trip: how many jobs are due, up to the LIMIT (JobScanAvailable's terms;
-- the claim after it is sized by the count),
-- the earliest SCHEDULED run_at (JobScheduledNext: one dive into idx_due;
-- the zero time when none) and the database clock. Both halves are
-- index-only. An idle replica scans once a second, so its promoter learns
-- the next scheduled instant from the scan and sends no probe of its own.
SELECT CAST((SELECT COUNT(*) FROM (SELECT 1 FROM job_queue
         WHERE scan_status = 'WAITING' AND lane = 0 AND run_at <= NOW(6)
           AND job_type NOT IN (SELECT c.job_type FROM job_type_control AS c WHERE c.paused = 1 OR c.max_running > 0 OR c.rate_starts > 0)
         LIMIT ?) AS d) AS SIGNED) AS due,
       CAST(COALESCE((SELECT MIN(q.run_at) FROM job_queue AS q WHERE q.due_status = 'SCHEDULED'), '0001-01-01') AS DATETIME(6)) AS next_run_at,
       CAST(NOW(6) AS DATETIME(6)) AS db_now;

-- name: JobLockAvailable :many
-- The read half of the skiplocked claim: locks up to LIMIT due rows that no
-- other transaction holds. Paused and limited job types are left out as in
-- JobScanAvailable, but as a constant list the caller read first
-- (TypesExcluded, always holding '' so the list is never empty): the index
-- applies it before a row is locked, where a subquery is applied after,
-- locking every row of a paused backlog the scan steps past. It returns
-- what a handler needs, so the claim needs no read-back of the claimed rows.
SELECT id, job_key, job_type, params, priority, retry_times, max_retry, timeout_ms,
       run_at, attempt, create_time, has_children, workflow_id, concurrency_key
FROM job_queue
WHERE scan_status = 'WAITING' AND lane = 0 AND run_at <= NOW(6)
  AND job_type NOT IN (sqlc.slice(excluded))
ORDER BY priority DESC, run_at, id
LIMIT ?
FOR UPDATE SKIP LOCKED;

-- name: JobClaimMany :execrows
-- The write half of the skiplocked claim, on rows this transaction locked.
-- started_at and the lease base are NOW(6) of this statement, which starts
-- after the locking read holds the rows: a locking read may return a row
-- whose rescue committed after the read began, so its own NOW(6) can precede
-- the previous holder's lease end and the rescue's finished_at.
UPDATE job_queue FORCE INDEX (PRIMARY)
SET status = 'RUNNING',
    attempt = attempt + 1,
    owner = sqlc.arg(owner),
    lease_until = NOW(6) + INTERVAL sqlc.arg(lease_us) MICROSECOND,
    started_at = NOW(6),
    finished_at = NULL,
    update_time = NOW(6)
WHERE id IN (sqlc.slice(ids)) AND status = 'WAITING';

-- name: JobClaimedStartedAt :one
-- The started_at JobClaimMany wrote (one NOW(6) for every row of the claim),
-- read back by primary key after the claim's COMMIT.
SELECT started_at FROM job_queue WHERE id = ?;

-- name: JobHeldBy :many
-- The runs an owner holds on the database: its RUNNING rows. A replica
-- compares them with its run table after a claim whose answer was lost (the
-- connection dropped after the COMMIT reached the server), so a committed
-- claim it never heard of is taken on at once instead of waiting, unrenewed,
-- for a rescue. Only runs claimed within the last within_us microseconds
-- (since the lost claim was sent) are returned: an older run of the owner's
-- that is still RUNNING is one whose outcome write was given up, and belongs
-- to the rescuer. RUNNING rows are few (one per in-flight run on every
-- replica): idx_lease (index_status, lease_until) bounds the read to them.
SELECT id, job_key, job_type, params, priority, retry_times, max_retry, timeout_ms,
       run_at, attempt, create_time, started_at, lease_until, has_children, workflow_id, concurrency_key
FROM job_queue FORCE INDEX (idx_lease)
WHERE index_status = 'RUNNING' AND status = 'RUNNING' AND owner = sqlc.arg(owner)
  AND started_at >= NOW(6) - INTERVAL sqlc.arg(within_us) MICROSECOND;

-- name: JobClaimCAS :execrows
-- The per-row compare-and-set of the cas claim. The attempt guard closes the
-- ABA race: a job re-queued between our read and this update has a new attempt.
UPDATE job_queue
SET status = 'RUNNING',
    attempt = attempt + 1,
    owner = sqlc.arg(owner),
    lease_until = NOW(6) + INTERVAL sqlc.arg(lease_us) MICROSECOND,
    started_at = NOW(6),
    finished_at = NULL,
    update_time = NOW(6)
WHERE id = sqlc.arg(id) AND status = 'WAITING' AND attempt = sqlc.arg(attempt);

-- name: JobGetClaimed :many
-- Reads back the rows a cas or limited claim just won, in the claim's
-- transaction, which holds every row in ids: the filter is on the primary
-- key only (a status term would lead the optimizer to idx_lease and every
-- RUNNING row).
SELECT id, job_key, job_type, params, priority, retry_times, max_retry,
       timeout_ms, run_at, attempt, lease_until, started_at, create_time, has_children, workflow_id, concurrency_key
FROM job_queue
WHERE id IN (sqlc.slice(ids)) AND owner = sqlc.arg(owner);

-- name: LeaseLockRenewable :many
-- The heartbeat's exact renewal, after LeaseRenewSkipLocked renewed some but
-- not all runs (store.LeaseRenewMany: a READ COMMITTED transaction on the
-- heartbeat's own session, which returns the ids it renewed): locks the rows of this
-- owner's in-flight runs that no other transaction holds, by primary key
-- only. A row another transaction holds — most often the run's own outcome
-- write, or a rescuer — is skipped, never waited for: the renewal of every
-- other run does not wait with it. A run whose job was rescued, re-claimed
-- elsewhere or asked to cancel does not match (and at READ COMMITTED its
-- row is not kept locked).
SELECT id FROM job_queue FORCE INDEX (PRIMARY)
WHERE id IN (sqlc.slice(ids))
  AND status = 'RUNNING' AND owner = sqlc.arg(owner) AND cancel_requested = 0
FOR UPDATE SKIP LOCKED;

-- name: LeaseRenewMany :execrows
-- The heartbeat: renews the rows LeaseLockRenewable locked, in one statement,
-- by primary key only (FORCE INDEX), so it never locks a gap of idx_lease.
-- The caller compares the renewed ids with its in-flight runs and reads
-- JobFenceStates for the others, to fence by attempt exactly.
UPDATE job_queue FORCE INDEX (PRIMARY)
SET lease_until = NOW(6) + INTERVAL sqlc.arg(lease_us) MICROSECOND
WHERE id IN (sqlc.slice(ids))
  AND status = 'RUNNING' AND owner = sqlc.arg(owner) AND cancel_requested = 0;

-- name: LeaseRenewSkipLocked :execrows
-- The heartbeat's renewal in one statement and one round trip, in
-- autocommit on the heartbeat's own READ COMMITTED session
-- (store.LeaseRenewMany): the derived table locks, by primary key, the rows
-- of this owner's in-flight runs that no other transaction holds (SKIP
-- LOCKED: a row held by the run's own outcome write, a rescuer or a claim is
-- skipped, never waited for), and the join renews exactly those rows by
-- primary key (STRAIGHT_JOIN: the derived table first, so the outer read
-- touches no other row). The rows are locked only while the statement runs,
-- never across a round trip. It returns a count; when it renewed fewer rows
-- than it was sent, LeaseRenewedIDs reads which (by the stamp it keeps in a
-- session variable).
UPDATE (SELECT l.id FROM job_queue AS l FORCE INDEX (PRIMARY)
        WHERE l.id IN (sqlc.slice(ids))
          AND l.status = 'RUNNING' AND l.owner = sqlc.arg(owner) AND l.cancel_requested = 0
        LIMIT 1000000
        FOR UPDATE SKIP LOCKED) AS r
STRAIGHT_JOIN job_queue AS q FORCE INDEX (PRIMARY) ON q.id = r.id AND (@jobq_renewed_at := NOW(6)) IS NOT NULL
SET q.lease_until = NOW(6) + INTERVAL sqlc.arg(lease_us) MICROSECOND;

-- name: LeaseRenewedIDs :many
-- The rows the session's last LeaseRenewSkipLocked renewed, read on the same
-- session after it renewed fewer rows than it was sent: every row it renewed
-- carries its lease_until: its NOW(6), kept in the session variable
-- @jobq_renewed_at (one NOW(6) per statement, later than any earlier renewal
-- or claim stamped), plus the lease; unless its outcome was written since
-- (no longer RUNNING).
SELECT id FROM job_queue FORCE INDEX (PRIMARY)
WHERE id IN (sqlc.slice(ids)) AND status = 'RUNNING' AND owner = sqlc.arg(owner)
  AND lease_until = @jobq_renewed_at + INTERVAL sqlc.arg(lease_us) MICROSECOND;

-- name: JobFenceStates :many
-- Read after a heartbeat renewed fewer rows than expected, to tell lost runs
-- from cancel requests, and by a completion batch that met a stale run, to
-- split it into live runs (batched again) and the rest (row by row).
SELECT id, attempt, status, owner, cancel_requested, has_children, concurrency_key FROM job_queue
WHERE id IN (sqlc.slice(ids));

-- name: JobCompleteFenced :execrows
-- Success, fenced by attempt: 0 rows means the run is stale. A job whose
-- cancel was requested ends CANCELED even if its handler succeeded.
UPDATE job_queue
SET status = IF(cancel_requested = 1, 'CANCELED', 'SUCCESS'),
    lease_until = NULL,
    finished_at = NOW(6),
    update_time = NOW(6)
WHERE id = sqlc.arg(id) AND attempt = sqlc.arg(attempt) AND status = 'RUNNING';

-- name: JobFailFenced :execrows
-- A failed attempt, fenced by attempt. next_status is WAITING (retry after
-- backoff_us) or FAILED (retries exhausted or the handler discarded the job).
-- A retry with a backoff parks the job SCHEDULED until the promoter finds it
-- due; without one it is WAITING at once.
-- Assignments reference only columns that are not assigned before them, so
-- the result is the same with or without SIMULTANEOUS_ASSIGNMENT.
UPDATE job_queue
SET status = IF(cancel_requested = 1, 'CANCELED',
                IF(sqlc.arg(next_status) = 'WAITING' AND sqlc.arg(backoff_us) > 0, 'SCHEDULED', sqlc.arg(next_status))),
    finished_at = IF(cancel_requested = 1 OR sqlc.arg(next_status) <> 'WAITING', NOW(6), NULL),
    run_at = IF(cancel_requested = 1 OR sqlc.arg(next_status) <> 'WAITING', run_at, NOW(6) + INTERVAL sqlc.arg(backoff_us) MICROSECOND),
    retry_times = IF(cancel_requested = 1, retry_times, retry_times + sqlc.arg(retry_inc)),
    last_error = sqlc.arg(last_error),
    lease_until = NULL,
    update_time = NOW(6)
WHERE id = sqlc.arg(id) AND attempt = sqlc.arg(attempt) AND status = 'RUNNING';

-- name: JobReleaseFenced :execrows
-- Shutdown: a claimed run whose handler never started goes back to WAITING
-- at once, without spending a retry.
UPDATE job_queue
SET status = IF(cancel_requested = 1, 'CANCELED', 'WAITING'),
    finished_at = IF(cancel_requested = 1, NOW(6), NULL),
    lease_until = NULL,
    update_time = NOW(6)
WHERE id = sqlc.arg(id) AND attempt = sqlc.arg(attempt) AND status = 'RUNNING';

-- name: ExecutionRecord :execrows
-- Writes the execution row of one run when its outcome is known: the only
-- write of job_execution per attempt (the claim writes none). It runs just
-- after the run's fenced job update matched, in the same transaction, which
-- holds the row: owner, started_at and due_at (run_at, which the claim and
-- this outcome left unchanged) come from the claimed job row. A run's own
-- outcome (SUCCESS, FAILED, RELEASED) is recorded as CANCELED when a cancel
-- was requested, as the fenced update then ended the job CANCELED: the audit
-- trail says what the job row says. A failure that retries moves run_at and
-- uses ExecutionRecordAfterRetry (or ExecutionRecordBeforeRetry) instead.
-- output is the run's output (NULL for none).
INSERT INTO job_execution (job_id, attempt, owner, started_at, due_at, finished_at, outcome, error, output)
SELECT q.id, q.attempt, COALESCE(q.owner, ''), COALESCE(q.started_at, NOW(6)), q.run_at,
       NOW(6), IF(q.cancel_requested = 1, 'CANCELED', sqlc.arg(outcome)), sqlc.narg(error), sqlc.narg(output)
FROM job_queue AS q
WHERE q.id = sqlc.arg(id) AND q.attempt = sqlc.arg(attempt);

-- name: ExecutionRecordAfterRetry :execrows
-- ExecutionRecord for a failed run that will be retried, just after its
-- fenced job update moved run_at by the backoff: due_at is the run_at the
-- run was claimed at, which the caller kept (jobq.Completion.DueAt).
INSERT INTO job_execution (job_id, attempt, owner, started_at, due_at, finished_at, outcome, error)
SELECT q.id, q.attempt, COALESCE(q.owner, ''), COALESCE(q.started_at, NOW(6)), sqlc.arg(due_at),
       NOW(6), IF(q.cancel_requested = 1, 'CANCELED', sqlc.arg(outcome)), sqlc.narg(error)
FROM job_queue AS q
WHERE q.id = sqlc.arg(id) AND q.attempt = sqlc.arg(attempt);

-- name: ExecutionRecordBeforeRetry :execrows
-- ExecutionRecord for a failed run that will be retried when the caller did
-- not keep the claimed run_at: written before its fenced job update (which
-- moves run_at by the backoff) in the same transaction, it locks the job row
-- and matches only while the run still owns the job (RUNNING with that
-- attempt), so 0 rows means stale.
INSERT INTO job_execution (job_id, attempt, owner, started_at, due_at, finished_at, outcome, error)
SELECT q.id, q.attempt, COALESCE(q.owner, ''), COALESCE(q.started_at, NOW(6)), q.run_at,
       NOW(6), IF(q.cancel_requested = 1, 'CANCELED', sqlc.arg(outcome)), sqlc.narg(error)
FROM job_queue AS q
WHERE q.id = sqlc.arg(id) AND q.attempt = sqlc.arg(attempt) AND q.status = 'RUNNING'
FOR UPDATE;

-- name: ExecutionMarkStale :execrows
-- A completion arrived after the run lost its lease: the job row is not
-- touched; the attempt's audit row, written by the rescue that took the job
-- from it (LEASE_EXPIRED), records that the late write was refused.
-- An outcome the run itself already committed is never overwritten.
UPDATE job_execution
SET outcome = 'STALE', error = sqlc.arg(error), finished_at = COALESCE(finished_at, NOW(6))
WHERE job_id = sqlc.arg(job_id) AND attempt = sqlc.arg(attempt)
  AND (outcome IS NULL OR outcome = 'LEASE_EXPIRED');

-- name: ExecutionGetOutcome :one
-- The recorded outcome of one attempt, to recognise a completion whose
-- commit succeeded although its acknowledgement was lost (a retried
-- completion then finds its own outcome already written).
SELECT outcome FROM job_execution WHERE job_id = sqlc.arg(job_id) AND attempt = sqlc.arg(attempt);

-- name: JobSucceededAt :one
-- Whether the job ended SUCCESS at this attempt: the record of a success the
-- batched completion wrote without an execution row (ExecutionGetOutcome
-- finds none for it).
SELECT CAST(COUNT(*) AS SIGNED) AS n FROM job_queue
WHERE id = sqlc.arg(id) AND attempt = sqlc.arg(attempt) AND status = 'SUCCESS';

-- name: JobRescueCandidates :many
SELECT id, attempt FROM job_queue
WHERE index_status = 'RUNNING' AND status = 'RUNNING' AND lease_until < NOW(6)
ORDER BY lease_until
LIMIT ?;

-- name: ExecutionRecordRescue :execrows
-- The execution row of a run whose lease expired (its replica died, hung or
-- lost the database), written by the rescuer just before JobRescueExpired in
-- the same transaction and under the same conditions: the run never
-- finished, so this is its only row. owner, started_at and due_at come from
-- the job row, which this statement locks — unless another transaction
-- holds it (SKIP LOCKED): the run's own outcome write, another replica's
-- rescue of it, round trips long over a slow link. Then nothing is written
-- and the rescuer moves on instead of waiting; a run still expired is
-- rescued by a later pass.
INSERT INTO job_execution (job_id, attempt, owner, started_at, due_at, finished_at, outcome, error)
SELECT q.id, q.attempt, COALESCE(q.owner, ''), COALESCE(q.started_at, NOW(6)), q.run_at,
       NOW(6), 'LEASE_EXPIRED', 'lease expired'
FROM job_queue AS q
WHERE q.id = sqlc.arg(id) AND q.attempt = sqlc.arg(attempt)
  AND q.status = 'RUNNING' AND q.lease_until < NOW(6)
FOR UPDATE SKIP LOCKED;

-- name: JobRescueExpired :execrows
-- Returns one expired run to WAITING (retry_times+1) or FAILED (retry_times
-- unchanged, as a failed last attempt leaves it), or CANCELED when a cancel
-- was requested. retry_times is assigned last: the terms before it read its
-- old value. Conditioned on status, attempt and lease, so it
-- can never overwrite a run that completed or renewed meanwhile.
-- It touches the row by primary key only (FORCE INDEX: with few expired
-- leases the optimizer would range-scan idx_lease instead, and at
-- REPEATABLE READ lock its gaps, where peers' renewals and claims insert).
UPDATE job_queue FORCE INDEX (PRIMARY)
SET status = CASE WHEN cancel_requested = 1 THEN 'CANCELED'
                  WHEN retry_times < max_retry THEN 'WAITING'
                  ELSE 'FAILED' END,
    finished_at = IF(cancel_requested = 0 AND retry_times < max_retry, NULL, NOW(6)),
    last_error = 'lease expired',
    run_at = NOW(6),
    lease_until = NULL,
    update_time = NOW(6),
    retry_times = retry_times + IF(cancel_requested = 0 AND retry_times < max_retry, 1, 0)
WHERE id = sqlc.arg(id) AND attempt = sqlc.arg(attempt)
  AND status = 'RUNNING' AND lease_until < NOW(6);

-- name: JobCancelWaiting :execrows
-- Cancels a job no replica holds: WAITING, SCHEDULED, BLOCKED, PARKED or HELD. Both cancels reach
-- the row through the primary key (FORCE INDEX): by idx_due (due_status, run_at)
-- they would lock its index entry before the row, the reverse of every
-- completion and rescue, which lock the row first — a deadlock.
UPDATE job_queue FORCE INDEX (PRIMARY)
SET status = 'CANCELED', cancel_requested = 1,
    finished_at = NOW(6), update_time = NOW(6)
WHERE id = ? AND status IN ('WAITING', 'SCHEDULED', 'BLOCKED', 'PARKED', 'HELD');

-- name: JobCancelRunning :execrows
UPDATE job_queue FORCE INDEX (PRIMARY)
SET cancel_requested = 1, update_time = NOW(6)
WHERE id = ? AND status = 'RUNNING';

-- name: JobRetryManual :execrows
-- FAILED or CANCELED back to WAITING, due now, with a fresh retry budget; a
-- keyed job to PARKED, admitted by the caller's admission pass (store/keys.go)
-- in the same transaction, which holds its key's row.
UPDATE job_queue
SET status = IF(concurrency_key IS NULL, 'WAITING', 'PARKED'), retry_times = 0, cancel_requested = 0,
    run_at = NOW(6), finished_at = NULL, lease_until = NULL,
    update_time = NOW(6)
WHERE id = ? AND status IN ('FAILED', 'CANCELED');

-- name: JobScheduledNext :one
-- The promoter's probe: the earliest run_at among SCHEDULED jobs (NULL when
-- there is none) and the database clock. MIN over idx_due's prefix is one
-- index dive ("Select tables optimized away"), whatever the number of
-- scheduled jobs. idx_due is on due_status (status while SCHEDULED, else
-- NULL: migrations 018 and 019), which its readers name.
SELECT MIN(run_at) AS next_run_at, CAST(NOW(6) AS DATETIME(6)) AS db_now
FROM job_queue
WHERE due_status = 'SCHEDULED';

-- name: JobLockDue :many
-- The promoter (store.JobPromoteDue, one READ COMMITTED transaction): locks
-- up to LIMIT SCHEDULED jobs whose run_at has come on the database clock,
-- earliest first, walking idx_due, skipping rows another transaction holds
-- — another replica's promoter (which promotes them), or a completion that
-- is parking a retry there, round trips long over a slow link — instead of
-- waiting for them. Any number of replicas may run it at once: a row is
-- locked, then promoted, by exactly one of them.
SELECT id FROM job_queue
WHERE due_status = 'SCHEDULED' AND run_at <= NOW(6)
ORDER BY run_at
LIMIT ?
FOR UPDATE SKIP LOCKED;

-- name: JobPromoteLocked :execrows
-- The write half of the promotion, on the rows JobLockDue locked, by
-- primary key only. run_at is kept, so the scan orders promoted jobs by
-- when they were due.
UPDATE job_queue FORCE INDEX (PRIMARY)
SET status = 'WAITING', update_time = NOW(6)
WHERE id IN (sqlc.slice(ids)) AND status = 'SCHEDULED';

-- name: ExecutionListByJob :many
SELECT * FROM job_execution WHERE job_id = ? ORDER BY attempt;

-- name: JobCountByStatus :many
SELECT status, COUNT(*) AS n FROM job_queue GROUP BY status;

-- name: DBNow :one
SELECT NOW(6);

-- name: TypesExcluded :many
-- The paused, concurrency-limited and rate-limited job types
-- (JobClaimSkipLocked's first, non-locking read).
SELECT job_type FROM job_type_control WHERE paused = 1 OR max_running > 0 OR rate_starts > 0;

-- name: ClaimSlotTake :many
-- The claim gate's first try (store.JobClaimSkipLocked): locks the lowest
-- claim slot below slots that no other claim holds; none when every one is
-- held. The lock is held until the claim's transaction ends.
SELECT slot FROM claim_gate
WHERE slot < sqlc.arg(slots)
ORDER BY slot
LIMIT 1
FOR UPDATE SKIP LOCKED;
