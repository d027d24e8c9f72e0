-- Concurrency keys (store/keys.go, docs/operations.md "Concurrency keys").
-- The multi-row upsert of a submit's keys and the pick of parked jobs (one
-- LIMITed index range per key) are built in store/keys.go: sqlc cannot
-- express a VALUES list or a UNION of variable length.

-- name: KeyLock :many
-- The admission's first statement: the keys' rows, locked in ckey order
-- (concurrent admissions of overlapping key sets never deadlock on them).
SELECT ckey, max_running, admitted FROM concurrency_key
WHERE ckey IN (sqlc.slice(ckeys))
ORDER BY ckey
FOR UPDATE;

-- name: KeyAddAdmitted :execrows
-- Adds delta (negative: slots freed) to the admitted count of keys whose
-- rows this transaction holds.
UPDATE concurrency_key
SET admitted = GREATEST(admitted + sqlc.arg(delta), 0), update_time = NOW(6)
WHERE ckey IN (sqlc.slice(ckeys));

-- name: JobAdmit :execrows
-- PARKED jobs the admission picked (their key rows are held) become WAITING,
-- SCHEDULED while their run_at is ahead: by primary key, like JobUnblock.
UPDATE job_queue FORCE INDEX (PRIMARY)
SET status = IF(run_at > NOW(6), 'SCHEDULED', 'WAITING'), update_time = NOW(6)
WHERE id IN (sqlc.slice(ids)) AND status = 'PARKED';

-- name: JobKeyStates :many
-- The status and key of keyed jobs among ids (rows the caller's transaction
-- holds or just wrote).
SELECT id, status, concurrency_key FROM job_queue FORCE INDEX (PRIMARY)
WHERE id IN (sqlc.slice(ids)) AND concurrency_key IS NOT NULL;

-- name: KeyGet :one
SELECT ckey, max_running, admitted FROM concurrency_key WHERE ckey = ?;

-- name: JobLockState :one
-- A cancel's first statement: the job's status before it, its row locked.
SELECT status, concurrency_key FROM job_queue FORCE INDEX (PRIMARY) WHERE id = ? FOR UPDATE;

-- name: JobCompleteAdmitMany :execrows
-- The keyed batch's completion and admission in one statement
-- (store.completeKeyedAdmit): the fenced successes of one attempt number
-- (RUNNING, that attempt, no children, keyed: JobCompleteFencedMany's
-- keyed group) end SUCCESS, CANCELED when a cancel was requested, and the
-- parked jobs the caller picked under their keys' row locks (keyLockNext,
-- taken before this statement) become WAITING, SCHEDULED while their
-- run_at is ahead (JobAdmit). status is assigned last, so the assignments
-- before it read the row's old status (the same under
-- SIMULTANEOUS_ASSIGNMENT). The caller compares the rows changed with
-- len(ids) + len(admit): fewer means a run was stale or a pick was taken
-- meanwhile, and the batch is written again split (completeSplit).
UPDATE job_queue FORCE INDEX (PRIMARY)
SET lease_until = IF(status = 'PARKED', lease_until, NULL),
    finished_at = IF(status = 'PARKED', finished_at, NOW(6)),
    update_time = NOW(6),
    status = IF(status = 'PARKED', IF(run_at > NOW(6), 'SCHEDULED', 'WAITING'),
                IF(cancel_requested = 1, 'CANCELED', 'SUCCESS'))
WHERE (id IN (sqlc.slice(ids)) AND status = 'RUNNING' AND attempt = sqlc.arg(attempt)
       AND has_children = 0 AND concurrency_key IS NOT NULL)
   OR (id IN (sqlc.slice(admit)) AND status = 'PARKED');
