-- Alert notifications: rules, the detection scan and the delivery outbox
-- (migration 013, docs/operations.md "Alerts"). Times are the database
-- clock's.

-- name: AlertRuleInsert :execlastid
INSERT INTO alert_rule (name, job_type, schedule, cond, threshold_ms, url, preset, secret, create_time)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, NOW(6));

-- name: AlertRuleList :many
SELECT * FROM alert_rule ORDER BY id;

-- name: AlertRuleGet :one
SELECT * FROM alert_rule WHERE id = ?;

-- name: AlertRuleDelete :execrows
DELETE FROM alert_rule WHERE id = ?;

-- name: AlertCursorInit :exec
-- The scan starts at the newest execution when the first rule is created,
-- so a new rule never reports old failures.
INSERT INTO alert_cursor (name, last_id, update_time)
SELECT sqlc.arg(name), COALESCE(MAX(id), 0), NOW(6) FROM job_execution
ON DUPLICATE KEY UPDATE name = name;

-- name: AlertCursorLock :many
-- First statement of a detection pass: the replica that gets the row scans;
-- the others skip the pass (no row) instead of waiting.
SELECT last_id FROM alert_cursor WHERE name = ? FOR UPDATE SKIP LOCKED;

-- name: AlertCursorLockWait :many
-- AlertCursorLock for servers without SKIP LOCKED.
SELECT last_id FROM alert_cursor WHERE name = ? FOR UPDATE;

-- name: AlertCursorPeek :many
-- The cursor and whether any execution lies after it, without a lock (the
-- cursor row by primary key, one primary-key seek in job_execution): a
-- detection pass with nothing after the cursor ends here instead of opening
-- its transaction. No row: no rule was ever created.
SELECT c.last_id, EXISTS (SELECT 1 FROM job_execution e WHERE e.id > c.last_id) AS pending
FROM alert_cursor c
WHERE c.name = ?;

-- name: AlertCursorAdvance :exec
UPDATE alert_cursor SET last_id = ?, update_time = NOW(6) WHERE name = ?;

-- name: AlertExecutionsAfter :many
-- The next executions after the cursor, by id (a primary key range), with
-- their job's row for the attempts that ended the job FAILED.
SELECT e.id, e.job_id, e.attempt, e.outcome, e.error, e.finished_at,
       q.job_type, q.job_key, q.status, q.attempt AS job_attempt
FROM job_execution e
LEFT JOIN job_queue q ON q.id = e.job_id AND e.outcome IN ('FAILED', 'LEASE_EXPIRED')
WHERE e.id > ?
ORDER BY e.id
LIMIT ?;

-- name: AlertRunningSince :many
-- RUNNING jobs of a type whose attempt started before the cutoff (the
-- RUNNING range of idx_lease, which carries job_type).
SELECT id, job_key, attempt, started_at, owner FROM job_queue FORCE INDEX (idx_lease)
WHERE index_status = 'RUNNING' AND status = 'RUNNING' AND job_type = sqlc.arg(job_type)
  AND started_at < sqlc.arg(cutoff)
ORDER BY id
LIMIT 1000;

-- name: AlertDeliveryInsert :execrows
-- One row per incident: a second insert of the same dedupe_key changes
-- nothing (0 rows).
INSERT INTO alert_delivery (rule_id, dedupe_key, url, preset, secret, incident, status, attempts, next_attempt_at,
    create_time, update_time)
VALUES (?, ?, ?, ?, ?, ?, 'PENDING', 0, NOW(6), NOW(6), NOW(6))
ON DUPLICATE KEY UPDATE id = id;

-- name: AlertDeliveryDue :many
-- Due deliveries: PENDING ones whose time came and SENDING ones whose
-- sender's lease ran out (next_attempt_at is the lease's end then).
SELECT id FROM alert_delivery
WHERE status IN ('PENDING', 'SENDING') AND next_attempt_at <= NOW(6)
ORDER BY next_attempt_at, id
LIMIT ?
FOR UPDATE SKIP LOCKED;

-- name: AlertDeliveryDueWait :many
-- AlertDeliveryDue for servers without SKIP LOCKED.
SELECT id FROM alert_delivery
WHERE status IN ('PENDING', 'SENDING') AND next_attempt_at <= NOW(6)
ORDER BY next_attempt_at, id
LIMIT ?
FOR UPDATE;

-- name: AlertDeliveryClaim :exec
UPDATE alert_delivery
SET status = 'SENDING', attempts = attempts + 1, owner = sqlc.arg(owner),
    next_attempt_at = NOW(6) + INTERVAL sqlc.arg(lease_ms) * 1000 MICROSECOND,
    lease_until = NOW(6) + INTERVAL sqlc.arg(lease_ms) * 1000 MICROSECOND, update_time = NOW(6)
WHERE id IN (sqlc.slice(ids));

-- name: AlertDeliveryGetMany :many
SELECT * FROM alert_delivery WHERE id IN (sqlc.slice(ids)) ORDER BY id;

-- name: AlertDeliveryDone :execrows
-- Fenced by attempts: a sender whose lease was taken over writes nothing.
UPDATE alert_delivery
SET status = 'DELIVERED', last_status = sqlc.arg(last_status), last_error = NULL, owner = NULL, lease_until = NULL,
    delivered_at = NOW(6), update_time = NOW(6)
WHERE id = sqlc.arg(id) AND attempts = sqlc.arg(attempts) AND status = 'SENDING';

-- name: AlertDeliveryRetry :execrows
UPDATE alert_delivery
SET status = 'PENDING', last_status = sqlc.arg(last_status), last_error = sqlc.arg(last_error), owner = NULL, lease_until = NULL,
    next_attempt_at = NOW(6) + INTERVAL sqlc.arg(backoff_ms) * 1000 MICROSECOND, update_time = NOW(6)
WHERE id = sqlc.arg(id) AND attempts = sqlc.arg(attempts) AND status = 'SENDING';

-- name: AlertDeliveryGiveUp :execrows
UPDATE alert_delivery
SET status = 'FAILED', last_status = sqlc.arg(last_status), last_error = sqlc.arg(last_error), owner = NULL, lease_until = NULL,
    update_time = NOW(6)
WHERE id = sqlc.arg(id) AND attempts = sqlc.arg(attempts) AND status = 'SENDING';

-- name: AlertDeliveryList :many
-- The newest deliveries, of one rule (rule_id > 0) or of all.
SELECT * FROM alert_delivery
WHERE (sqlc.arg(rule_id) = 0 OR rule_id = sqlc.arg(rule_id))
ORDER BY id DESC
LIMIT ?;

-- name: AlertDeliveryPurge :execrows
-- Finished deliveries (DELIVERED, FAILED) whose last attempt began before
-- the cutoff, at most 1,000 per statement (idx_alert_due).
DELETE FROM alert_delivery
WHERE status IN ('DELIVERED', 'FAILED') AND next_attempt_at < sqlc.arg(cutoff)
LIMIT 1000;

-- name: AlertDeliveryNextWait :many
-- How long until the earliest delivery is due, in milliseconds on the
-- database clock, within ±1 hour (≤ 0: due now); no row when none waits.
-- One index-only read (idx_alert_due), so an idle replica probes cheaply.
SELECT CAST(GREATEST(LEAST(TIMESTAMPDIFF(MICROSECOND, NOW(6), next_attempt_at) DIV 1000, 3600000), -3600000) AS SIGNED) AS wait_ms
FROM alert_delivery
WHERE status IN ('PENDING', 'SENDING')
ORDER BY next_attempt_at
LIMIT 1;
