package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"maps"
	"slices"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/gen/jobqdb"
)

// JobCompleteMany writes a batch of completions in one transaction (one
// commit for the batch). applied[i] is false when completion i was stale: its
// attempt no longer owned the job, so job_queue was not touched and the
// attempt's execution row (written by the rescue that took the job) was
// marked STALE.
//
// Each applied completion updates its job row and writes its attempt's one
// job_execution row — except a batched success, whose record is the job row
// itself (the job_attempt view and the store's readers show it). Successes
// (fenced ones) are written with one JobCompleteFencedMany per attempt
// number in the batch (nearly always one), each row still fenced by its
// attempt, and one ExecutionRecordKeptMany for those a cancel ended;
// other outcomes, and successes with an output, row by row. When the batched statements match fewer rows than
// successes, some run was stale: the transaction rolls back and the batch is
// written again in a new one, split by a read of the jobs' fence states
// (completeSplit): the successes whose job is still RUNNING at their attempt
// batched as before, the others row by row, which tells stale runs apart
// exactly — so one stale run costs its own row-by-row write, not one per
// completion of a batch of up to Config.CompleteBatch. A run that turns
// stale between that read and the write (a rescue in that window) rolls the
// split back and it is tried again, up to splitTries times; only then is the
// whole batch written row by row, in one more transaction (up to
// CompleteBatch single-row writes: the slow path, kept for the case no read
// can settle).
//
// With an unblock limit in ctx (jobq.WithUnblockLimit), the batch's first
// statement reads the children of its parents (the fenced successes of jobs
// with children): when two or more parents would unblock more children than
// the limit between them, nothing is written and the error is a
// *jobq.UnblockTooWideError with each parent's width, for the caller to
// split the batch by (a single parent is never refused: its children are
// all unblocked in its own transaction). With or without a limit, that read
// is what the batch decrements the children's counters by, so a batch of
// parents reads job_dependency once.
func (s *Store) JobCompleteMany(ctx context.Context, cs []jobq.Completion) (applied []bool, err error) {
	if slices.ContainsFunc(cs, func(c jobq.Completion) bool { return c.Spawn != nil }) {
		return s.completeWithSpawns(ctx, cs)
	}
	applied = make([]bool, len(cs))
	// READ COMMITTED (readCommittedTx): the locks the transaction holds
	// between round trips cover only the rows it completes, no gap where
	// peers insert, and its INSERT … SELECT reads job rows without locking.
	// Each try frees the slots of the keyed jobs it ended and admits their
	// keys' next parked jobs before it commits (admitKeys).
	//
	// The first try writes a keyed batch's completions and admissions in
	// one statement (completeKeyedAdmit); the split tries and the row-by-row
	// one take the general admission pass.
	err = s.readCommittedTx(ctx, func(tx *sql.Tx) error {
		q := s.q.WithTx(tx)
		children, err := batchChildren(ctx, q, cs, jobq.UnblockLimit(ctx))
		if err != nil {
			return err
		}
		t := keyTally{}
		if err := s.completeBatched(ctx, q, tx, cs, applied, t, children); err != nil {
			return err
		}
		return admitKeys(ctx, tx, t)
	})
	var wide *jobq.UnblockTooWideError
	if errors.As(err, &wide) {
		return nil, err
	}
	for try := 0; try < splitTries && errors.Is(err, errStaleInBatch); try++ {
		err = s.readCommittedTx(ctx, func(tx *sql.Tx) error {
			t := keyTally{}
			if err := s.completeSplit(ctx, s.q.WithTx(tx), cs, applied, t); err != nil {
				return err
			}
			return admitKeys(ctx, tx, t)
		})
	}
	if errors.Is(err, errStaleInBatch) {
		err = s.readCommittedTx(ctx, func(tx *sql.Tx) error {
			q := s.q.WithTx(tx)
			t := keyTally{}
			for i, c := range cs {
				ok, err := s.completeOne(ctx, q, c, t)
				if err != nil {
					return err
				}
				applied[i] = ok
			}
			return admitKeys(ctx, tx, t)
		})
	}
	if err != nil {
		return nil, errorf("complete: %w", err)
	}
	return applied, nil
}

// splitTries bounds how many times a batch that met a stale run is written
// split by fence state (completeSplit) before it is written row by row: each
// failed try means a rescue landed between the split's read and its write.
const splitTries = 3

// errStaleInBatch rolls back a batched completion that met a stale run.
var errStaleInBatch = errors.New("stale run in batch: writing it again split by fence state")

// completeBatched writes fenced successes with one update per attempt
// number in the batch (nearly always one) and one execution insert, and
// every other completion row by row; errStaleInBatch when a success was
// stale. The keyed jobs it ends are counted in t (their slots are freed by
// the caller's admitKeys in the same transaction) — except, when db is not
// nil, those of a keyed group that completeKeyedAdmit can write: it frees
// their slots and admits their keys' next jobs itself.
//
// children, when not nil, are the children of the batch's parents as
// batchChildren read them in this transaction (edges of a running job never
// change: a workflow's are written with it, a spawn's by the spawner's own
// completion, which never takes this path); nil reads them (settleChildren).
func (s *Store) completeBatched(ctx context.Context, q *jobqdb.Queries, db jobqdb.DBTX, cs []jobq.Completion, applied []bool, t keyTally, children map[uint64][]uint64) error {
	var ids, parents []uint64
	var keyed []string
	type group struct {
		attempt  int
		children bool
		keyed    bool
	}
	byAttempt := map[group][]uint64{}
	keysBy := map[group][]string{} // the keys of a keyed group's jobs, with repeats
	seen := make(map[uint64]bool, len(cs))
	type releaseKey struct {
		attempt int
		error   string
	}
	releases := map[releaseKey][]uint64{}
	for i, c := range cs {
		if c.Outcome == jobq.OutcomeReleased && !seen[c.ID] && c.ConcurrencyKey == "" {
			seen[c.ID] = true
			k := releaseKey{c.Attempt, jobq.SanitizeText(c.Error, jobq.MaxErrorRunes)}
			releases[k] = append(releases[k], c.ID)
			applied[i] = true
			continue
		}
		if c.Outcome != jobq.OutcomeSuccess || seen[c.ID] || c.Output != nil || c.Spawn != nil {
			ok, err := s.completeOne(ctx, q, c, t)
			if err != nil {
				return err
			}
			applied[i] = ok
			continue
		}
		seen[c.ID] = true
		ids = append(ids, c.ID)
		g := group{c.Attempt, c.HasChildren, c.ConcurrencyKey != ""}
		if g.keyed {
			keyed = append(keyed, c.ConcurrencyKey)
			keysBy[g] = append(keysBy[g], c.ConcurrencyKey)
		}
		byAttempt[g] = append(byAttempt[g], c.ID)
		if c.HasChildren {
			parents = append(parents, c.ID)
		}
		applied[i] = true
	}
	// Releases (runs that never started), batched by attempt and error:
	// like successes, a group that matches fewer rows than runs met a stale
	// run, and the batch is written again split (completeSplit writes
	// releases row by row).
	for _, k := range slices.SortedFunc(maps.Keys(releases), func(a, b releaseKey) int {
		return cmp.Or(cmp.Compare(a.attempt, b.attempt), cmp.Compare(a.error, b.error))
	}) {
		group := releases[k]
		n, err := q.JobReleaseFencedMany(ctx, jobqdb.JobReleaseFencedManyParams{Ids: group, Attempt: int32(k.attempt)})
		if err != nil {
			return err
		}
		if int(n) != len(group) {
			return errStaleInBatch
		}
		n, err = q.ExecutionRecordMany(ctx, jobqdb.ExecutionRecordManyParams{
			Outcome: string(jobq.OutcomeReleased), Error: nullStr(k.error), Ids: group, Attempt: int32(k.attempt),
		})
		if err != nil {
			return err
		}
		if int(n) != len(group) {
			return errFenceMoved
		}
	}
	if len(ids) == 0 {
		return nil
	}
	groups := slices.SortedFunc(maps.Keys(byAttempt), func(a, b group) int {
		return cmp.Or(cmp.Compare(a.attempt, b.attempt), cmpBool(a.children, b.children), cmpBool(a.keyed, b.keyed))
	})
	// A batch whose keyed jobs are all in one group without children, and
	// that ended no other keyed job row by row (t is still empty), has that
	// group written with its admissions (completeKeyedAdmit): the key rows
	// are the only ones this transaction locks after job rows, so taking
	// them before the group's rows keeps every key lock in ckey order.
	merged := group{}
	if db != nil && len(t) == 0 {
		var kg []group
		for _, g := range groups {
			if g.keyed {
				kg = append(kg, g)
			}
		}
		if len(kg) == 1 && !kg[0].children {
			merged = kg[0]
		}
	}
	for _, g := range groups {
		ids := byAttempt[g]
		if merged.keyed && g == merged {
			if err := completeKeyedAdmit(ctx, db, q, ids, g.attempt, keysBy[g]); err != nil {
				return err
			}
			continue
		}
		n, err := q.JobCompleteFencedMany(ctx, jobqdb.JobCompleteFencedManyParams{
			Ids: ids, Attempt: int32(g.attempt), HasChildren: g.children, Keyed: b2i(g.keyed)})
		if err != nil {
			return err
		}
		if int(n) != len(ids) {
			return errStaleInBatch
		}
	}
	// Only the runs a cancel request ended CANCELED and the successes of
	// jobs older than the newest jobq.StatsRecentRows get an execution row;
	// a recent SUCCESS's record is its job row (ExecutionRecordKeptMany).
	if _, err := q.ExecutionRecordKeptMany(ctx, jobqdb.ExecutionRecordKeptManyParams{
		Ids: ids, RecentRows: jobq.StatsRecentRows}); err != nil {
		return err
	}
	// Keyed jobs ended SUCCESS or CANCELED: both free their slot (those of
	// the merged group are freed already).
	if !merged.keyed {
		for _, k := range keyed {
			t.free(k)
		}
	}
	// Workflow parents (all SUCCESS: the children group's fence excludes a
	// cancel request): their children are unblocked in this transaction.
	// Jobs without children cost nothing more.
	if len(parents) > 0 && children != nil {
		dec := map[uint64]int64{}
		for _, p := range parents {
			for _, c := range children[p] {
				dec[c]++
			}
		}
		if _, err := settleDecrements(ctx, q, dec, nil); err != nil {
			return err
		}
	} else if len(parents) > 0 {
		if _, err := settleChildren(ctx, q, parents, nil); err != nil {
			return err
		}
	}
	return nil
}

// batchChildren reads, by job_dependency's primary key and without
// locking, the children of the parents in cs (fenced successes of jobs
// with children, each job once): parent → child ids, nil when cs has no
// parent. With maxUnblock > 0, two or more parents whose children number
// more than maxUnblock between them are a *jobq.UnblockTooWideError.
func batchChildren(ctx context.Context, q *jobqdb.Queries, cs []jobq.Completion, maxUnblock int) (map[uint64][]uint64, error) {
	var parents []uint64
	seen := map[uint64]bool{}
	for _, c := range cs {
		if c.HasChildren && c.Outcome == jobq.OutcomeSuccess && !seen[c.ID] {
			seen[c.ID] = true
			parents = append(parents, c.ID)
		}
	}
	if len(parents) == 0 {
		return nil, nil
	}
	edges, err := q.DependencyEdgesFrom(ctx, parents)
	if err != nil {
		return nil, err
	}
	children := make(map[uint64][]uint64, len(parents))
	for _, e := range edges {
		children[e.ParentID] = append(children[e.ParentID], e.ChildID)
	}
	if maxUnblock > 0 && len(children) > 1 && len(edges) > maxUnblock {
		widths := make(map[uint64]int, len(children))
		for p, cs := range children {
			widths[p] = len(cs)
		}
		return nil, &jobq.UnblockTooWideError{Widths: widths, Limit: maxUnblock}
	}
	return children, nil
}

// JobCompleteTx is transactional completion: in one transaction it writes
// the fenced completion c first (the execution row, then the job row, both
// locked) and then, only if the
// run still owns the job, runs fn with the same transaction, so fn's writes
// commit exactly when the completion does. If fn fails the transaction rolls
// back and the error is returned (the caller records a failed attempt). A
// stale run returns applied=false and fn is not called.
func (s *Store) JobCompleteTx(ctx context.Context, c jobq.Completion, fn func(ctx context.Context, tx jobq.Tx) error) (applied bool, err error) {
	var stale bool
	err = s.WithTx(ctx, func(tx *sql.Tx) error {
		q := s.q.WithTx(tx)
		t := keyTally{}
		ok, err := s.recordOutcome(ctx, q, c, t)
		if err != nil {
			return err
		}
		if !ok {
			stale = true
			return errStaleRollback
		}
		if err := fn(ctx, tx); err != nil {
			return &txFuncError{err}
		}
		if c.Spawn != nil {
			st, err := q.JobEndState(ctx, c.ID)
			if err != nil {
				return err
			}
			if jobq.JobState(st.Status) == jobq.StateSuccess {
				var se *SpawnError
				if err := s.spawn(ctx, tx, c); errors.As(err, &se) {
					return &txFuncError{err}
				} else if err != nil {
					return err
				}
			}
		}
		// The key's slot is freed (and its next job admitted) after the
		// handler's own writes: its rows first, the key row last, like
		// every completion. Its error rolls the whole transaction back.
		return admitKeys(ctx, tx, t)
	})
	if errors.Is(err, errStaleRollback) {
		if done, aerr := alreadyApplied(ctx, s.q, c); aerr != nil {
			return false, errorf("complete tx: %w", aerr)
		} else if done {
			return true, nil // an earlier try committed; its ack was lost
		}
		// Record the refused write outside the rolled-back transaction.
		if _, merr := s.q.ExecutionMarkStale(ctx, jobqdb.ExecutionMarkStaleParams{
			Error: nullStr("completion refused: attempt no longer owns the job"), JobID: c.ID, Attempt: int32(c.Attempt),
		}); merr != nil {
			return false, errorf("complete tx: mark stale: %w", merr)
		}
		return false, nil
	}
	var tfe *txFuncError
	if errors.As(err, &tfe) {
		return false, Mark(tfe.err)
	}
	if err != nil {
		return false, errorf("complete tx: %w", err)
	}
	return !stale, nil
}

var errStaleRollback = errors.New("stale run: rolled back")

// b2i is 1 for true, 0 for false.
func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case b:
		return -1
	}
	return 1
}

// txFuncError marks an error returned by a transactional handler's own SQL,
// so callers can tell it from a database failure of the completion itself.
type txFuncError struct{ err error }

func (e *txFuncError) Error() string { return e.err.Error() }
func (e *txFuncError) Unwrap() error { return e.err }

func (s *Store) completeOne(ctx context.Context, q *jobqdb.Queries, c jobq.Completion, t keyTally) (bool, error) {
	ok, err := s.recordOutcome(ctx, q, c, t)
	if err != nil {
		return false, err
	}
	if !ok {
		// A retry of a completion whose commit went through but whose
		// acknowledgement was lost finds its own outcome already recorded:
		// that is not a stale run.
		if done, err := alreadyApplied(ctx, q, c); err != nil || done {
			return done, err
		}
		_, err = q.ExecutionMarkStale(ctx, jobqdb.ExecutionMarkStaleParams{
			Error: nullStr("completion refused: attempt no longer owns the job"), JobID: c.ID, Attempt: int32(c.Attempt),
		})
		return false, err
	}
	return true, nil
}

// completeSplit writes a batch in which some fenced success was stale: it
// reads the fence state of every fenced success's job (by primary key,
// without locking) and writes the successes whose job is RUNNING at their
// attempt with completeBatched (each fence once), then every other
// completion row by row (completeOne: a stale run gets its STALE mark, a
// repeated fence finds its outcome already applied). errStaleInBatch when a
// run read as live turned stale before the batched write.
func (s *Store) completeSplit(ctx context.Context, q *jobqdb.Queries, cs []jobq.Completion, applied []bool, t keyTally) error {
	var ids []uint64
	for _, c := range cs {
		if c.Outcome == jobq.OutcomeSuccess {
			ids = append(ids, c.ID)
		}
	}
	states, err := q.JobFenceStates(ctx, ids)
	if err != nil {
		return err
	}
	live := make(map[jobq.Fence]bool, len(states))
	children := make(map[uint64]bool, len(states))
	keys := make(map[uint64]string, len(states))
	for _, st := range states {
		keys[st.ID] = st.ConcurrencyKey.String
		if jobq.JobState(st.Status) == jobq.StateRunning {
			live[jobq.Fence{ID: st.ID, Attempt: int(st.Attempt)}] = true
		}
		children[st.ID] = st.HasChildren
		if st.HasChildren && st.CancelRequested {
			// Ends CANCELED, which cancels its children: row by row.
			delete(live, jobq.Fence{ID: st.ID, Attempt: int(st.Attempt)})
		}
	}
	if s.beforeSplitWrite != nil {
		s.beforeSplitWrite()
	}
	var batch []jobq.Completion
	var at, rest []int
	for i, c := range cs {
		if c.Outcome == jobq.OutcomeSuccess && live[c.Fence] {
			live[c.Fence] = false // a repeat of this fence goes row by row, after the batch
			c.HasChildren = children[c.ID]
			c.ConcurrencyKey = keys[c.ID]
			batch, at = append(batch, c), append(at, i)
			continue
		}
		if children[c.ID] {
			c.HasChildren = true
		}
		if k, ok := keys[c.ID]; ok {
			c.ConcurrencyKey = k
		}
		cs[i] = c
		rest = append(rest, i)
	}
	batchApplied := make([]bool, len(batch))
	if err := s.completeBatched(ctx, q, nil, batch, batchApplied, t, nil); err != nil {
		return err
	}
	for k, i := range at {
		applied[i] = batchApplied[k]
	}
	for _, i := range rest {
		ok, err := s.completeOne(ctx, q, cs[i], t)
		if err != nil {
			return err
		}
		applied[i] = ok
	}
	return nil
}

// errFenceMoved means a job row changed between the two statements of one
// completion although the first locked it; it cannot happen while the
// statements lock as documented, and rolls the transaction back if it does.
var errFenceMoved = errors.New("job row changed under its lock")

// recordOutcome writes c's fenced job_queue update and its attempt's
// execution row, in the caller's transaction; false means stale (nothing
// was written). The job update goes first, so the job row is locked by one
// statement that also locks its secondary index entries (a cancel locks
// idx_due before the row: taking the row alone first, across a round trip,
// invites a deadlock with it). A failure that retries moves run_at, which
// the execution row keeps as due_at: its row takes due_at from c.DueAt, or
// without it is written first (ExecutionRecordBeforeRetry, which locks the
// job row and is itself the fence).
//
// A job with children has them settled, and a keyed job that ended is
// counted in t, from its end state read in this transaction.
func (s *Store) recordOutcome(ctx context.Context, q *jobqdb.Queries, c jobq.Completion, t keyTally) (bool, error) {
	ok, err := s.recordOutcomeRows(ctx, q, c)
	if err != nil || !ok {
		return ok, err
	}
	if c.HasChildren || c.ConcurrencyKey != "" {
		if err := settleOne(ctx, q, c.ID, t); err != nil {
			return false, err
		}
	}
	return true, nil
}

// recordOutcomeRows is recordOutcome's job and execution rows.
func (s *Store) recordOutcomeRows(ctx context.Context, q *jobqdb.Queries, c jobq.Completion) (bool, error) {
	p := jobqdb.ExecutionRecordParams{
		Outcome: string(c.Outcome), Error: nullStr(jobq.SanitizeText(c.Error, jobq.MaxErrorRunes)),
		ID: c.ID, Attempt: int32(c.Attempt),
	}
	if c.Output != nil {
		p.Output = sql.NullString{String: string(c.Output), Valid: true}
	}
	retry := c.Retry && (c.Outcome == jobq.OutcomeFailed || c.Outcome == jobq.OutcomeCanceled)
	if retry && !c.DueAt.IsZero() {
		ok, err := s.completeJobRow(ctx, q, c)
		if err != nil || !ok {
			return false, err
		}
		n, err := q.ExecutionRecordAfterRetry(ctx, jobqdb.ExecutionRecordAfterRetryParams{
			DueAt: sql.NullTime{Time: c.DueAt.UTC(), Valid: true}, Outcome: p.Outcome, Error: p.Error, ID: p.ID, Attempt: p.Attempt,
		})
		if err == nil && n != 1 {
			err = errFenceMoved
		}
		return err == nil, err
	}
	if retry {
		n, err := q.ExecutionRecordBeforeRetry(ctx, jobqdb.ExecutionRecordBeforeRetryParams{
			Outcome: p.Outcome, Error: p.Error, ID: p.ID, Attempt: p.Attempt})
		if err != nil || n == 0 {
			return false, err
		}
		ok, err := s.completeJobRow(ctx, q, c)
		if err == nil && !ok {
			err = errFenceMoved
		}
		return ok, err
	}
	ok, err := s.completeJobRow(ctx, q, c)
	if err != nil || !ok {
		return false, err
	}
	n, err := q.ExecutionRecord(ctx, p)
	if err == nil && n != 1 {
		err = errFenceMoved
	}
	return err == nil, err
}

// alreadyApplied reports whether c's attempt already carries c's own
// outcome: only the run's own committed completion writes SUCCESS, FAILED,
// CANCELED or RELEASED into its execution row (the rescuer writes
// LEASE_EXPIRED, a refused write STALE). CANCELED is also what any of the
// run's own outcomes is recorded as when a cancel request ended the job
// (ExecutionFinish).
func alreadyApplied(ctx context.Context, q *jobqdb.Queries, c jobq.Completion) (bool, error) {
	out, err := attemptOutcome(ctx, q, c.Fence)
	if err != nil {
		return false, err
	}
	return out != "" && (out == c.Outcome || out == jobq.OutcomeCanceled), nil
}

// attemptOutcome is the recorded outcome of run f's attempt: its execution
// row's, or SUCCESS when the job row says the attempt succeeded (the batched
// success writes no execution row: ExecutionRecordKeptMany); "" when
// neither records one yet.
func attemptOutcome(ctx context.Context, q *jobqdb.Queries, f jobq.Fence) (jobq.Outcome, error) {
	out, err := q.ExecutionGetOutcome(ctx, jobqdb.ExecutionGetOutcomeParams{JobID: f.ID, Attempt: int32(f.Attempt)})
	if err == nil {
		return jobq.Outcome(out.String), nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", err
	}
	n, err := q.JobSucceededAt(ctx, jobqdb.JobSucceededAtParams{ID: f.ID, Attempt: int32(f.Attempt)})
	if err != nil || n == 0 {
		return "", err
	}
	return jobq.OutcomeSuccess, nil
}

// completeJobRow applies the fenced job_queue update; false means stale.
func (s *Store) completeJobRow(ctx context.Context, q *jobqdb.Queries, c jobq.Completion) (bool, error) {
	var n int64
	var err error
	switch c.Outcome {
	case jobq.OutcomeSuccess:
		n, err = q.JobCompleteFenced(ctx, jobqdb.JobCompleteFencedParams{ID: c.ID, Attempt: int32(c.Attempt)})
	case jobq.OutcomeFailed, jobq.OutcomeCanceled:
		next, inc := jobq.StateFailed, int32(0)
		if c.Retry {
			next, inc = jobq.StateWaiting, 1
		}
		n, err = q.JobFailFenced(ctx, jobqdb.JobFailFencedParams{
			NextStatus: next, BackoffUs: c.Backoff.Microseconds(), RetryInc: inc,
			LastError: nullStr(jobq.SanitizeText(c.Error, jobq.MaxErrorRunes)), ID: c.ID, Attempt: int32(c.Attempt),
		})
	case jobq.OutcomeReleased:
		n, err = q.JobReleaseFenced(ctx, jobqdb.JobReleaseFencedParams{ID: c.ID, Attempt: int32(c.Attempt)})
	default:
		return false, errorf("unknown outcome %q", c.Outcome)
	}
	if err != nil {
		return false, err
	}
	return n > 0, nil
}

// JobRescueCandidates reads up to limit RUNNING jobs whose lease expired on
// the database clock.
func (s *Store) JobRescueCandidates(ctx context.Context, limit int) ([]jobq.Fence, error) {
	rows, err := s.q.JobRescueCandidates(ctx, int32(limit))
	if err != nil {
		return nil, errorf("rescue candidates: %w", err)
	}
	out := make([]jobq.Fence, len(rows))
	for i, r := range rows {
		out[i] = jobq.Fence{ID: r.ID, Attempt: int(r.Attempt)}
	}
	return out, nil
}

// JobRescueExpired returns one expired run to WAITING (retry_times+1), or
// FAILED when retries are exhausted, or CANCELED when a cancel was
// requested, and writes the run's execution row as LEASE_EXPIRED (the run
// never finished, so this is its only row) — only if the job is still
// RUNNING with that attempt and an expired lease. false means the run
// completed, renewed or was rescued meanwhile, or its row is held by another
// transaction (skipped, not waited for: its own outcome write, another
// rescuer); nothing was written.
func (s *Store) JobRescueExpired(ctx context.Context, f jobq.Fence) (bool, error) {
	var ok bool
	err := s.readCommittedTx(ctx, func(tx *sql.Tx) error {
		q := s.q.WithTx(tx)
		n, err := q.ExecutionRecordRescue(ctx, jobqdb.ExecutionRecordRescueParams{ID: f.ID, Attempt: int32(f.Attempt)})
		if err != nil || n == 0 {
			return err
		}
		n, err = q.JobRescueExpired(ctx, jobqdb.JobRescueExpiredParams{ID: f.ID, Attempt: int32(f.Attempt)})
		if err != nil {
			return err
		}
		if n == 0 {
			return errFenceMoved
		}
		ok = true
		// A run that ended FAILED or CANCELED cancels its children and
		// frees its key's slot; one re-queued keeps it.
		t := keyTally{}
		if err := settleOne(ctx, q, f.ID, t); err != nil {
			return err
		}
		return admitKeys(ctx, tx, t)
	})
	if err != nil {
		return false, errorf("rescue: %w", err)
	}
	return ok, nil
}

// completeWithSpawns writes a batch in which some successes add jobs to
// their workflow (Completion.Spawn): those are written one per transaction
// (the fenced completion, its children settled, then the spawned jobs and
// their edges), the rest batched as usual. A spawn the database refuses (a
// job_key taken, the job outside a workflow: *SpawnError) fails the job
// without retry, with the reason as its error; nothing of the spawn is
// written.
func (s *Store) completeWithSpawns(ctx context.Context, cs []jobq.Completion) ([]bool, error) {
	applied := make([]bool, len(cs))
	var rest []jobq.Completion
	var at []int
	for i, c := range cs {
		if c.Spawn == nil {
			rest, at = append(rest, c), append(at, i)
			continue
		}
		ok, err := s.completeSpawn(ctx, c)
		var se *SpawnError
		if errors.As(err, &se) {
			c.Spawn, c.Outcome, c.Error, c.Retry, c.Output = nil, jobq.OutcomeFailed, se.Error(), false, nil
			ok, err = s.completeSpawn(ctx, c)
		}
		if err != nil {
			return nil, errorf("complete: %w", err)
		}
		applied[i] = ok
	}
	if len(rest) > 0 {
		ap, err := s.JobCompleteMany(ctx, rest)
		if err != nil {
			return nil, err
		}
		for k, i := range at {
			applied[i] = ap[k]
		}
	}
	return applied, nil
}

// completeSpawn writes one completion and, when it has a Spawn and its job
// ended SUCCESS, the spawned jobs, in one transaction.
//
// A repeat of a completion already applied (a retry after a lost
// acknowledgement, or a replayed task token) writes nothing: the spawn is
// applied exactly once, by the completion that recorded the outcome. The
// repeat is applied (true) when its spawn is the one the first completion
// wrote (sameSpawn) and refused (false, nothing written, the attempt's own
// outcome left as is, so the remote path answers conflict) when it differs.
func (s *Store) completeSpawn(ctx context.Context, c jobq.Completion) (bool, error) {
	var ok bool
	err := s.WithTx(ctx, func(tx *sql.Tx) error {
		t := keyTally{}
		var err error
		if ok, err = s.completeSpawnRows(ctx, tx, c, t); err != nil {
			return err
		}
		return admitKeys(ctx, tx, t)
	})
	return ok, err
}

// completeSpawnRows is completeSpawn's writes in tx; a keyed job it ends is
// counted in t.
func (s *Store) completeSpawnRows(ctx context.Context, tx *sql.Tx, c jobq.Completion, t keyTally) (bool, error) {
	q := s.q.WithTx(tx)
	if c.Spawn == nil || c.Outcome != jobq.OutcomeSuccess {
		return s.completeOne(ctx, q, c, t)
	}
	fresh, err := s.recordOutcome(ctx, q, c, t)
	if err != nil {
		return false, err
	}
	if !fresh {
		done, err := alreadyApplied(ctx, q, c)
		if err != nil {
			return false, err
		}
		if !done {
			_, err = q.ExecutionMarkStale(ctx, jobqdb.ExecutionMarkStaleParams{
				Error: nullStr("completion refused: attempt no longer owns the job"), JobID: c.ID, Attempt: int32(c.Attempt),
			})
			return false, err
		}
		// A job that did not end SUCCESS (a cancel request won)
		// spawned nothing the first time either.
		if st, err := q.JobEndState(ctx, c.ID); err != nil || jobq.JobState(st.Status) != jobq.StateSuccess {
			return err == nil, err
		}
		return sameSpawn(ctx, tx, c)
	}
	st, err := q.JobEndState(ctx, c.ID)
	if err != nil || jobq.JobState(st.Status) != jobq.StateSuccess {
		return err == nil, err
	}
	return true, s.spawn(ctx, tx, c)
}

// sameSpawn reports whether the jobs c's attempt spawned when its success
// was first applied are exactly c.Spawn's: the same job_keys, each with the
// same job_type and request hash. The jobs an attempt spawned are its
// children created at or after the attempt started (a workflow's declared
// children are written with the workflow, before any of its jobs runs).
func sameSpawn(ctx context.Context, tx *sql.Tx, c jobq.Completion) (bool, error) {
	rows, err := tx.QueryContext(ctx, `SELECT j.job_key, j.job_type, j.request_hash
FROM job_dependency d
JOIN job_queue j ON j.id = d.child_id
JOIN job_execution e ON e.job_id = d.parent_id AND e.attempt = ?
WHERE d.parent_id = ? AND j.create_time >= e.started_at`, c.Attempt, c.ID)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	type spawned struct{ jobType, hash string }
	got := map[string]spawned{}
	for rows.Next() {
		var key, jobType, hash string
		if err := rows.Scan(&key, &jobType, &hash); err != nil {
			return false, err
		}
		got[key] = spawned{jobType, hash}
	}
	if err := rows.Err(); err != nil {
		return false, err
	}
	if len(got) != len(c.Spawn.Jobs) {
		return false, nil
	}
	for _, j := range c.Spawn.Jobs {
		if g, ok := got[j.JobKey]; !ok || g != (spawned{j.JobType, j.RequestHash}) {
			return false, nil
		}
	}
	return true, nil
}
