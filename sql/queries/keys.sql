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
