package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/gen/jobqdb"
)

// alertCursorJobFailed names the detection scan's cursor row.
const alertCursorJobFailed = "job_failed"

func alertRuleFromRow(r jobqdb.AlertRule) jobq.AlertRule {
	return jobq.AlertRule{ID: r.ID, Name: r.Name, JobType: r.JobType, Schedule: r.Schedule, Condition: r.Cond,
		ThresholdMs: r.ThresholdMs, URL: r.Url, Preset: r.Preset, Secret: r.Secret, CreateTime: r.CreateTime.UTC()}
}

func alertDeliveryFromRow(r jobqdb.AlertDelivery) jobq.AlertDelivery {
	d := jobq.AlertDelivery{ID: r.ID, RuleID: r.RuleID, DedupeKey: r.DedupeKey, URL: r.Url, Preset: r.Preset, Secret: r.Secret,
		Incident: json.RawMessage(r.Incident), Status: r.Status, Attempts: int(r.Attempts), NextAttemptAt: r.NextAttemptAt.UTC(),
		Owner: r.Owner.String, LastStatus: int(r.LastStatus), LastError: r.LastError.String,
		CreateTime: r.CreateTime.UTC(), UpdateTime: r.UpdateTime.UTC()}
	if r.DeliveredAt.Valid {
		t := r.DeliveredAt.Time.UTC()
		d.DeliveredAt = &t
	}
	return d
}

// AlertRuleCreate stores a validated rule and returns it with its id; the
// first rule ever starts the detection scan at the newest execution.
// jobq.ErrKeyConflict when a rule of that name exists.
func (s *Store) AlertRuleCreate(ctx context.Context, r jobq.AlertRule) (jobq.AlertRule, error) {
	var out jobq.AlertRule
	err := s.WithTx(ctx, func(tx *sql.Tx) error {
		q := s.q.WithTx(tx)
		id, err := q.AlertRuleInsert(ctx, jobqdb.AlertRuleInsertParams{Name: r.Name, JobType: r.JobType, Schedule: r.Schedule,
			Cond: r.Condition, ThresholdMs: r.ThresholdMs, Url: r.URL, Preset: r.Preset, Secret: r.Secret})
		if err != nil {
			if isDupKey(err) {
				return jobq.ErrKeyConflict
			}
			return err
		}
		if err := q.AlertCursorInit(ctx, alertCursorJobFailed); err != nil {
			return err
		}
		row, err := q.AlertRuleGet(ctx, uint64(id))
		out = alertRuleFromRow(row)
		return err
	})
	if errors.Is(err, jobq.ErrKeyConflict) {
		return jobq.AlertRule{}, jobq.ErrKeyConflict
	}
	if err != nil {
		return jobq.AlertRule{}, errorf("alert rule create: %w", err)
	}
	return out, nil
}

// AlertRules lists every rule by id.
func (s *Store) AlertRules(ctx context.Context) ([]jobq.AlertRule, error) {
	rows, err := s.q.AlertRuleList(ctx)
	if err != nil {
		return nil, errorf("alert rules: %w", err)
	}
	out := make([]jobq.AlertRule, len(rows))
	for i, r := range rows {
		out[i] = alertRuleFromRow(r)
	}
	return out, nil
}

// AlertRuleGet returns one rule; jobq.ErrNotFound if none.
func (s *Store) AlertRuleGet(ctx context.Context, id uint64) (jobq.AlertRule, error) {
	r, err := s.q.AlertRuleGet(ctx, id)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return jobq.AlertRule{}, jobq.ErrNotFound
		}
		return jobq.AlertRule{}, errorf("alert rule get: %w", err)
	}
	return alertRuleFromRow(r), nil
}

// AlertRuleDelete deletes a rule (its deliveries stay, and pending ones are
// still sent); jobq.ErrNotFound if none.
func (s *Store) AlertRuleDelete(ctx context.Context, id uint64) error {
	n, err := s.q.AlertRuleDelete(ctx, id)
	if err != nil {
		return errorf("alert rule delete: %w", err)
	}
	if n == 0 {
		return jobq.ErrNotFound
	}
	return nil
}

// AlertDetect runs one detection pass. When p.After is 0 it first reads,
// without a lock, the cursor and whether any execution lies after it; with
// none (no rule was ever created: res.Skipped; or nothing new: res.Cursor)
// it ends there, one statement. Otherwise, in one transaction, it locks the
// cursor row (without waiting where SKIP LOCKED exists: a peer holding it
// is scanning, res.Skipped), reads up to p.Chunk executions after the
// cursor (or after p.After, above it), writes the outbox rows p.PlanFunc returns (one per dedupe key)
// and moves the cursor past the executions older than p.Settle — all
// committed together, so an incident is enqueued once whichever replica
// scans, and a pass that fails enqueues nothing.
func (s *Store) AlertDetect(ctx context.Context, p jobq.AlertDetectParams) (jobq.AlertDetectResult, error) {
	if p.After == 0 {
		// A pass with nothing after the cursor (an idle database: the
		// cursor passes an execution once it is older than Settle) needs no
		// transaction: one unlocked read says so. What commits after it is
		// read by the next pass, as it would be after the transaction's.
		peek, err := s.q.AlertCursorPeek(ctx, alertCursorJobFailed)
		if err != nil {
			return jobq.AlertDetectResult{}, errorf("alert detect: %w", err)
		}
		if len(peek) == 0 {
			return jobq.AlertDetectResult{Skipped: true}, nil // no rule was ever created
		}
		if !peek[0].Pending {
			return jobq.AlertDetectResult{Cursor: peek[0].LastID}, nil
		}
	}
	var res jobq.AlertDetectResult
	err := s.WithTx(ctx, func(tx *sql.Tx) error {
		res = jobq.AlertDetectResult{}
		q := s.q.WithTx(tx)
		var cur []uint64
		var err error
		if s.Server.SkipLocked {
			cur, err = q.AlertCursorLock(ctx, alertCursorJobFailed)
		} else {
			cur, err = q.AlertCursorLockWait(ctx, alertCursorJobFailed)
		}
		if err != nil {
			return err
		}
		if len(cur) == 0 {
			res.Skipped = true // held by a peer, or no rule was ever created
			return nil
		}
		res.Cursor = cur[0]
		now, err := q.DBNow(ctx)
		if err != nil {
			return err
		}
		rows, err := q.AlertExecutionsAfter(ctx, jobqdb.AlertExecutionsAfterParams{ID: max(cur[0], p.After), Limit: int32(p.Chunk)})
		if err != nil {
			return err
		}
		res.Read = len(rows)
		if len(rows) == 0 {
			return nil
		}
		settled := now.Add(-p.Settle)
		execs := make([]jobq.AlertExecution, len(rows))
		next := cur[0]
		for i, r := range rows {
			e := jobq.AlertExecution{ID: r.ID, JobID: r.JobID, Attempt: int(r.Attempt), Outcome: jobq.Outcome(r.Outcome.String),
				Error: r.Error.String, FinishedAt: r.FinishedAt.Time.UTC(), JobType: r.JobType.String, JobKey: r.JobKey.String}
			e.JobFailed = r.Status.String == string(jobq.StateFailed) && r.JobAttempt.Valid && int(r.JobAttempt.Int32) == e.Attempt
			execs[i] = e
			res.LastRead = r.ID
			// Every execution up to a settled one was read (in this pass or
			// the ones p.After continues): an id below it that is not yet
			// visible would be a transaction open longer than p.Settle.
			if r.FinishedAt.Valid && r.FinishedAt.Time.Before(settled) {
				next = r.ID
			}
		}
		for _, en := range p.PlanFunc(execs, now.UTC()) {
			n, err := insertDelivery(ctx, q, en)
			if err != nil {
				return err
			}
			res.Inserted += n
		}
		if next != cur[0] {
			res.Cursor = next
			return q.AlertCursorAdvance(ctx, jobqdb.AlertCursorAdvanceParams{LastID: next, Name: alertCursorJobFailed})
		}
		return nil
	})
	if err != nil {
		return jobq.AlertDetectResult{}, errorf("alert detect: %w", err)
	}
	return res, nil
}

func insertDelivery(ctx context.Context, q *jobqdb.Queries, en jobq.AlertEnqueue) (int, error) {
	n, err := q.AlertDeliveryInsert(ctx, jobqdb.AlertDeliveryInsertParams{RuleID: en.Rule.ID, DedupeKey: en.DedupeKey,
		Url: en.Rule.URL, Preset: en.Rule.Preset, Secret: en.Rule.Secret, Incident: string(en.Incident)})
	if err != nil {
		return 0, err
	}
	if n == 1 {
		return 1, nil // 2 would be an update of a duplicate; ON DUPLICATE KEY UPDATE id = id changes nothing (0)
	}
	return 0, nil
}

// AlertEnqueue writes outbox rows, one per dedupe key (a key already
// written is left as it is); it returns how many it inserted.
func (s *Store) AlertEnqueue(ctx context.Context, ens []jobq.AlertEnqueue) (int, error) {
	total := 0
	for _, en := range ens {
		n, err := insertDelivery(ctx, s.q, en)
		if err != nil {
			return total, errorf("alert enqueue: %w", err)
		}
		total += n
	}
	return total, nil
}

// AlertRunningLonger returns up to 1,000 RUNNING jobs of jobType whose
// attempt started more than threshold ago on the database clock.
func (s *Store) AlertRunningLonger(ctx context.Context, jobType string, threshold time.Duration) ([]jobq.AlertRunningJob, error) {
	now, err := s.q.DBNow(ctx)
	if err != nil {
		return nil, errorf("alert running: %w", err)
	}
	rows, err := s.q.AlertRunningSince(ctx, jobqdb.AlertRunningSinceParams{JobType: jobType,
		Cutoff: sql.NullTime{Time: now.Add(-threshold), Valid: true}})
	if err != nil {
		return nil, errorf("alert running: %w", err)
	}
	out := make([]jobq.AlertRunningJob, len(rows))
	for i, r := range rows {
		out[i] = jobq.AlertRunningJob{ID: r.ID, JobKey: r.JobKey, Attempt: int(r.Attempt), StartedAt: r.StartedAt.Time.UTC(), Owner: r.Owner.String}
	}
	return out, nil
}

// AlertDeliveryClaim claims up to limit due deliveries for owner in one
// transaction (FOR UPDATE SKIP LOCKED where supported, so replicas claim
// disjoint rows): each becomes SENDING with attempts+1 and a lease of
// lease, after which another replica may claim it again.
func (s *Store) AlertDeliveryClaim(ctx context.Context, owner string, lease time.Duration, limit int) ([]jobq.AlertDelivery, error) {
	var out []jobq.AlertDelivery
	err := s.WithTx(ctx, func(tx *sql.Tx) error {
		out = nil
		q := s.q.WithTx(tx)
		var ids []uint64
		var err error
		if s.Server.SkipLocked {
			ids, err = q.AlertDeliveryDue(ctx, int32(limit))
		} else {
			ids, err = q.AlertDeliveryDueWait(ctx, int32(limit))
		}
		if err != nil || len(ids) == 0 {
			return err
		}
		if err := q.AlertDeliveryClaim(ctx, jobqdb.AlertDeliveryClaimParams{Owner: sql.NullString{String: owner, Valid: true},
			LeaseMs: lease.Milliseconds(), Ids: ids}); err != nil {
			return err
		}
		rows, err := q.AlertDeliveryGetMany(ctx, ids)
		for _, r := range rows {
			out = append(out, alertDeliveryFromRow(r))
		}
		return err
	})
	if err != nil {
		return nil, errorf("alert claim: %w", err)
	}
	return out, nil
}

// AlertDeliveryDone records a delivery's 2xx answer, fenced by attempts
// (false: the claim was taken over, nothing written).
func (s *Store) AlertDeliveryDone(ctx context.Context, d jobq.AlertDelivery, status int) (bool, error) {
	n, err := s.q.AlertDeliveryDone(ctx, jobqdb.AlertDeliveryDoneParams{LastStatus: int32(status), ID: d.ID, Attempts: int32(d.Attempts)})
	if err != nil {
		return false, errorf("alert done: %w", err)
	}
	return n == 1, nil
}

// AlertDeliveryRetry puts a failed send back to PENDING for another attempt
// after backoff, with its answer's status and error; fenced by attempts.
func (s *Store) AlertDeliveryRetry(ctx context.Context, d jobq.AlertDelivery, status int, msg string, backoff time.Duration) (bool, error) {
	n, err := s.q.AlertDeliveryRetry(ctx, jobqdb.AlertDeliveryRetryParams{LastStatus: int32(status), LastError: alertNullString(msg),
		BackoffMs: backoff.Milliseconds(), ID: d.ID, Attempts: int32(d.Attempts)})
	if err != nil {
		return false, errorf("alert retry: %w", err)
	}
	return n == 1, nil
}

// AlertDeliveryGiveUp ends a delivery FAILED with its last status and
// error; fenced by attempts.
func (s *Store) AlertDeliveryGiveUp(ctx context.Context, d jobq.AlertDelivery, status int, msg string) (bool, error) {
	n, err := s.q.AlertDeliveryGiveUp(ctx, jobqdb.AlertDeliveryGiveUpParams{LastStatus: int32(status), LastError: alertNullString(msg),
		ID: d.ID, Attempts: int32(d.Attempts)})
	if err != nil {
		return false, errorf("alert give up: %w", err)
	}
	return n == 1, nil
}

// AlertDeliveries lists the newest limit deliveries, of rule ruleID (0: of
// every rule), newest first.
func (s *Store) AlertDeliveries(ctx context.Context, ruleID uint64, limit int) ([]jobq.AlertDelivery, error) {
	rows, err := s.q.AlertDeliveryList(ctx, jobqdb.AlertDeliveryListParams{RuleID: ruleID, Limit: int32(limit)})
	if err != nil {
		return nil, errorf("alert deliveries: %w", err)
	}
	out := make([]jobq.AlertDelivery, len(rows))
	for i, r := range rows {
		out[i] = alertDeliveryFromRow(r)
	}
	return out, nil
}

// alertNullString is msg, cut to the column's 2,048 characters; NULL when empty.
func alertNullString(msg string) sql.NullString {
	if r := []rune(msg); len(r) > 2048 {
		msg = string(r[:2048])
	}
	return sql.NullString{String: msg, Valid: msg != ""}
}

// AlertDeliveryPurge deletes finished deliveries (DELIVERED, FAILED) whose
// last attempt began more than olderThan ago on the database clock, 1,000
// per statement until none is left; it returns how many it deleted.
func (s *Store) AlertDeliveryPurge(ctx context.Context, olderThan time.Duration) (int64, error) {
	now, err := s.q.DBNow(ctx)
	if err != nil {
		return 0, errorf("alert purge: %w", err)
	}
	var total int64
	for {
		n, err := s.q.AlertDeliveryPurge(ctx, now.Add(-olderThan))
		total += n
		if err != nil {
			return total, errorf("alert purge: %w", err)
		}
		if n < 1000 {
			return total, nil
		}
	}
}

// AlertDeliveryNextWait returns how long until the earliest PENDING or
// SENDING delivery is due on the database clock (≤ 0: due now, within
// ±1 h) and false when none waits: one index-only read.
func (s *Store) AlertDeliveryNextWait(ctx context.Context) (time.Duration, bool, error) {
	rows, err := s.q.AlertDeliveryNextWait(ctx)
	if err != nil {
		return 0, false, errorf("alert next wait: %w", err)
	}
	if len(rows) == 0 {
		return 0, false, nil
	}
	return time.Duration(rows[0]) * time.Millisecond, true, nil
}
