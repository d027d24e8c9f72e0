package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/gen/jobqdb"
)

// workflowEdgeChunk bounds the rows of one multi-row INSERT of edges.
const workflowEdgeChunk = 5000

// WorkflowSubmit creates a workflow — its row, its jobs and their edges — in
// one transaction with multi-row inserts: all of it or nothing. A job with
// parents starts BLOCKED with blocked_parents = its number of parents; a job
// without starts WAITING (SCHEDULED when its run_at is ahead). When
// workflow_key already exists it returns that workflow with created=false if
// its RequestHash matches, or jobq.ErrKeyConflict. A job_key that already
// names a job outside the workflow fails the whole submit with an
// *jobq.WorkflowKeyTakenError (nothing is written).
func (s *Store) WorkflowSubmit(ctx context.Context, p jobq.WorkflowSubmitParams) (wf jobq.Workflow, created bool, err error) {
	var wfID uint64
	err = s.WithTx(ctx, func(tx *sql.Tx) error {
		q := s.q.WithTx(tx)
		id, err := q.WorkflowInsert(ctx, jobqdb.WorkflowInsertParams{WorkflowKey: p.WorkflowKey, RequestHash: p.RequestHash})
		if err != nil {
			return err
		}
		wfID = uint64(id)
		ids, err := s.insertWorkflowJobs(ctx, tx, wfID, p.Jobs)
		if err != nil {
			return err
		}
		return insertEdges(ctx, tx, p.Jobs, ids, nil)
	})
	if isDupKey(err) {
		existing, gerr := s.q.WorkflowGetByKey(ctx, p.WorkflowKey)
		if errors.Is(gerr, sql.ErrNoRows) {
			// The workflow key is free: one of the jobs' keys was taken.
			return jobq.Workflow{}, false, s.takenKey(ctx, p.Jobs)
		}
		if gerr != nil {
			return jobq.Workflow{}, false, errorf("workflow submit: read existing key: %w", gerr)
		}
		w, gerr := s.WorkflowGet(ctx, existing.ID)
		if gerr != nil {
			return jobq.Workflow{}, false, gerr
		}
		if existing.RequestHash != p.RequestHash {
			return w, false, jobq.ErrKeyConflict
		}
		return w, false, nil
	}
	if err != nil {
		return jobq.Workflow{}, false, errorf("workflow submit: %w", err)
	}
	w, err := s.WorkflowGet(ctx, wfID)
	return w, err == nil, err
}

// takenKey finds which job key of a refused workflow submit was taken.
func (s *Store) takenKey(ctx context.Context, jobs []jobq.WorkflowJobParams) error {
	keys := make([]string, len(jobs))
	for i, j := range jobs {
		keys[i] = j.JobKey
	}
	for start := 0; start < len(keys); start += 1000 {
		rows, err := s.q.JobKeysLookup(ctx, keys[start:min(start+1000, len(keys))])
		if err != nil {
			return errorf("workflow submit: %w", err)
		}
		if len(rows) > 0 {
			return &jobq.WorkflowKeyTakenError{JobKey: rows[0].JobKey}
		}
	}
	return errorf("workflow submit: duplicate key, but no key is taken now (a concurrent submit rolled back): try again")
}

// insertWorkflowJobs inserts jobs into workflow wfID with multi-row
// INSERTs (split by params bytes like JobSubmitMany) and returns their ids
// by job_key (every job of the workflow). A job's counter is its number of
// depends_on entries, all of them jobs of this insert.
func (s *Store) insertWorkflowJobs(ctx context.Context, tx *sql.Tx, wfID uint64, jobs []jobq.WorkflowJobParams) (map[string]uint64, error) {
	hasChildren := map[string]bool{}
	for _, j := range jobs {
		for _, d := range j.DependsOn {
			hasChildren[d.JobKey] = true
		}
	}
	for start := 0; start < len(jobs); {
		end, size := start, 0
		for end < len(jobs) && end-start < 2000 && (end == start || size+len(jobs[end].Params) <= submitManyChunkBytes) {
			size += len(jobs[end].Params)
			end++
		}
		var b strings.Builder
		b.WriteString(`INSERT INTO job_queue (job_key, job_type, params, request_hash, status, priority, max_retry,
    timeout_ms, run_at, create_time, update_time, lane, workflow_id, blocked_parents, has_children) VALUES `)
		args := make([]any, 0, 14*(end-start))
		for n, j := range jobs[start:end] {
			if n > 0 {
				b.WriteByte(',')
			}
			blocked := len(j.DependsOn)
			var runAt sql.NullTime
			if j.RunAt != nil {
				runAt = sql.NullTime{Time: j.RunAt.UTC(), Valid: true}
			}
			b.WriteString("(?, ?, ?, ?, IF(? > 0, 'BLOCKED', IF(? > NOW(6), 'SCHEDULED', 'WAITING')), ?, ?, ?, COALESCE(?, NOW(6)), NOW(6), NOW(6), ?, ?, ?, ?)")
			args = append(args, j.JobKey, j.JobType, j.Params, j.RequestHash, blocked, runAt, j.Priority, j.MaxRetry,
				j.TimeoutMs, runAt, s.laneOf(j.JobType), wfID, blocked, hasChildren[j.JobKey])
		}
		if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
			return nil, err
		}
		start = end
	}
	rows, err := s.q.WithTx(tx).WorkflowJobKeys(ctx, sql.NullInt64{Int64: int64(wfID), Valid: true})
	if err != nil {
		return nil, err
	}
	ids := make(map[string]uint64, len(rows))
	for _, r := range rows {
		ids[r.JobKey] = r.ID
	}
	return ids, nil
}

// insertEdges inserts the edges of jobs (ids by job_key) and, for each
// spawned job, the edge from its spawning run (spawner, when set).
func insertEdges(ctx context.Context, tx *sql.Tx, jobs []jobq.WorkflowJobParams, ids map[string]uint64, spawner *uint64) error {
	type edge struct {
		p, c   uint64
		policy string
	}
	var edges []edge
	for _, j := range jobs {
		child, ok := ids[j.JobKey]
		if !ok {
			return fmt.Errorf("job_key %q: inserted but not read back", j.JobKey)
		}
		if spawner != nil {
			edges = append(edges, edge{*spawner, child, string(jobq.OnParentFailureCancel)})
		}
		for _, d := range j.DependsOn {
			parent, ok := ids[d.JobKey]
			if !ok {
				return fmt.Errorf("depends_on %q: not a job of the workflow", d.JobKey)
			}
			edges = append(edges, edge{parent, child, string(d.OnParentFailure)})
		}
	}
	for start := 0; start < len(edges); start += workflowEdgeChunk {
		chunk := edges[start:min(start+workflowEdgeChunk, len(edges))]
		var b strings.Builder
		b.WriteString("INSERT INTO job_dependency (parent_id, child_id, on_parent_failure) VALUES ")
		args := make([]any, 0, 3*len(chunk))
		for n, e := range chunk {
			if n > 0 {
				b.WriteByte(',')
			}
			b.WriteString("(?, ?, ?)")
			args = append(args, e.p, e.c, e.policy)
		}
		if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
			return err
		}
	}
	return nil
}

// settleChildren propagates the end of workflow jobs, in the transaction of
// the writes that ended them (which holds their rows): the children of
// succeeded (SUCCESS) have their counters decremented, and a child whose
// counter reaches 0 becomes WAITING (JobUnblock); the children of ended
// (FAILED or CANCELED) are cancelled on 'cancel' edges — and their own
// descendants after them — and decremented on 'run' edges. It reports how
// many rows it changed (0: nothing became runnable or cancelled).
func settleChildren(ctx context.Context, q *jobqdb.Queries, succeeded, ended []uint64) (int64, error) {
	dec := map[uint64]int64{}
	if len(succeeded) > 0 {
		rows, err := q.DependencyChildCounts(ctx, succeeded)
		if err != nil {
			return 0, err
		}
		for _, r := range rows {
			dec[r.ChildID] += r.N
		}
	}
	return settleDecrements(ctx, q, dec, ended)
}

// settleDecrements is settleChildren with the decrements of the succeeded
// parents already counted: dec is child → how many of its parents just
// succeeded.
func settleDecrements(ctx context.Context, q *jobqdb.Queries, dec map[uint64]int64, ended []uint64) (int64, error) {
	var changed int64
	for frontier := ended; len(frontier) > 0; {
		edges, err := q.DependencyEdgesFrom(ctx, frontier)
		if err != nil {
			return 0, err
		}
		var cancel []uint64
		why := map[uint64]uint64{}
		for _, e := range edges {
			if jobq.OnParentFailure(e.OnParentFailure) == jobq.OnParentFailureRun {
				dec[e.ChildID]++
				continue
			}
			if _, ok := why[e.ChildID]; !ok {
				why[e.ChildID] = e.ParentID
				cancel = append(cancel, e.ChildID)
			}
		}
		frontier = nil
		if len(cancel) == 0 {
			break
		}
		slices.Sort(cancel)
		locked, err := q.JobLockBlocked(ctx, cancel)
		if err != nil {
			return 0, err
		}
		if len(locked) == 0 {
			break
		}
		n, err := q.JobCancelBlocked(ctx, jobqdb.JobCancelBlockedParams{
			LastError: nullStr(fmt.Sprintf("canceled: parent job %d ended without success", why[locked[0]])), Ids: locked})
		if err != nil {
			return 0, err
		}
		changed += n
		frontier = locked
	}
	if len(dec) == 0 {
		return changed, nil
	}
	for _, u := range unblockOrder(dec) {
		m, err := q.JobUnblock(ctx, jobqdb.JobUnblockParams{N: int32(u.n), Ids: u.ids})
		if err != nil {
			return 0, err
		}
		changed += m
	}
	return changed, nil
}

// unblockStep is one JobUnblock: children ids (ascending) decremented by n.
type unblockStep struct {
	n   int64
	ids []uint64
}

// maxUnblockSteps bounds the statements unblockOrder spends on keeping
// the children's locks in id order.
const maxUnblockSteps = 16

// unblockOrder turns the decrements dec (child → n) into JobUnblock
// statements that lock the children in ascending id order across
// statements, not only within each: one per run of consecutive children
// (by id) with the same n. Two completions decrementing the same children
// — batches of the same workflows' parents on two flushers or replicas,
// say two sinks by different counts — then lock them in the same order
// and wait for one another instead of deadlocking (a deadlock rolls a
// whole batch back for its retry). When that takes more than
// maxUnblockSteps statements, it is one statement per distinct n (each in
// id order), as few as can be, and a deadlock is left to the retry.
func unblockOrder(dec map[uint64]int64) []unblockStep {
	ids := slices.Sorted(maps.Keys(dec))
	var runs []unblockStep
	for _, id := range ids {
		if k := len(runs) - 1; k >= 0 && runs[k].n == dec[id] {
			runs[k].ids = append(runs[k].ids, id)
			continue
		}
		if len(runs) == maxUnblockSteps {
			runs = nil
			break
		}
		runs = append(runs, unblockStep{n: dec[id], ids: []uint64{id}})
	}
	if runs != nil {
		return runs
	}
	byN := map[int64][]uint64{}
	for _, id := range ids {
		byN[dec[id]] = append(byN[dec[id]], id)
	}
	out := make([]unblockStep, 0, len(byN))
	for _, n := range slices.Sorted(maps.Keys(byN)) {
		out = append(out, unblockStep{n: n, ids: byN[n]})
	}
	return out
}

// settleOne settles the children of job id when it has any, and counts in
// t the slot of a keyed job that ended (JobEndState, read in the
// transaction that just wrote the job).
func settleOne(ctx context.Context, q *jobqdb.Queries, id uint64, t keyTally) error {
	st, err := q.JobEndState(ctx, id)
	if err != nil {
		return err
	}
	keyedEnd(t, st.Status, st.ConcurrencyKey)
	if !st.HasChildren {
		return nil
	}
	switch jobq.JobState(st.Status) {
	case jobq.StateSuccess:
		_, err = settleChildren(ctx, q, []uint64{id}, nil)
	case jobq.StateFailed, jobq.StateCanceled:
		_, err = settleChildren(ctx, q, nil, []uint64{id})
	}
	return err
}

// spawn adds c.Spawn's jobs to the workflow of c's job, in c's completion
// transaction, after its fenced success: the spawned jobs depend on the
// run (an edge from it, already satisfied) and on each other only (the
// service checked that), so no job that exists already gains a child.
func (s *Store) spawn(ctx context.Context, tx *sql.Tx, c jobq.Completion) error {
	q := s.q.WithTx(tx)
	job, err := q.JobGetByID(ctx, c.ID)
	if err != nil {
		return err
	}
	if !job.WorkflowID.Valid {
		return &SpawnError{Rule: "the job is not part of a workflow"}
	}
	wfID := uint64(job.WorkflowID.Int64)
	ids, err := s.insertWorkflowJobs(ctx, tx, wfID, c.Spawn.Jobs)
	if err != nil {
		if isDupKey(err) {
			return &SpawnError{Rule: "a spawned job_key already names a job"}
		}
		return err
	}
	spawner := c.ID
	if err := insertEdges(ctx, tx, c.Spawn.Jobs, ids, &spawner); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "UPDATE job_queue SET has_children = 1 WHERE id = ?", c.ID); err != nil {
		return err
	}
	return nil
}

// SpawnError is a completion's spawn refused by the database's state (a
// job_key taken, a dependency outside the workflow): the completion is not
// written.
type SpawnError struct{ Rule string }

func (e *SpawnError) Error() string { return "spawn: " + e.Rule }

// WorkflowGet returns a workflow with its jobs (in id order; a SUCCESS job
// carries its successful attempt's output, as JobGet) and edges;
// jobq.ErrNotFound when there is none.
func (s *Store) WorkflowGet(ctx context.Context, id uint64) (jobq.Workflow, error) {
	w, err := s.q.WorkflowGetByID(ctx, id)
	if err != nil {
		return jobq.Workflow{}, notFound(err)
	}
	return s.workflowFill(ctx, w)
}

// WorkflowGetByKey is WorkflowGet by workflow_key.
func (s *Store) WorkflowGetByKey(ctx context.Context, key string) (jobq.Workflow, error) {
	w, err := s.q.WorkflowGetByKey(ctx, key)
	if err != nil {
		return jobq.Workflow{}, notFound(err)
	}
	return s.workflowFill(ctx, w)
}

func (s *Store) workflowFill(ctx context.Context, w jobqdb.Workflow) (jobq.Workflow, error) {
	out := jobq.Workflow{ID: w.ID, WorkflowKey: w.WorkflowKey, CreateTime: w.CreateTime.UTC(), RequestHash: w.RequestHash}
	wid := sql.NullInt64{Int64: int64(w.ID), Valid: true}
	rows, err := s.q.WorkflowJobs(ctx, wid)
	if err != nil {
		return out, errorf("workflow get: %w", err)
	}
	out.Jobs = make([]jobq.Job, len(rows))
	at := make(map[uint64]int, len(rows))
	for i, r := range rows {
		out.Jobs[i] = jobFromRow(r)
		at[r.ID] = i
	}
	outputs, err := s.q.WorkflowOutputs(ctx, wid)
	if err != nil {
		return out, errorf("workflow get: %w", err)
	}
	for _, o := range outputs {
		if i, ok := at[o.JobID]; ok && o.Output.Valid {
			out.Jobs[i].Output = json.RawMessage(o.Output.String)
		}
	}
	edges, err := s.q.WorkflowEdges(ctx, wid)
	if err != nil {
		return out, errorf("workflow get: %w", err)
	}
	out.Edges = make([]jobq.Edge, len(edges))
	for i, e := range edges {
		out.Edges[i] = jobq.Edge{Parent: e.ParentID, Child: e.ChildID, OnParentFailure: jobq.OnParentFailure(e.OnParentFailure)}
	}
	return out, nil
}

// WorkflowList returns up to limit workflows with ids below beforeID (0:
// from the newest), newest first, with their jobs' counts by state.
func (s *Store) WorkflowList(ctx context.Context, beforeID uint64, limit int) ([]jobq.WorkflowSummary, error) {
	if beforeID == 0 {
		beforeID = 1<<63 - 1
	}
	rows, err := s.q.WorkflowList(ctx, jobqdb.WorkflowListParams{BeforeID: beforeID, Limit: int32(limit)})
	if err != nil {
		return nil, errorf("workflow list: %w", err)
	}
	out := make([]jobq.WorkflowSummary, len(rows))
	for i, r := range rows {
		out[i] = jobq.WorkflowSummary{ID: r.ID, WorkflowKey: r.WorkflowKey, CreateTime: r.CreateTime.UTC(),
			Jobs: int(r.Jobs), Succeeded: int(r.Succeeded), Failed: int(r.Failed), Canceled: int(r.Canceled),
			Running: int(r.Running)}
	}
	return out, nil
}

// WorkflowCancel cancels every unfinished job of a workflow: BLOCKED,
// WAITING and SCHEDULED jobs end CANCELED at once, RUNNING ones get their
// cancel requested (they end CANCELED when their run returns). It returns
// the workflow after the change.
func (s *Store) WorkflowCancel(ctx context.Context, id uint64) (jobq.Workflow, error) {
	if _, err := s.q.WorkflowGetByID(ctx, id); err != nil {
		return jobq.Workflow{}, notFound(err)
	}
	wid := sql.NullInt64{Int64: int64(id), Valid: true}
	err := s.WithTx(ctx, func(tx *sql.Tx) error {
		q := s.q.WithTx(tx)
		if _, err := q.WorkflowLockJobs(ctx, wid); err != nil {
			return err
		}
		if _, err := q.WorkflowCancelIdle(ctx, wid); err != nil {
			return err
		}
		_, err := q.WorkflowCancelRunning(ctx, wid)
		return err
	})
	if err != nil {
		return jobq.Workflow{}, errorf("workflow cancel: %w", err)
	}
	return s.WorkflowGet(ctx, id)
}

// WorkflowRetry re-runs a workflow's FAILED and CANCELED jobs, which
// re-arms their descendants (cancelled by them): each such job gets a
// fresh retry budget and becomes WAITING when every parent succeeded (or
// ended in a way its 'run' edge accepts), else BLOCKED on the parents that
// did not. It reports how many jobs it re-armed; jobq.ErrInvalidState when
// there was none to retry.
func (s *Store) WorkflowRetry(ctx context.Context, id uint64) (jobq.Workflow, int, error) {
	if _, err := s.q.WorkflowGetByID(ctx, id); err != nil {
		return jobq.Workflow{}, 0, notFound(err)
	}
	wid := sql.NullInt64{Int64: int64(id), Valid: true}
	var rearmed int
	err := s.WithTx(ctx, func(tx *sql.Tx) error {
		rearmed = 0
		q := s.q.WithTx(tx)
		jobs, err := q.WorkflowLockJobs(ctx, wid)
		if err != nil {
			return err
		}
		status := make(map[uint64]jobq.JobState, len(jobs))
		var again []uint64
		for _, j := range jobs {
			st := jobq.JobState(j.Status)
			if st == jobq.StateFailed || st == jobq.StateCanceled {
				again = append(again, j.ID)
				st = jobq.StateBlocked // re-armed: not done for its children
			}
			status[j.ID] = st
		}
		edges, err := q.WorkflowEdges(ctx, wid)
		if err != nil {
			return err
		}
		blocked := map[uint64]int32{}
		for _, e := range edges {
			if status[e.ParentID] != jobq.StateSuccess {
				blocked[e.ChildID]++
			}
		}
		for _, jid := range again {
			n, err := q.JobRearm(ctx, jobqdb.JobRearmParams{Blocked: blocked[jid], ID: jid})
			if err != nil {
				return err
			}
			rearmed += int(n)
		}
		return nil
	})
	if err != nil {
		return jobq.Workflow{}, 0, errorf("workflow retry: %w", err)
	}
	w, err := s.WorkflowGet(ctx, id)
	if err == nil && rearmed == 0 {
		err = jobq.ErrInvalidState
	}
	return w, rearmed, err
}

// JobParents returns the parents of jobs ids with their status and
// output, by child id.
func (s *Store) JobParents(ctx context.Context, ids []uint64) (map[uint64][]jobq.ParentOutput, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.q.DependencyParentsOf(ctx, ids)
	if err != nil {
		return nil, errorf("job parents: %w", err)
	}
	out := map[uint64][]jobq.ParentOutput{}
	for _, r := range rows {
		p := jobq.ParentOutput{JobID: r.ParentID, JobKey: r.JobKey, Status: jobq.JobState(r.Status)}
		if r.Output.Valid {
			p.Output = json.RawMessage(r.Output.String)
		}
		out[r.ChildID] = append(out[r.ChildID], p)
	}
	return out, nil
}

// startScheduledWorkflow starts the workflow of schedule p's instant at, in
// the fire's transaction: key PeriodicKey(name, at), each template job keyed
// PeriodicWorkflowJobKey. An instant already started (its workflow_key
// exists) starts nothing: false.
func (s *Store) startScheduledWorkflow(ctx context.Context, tx *sql.Tx, p jobq.Periodic, at time.Time) (uint64, bool, error) {
	key := jobq.PeriodicKey(p.Name, at)
	jobs := make([]jobq.WorkflowJobParams, len(p.Workflow))
	h := sha256.New()
	h.Write([]byte("periodic-workflow\x00" + key))
	for i, j := range p.Workflow {
		j.JobKey = jobq.PeriodicWorkflowJobKey(p.Name, at, j.JobKey)
		deps := make([]jobq.Dependency, len(j.DependsOn))
		for k, d := range j.DependsOn {
			deps[k] = jobq.Dependency{JobKey: jobq.PeriodicWorkflowJobKey(p.Name, at, d.JobKey), OnParentFailure: d.OnParentFailure}
		}
		j.DependsOn = deps
		jobs[i] = j
		h.Write([]byte(j.JobKey + "\x00" + j.RequestHash + "\x00"))
	}
	res, err := tx.ExecContext(ctx, "INSERT IGNORE INTO workflow (workflow_key, request_hash, create_time) VALUES (?, ?, NOW(6))",
		key, hex.EncodeToString(h.Sum(nil)))
	if err != nil {
		return 0, false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return 0, false, err
	}
	wfID, err := res.LastInsertId()
	if err != nil {
		return 0, false, err
	}
	ids, err := s.insertWorkflowJobs(ctx, tx, uint64(wfID), jobs)
	if err != nil {
		return 0, false, err
	}
	return uint64(wfID), true, insertEdges(ctx, tx, jobs, ids, nil)
}

// reblockRetried puts the jobs of ids that a manual retry just made WAITING
// and that have a parent not SUCCESS back to BLOCKED, waiting for those
// parents (a retried workflow job never runs before its parents succeeded;
// WorkflowRetry re-arms a failed job's descendants with it). Jobs outside
// workflows have no parents: one read by idx_child, nothing written.
func reblockRetried(ctx context.Context, q *jobqdb.Queries, ids []uint64) error {
	parents, err := q.DependencyParentsOf(ctx, ids)
	if err != nil || len(parents) == 0 {
		return err
	}
	blocked := map[uint64]int32{}
	for _, p := range parents {
		if jobq.JobState(p.Status) != jobq.StateSuccess {
			blocked[p.ChildID]++
		}
	}
	for _, id := range slices.Sorted(maps.Keys(blocked)) {
		if _, err := q.JobReblock(ctx, jobqdb.JobReblockParams{Blocked: blocked[id], ID: id}); err != nil {
			return err
		}
	}
	return nil
}
