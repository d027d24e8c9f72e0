package store

import (
	"context"
	"database/sql"
	"maps"
	"slices"
	"strings"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/gen/jobqdb"
)

// Concurrency keys (docs/operations.md, "Concurrency keys"). A keyed job is
// admitted — WAITING, SCHEDULED or RUNNING, holding one of its key's slots —
// or PARKED, outside every hot index range. concurrency_key.admitted counts
// the admitted jobs of a key; every change of it holds the key's row lock,
// taken in ckey order, and happens in the transaction of the write that
// moved the jobs:
//
//   - a submit locks its keys first (the upsert that sets the newest limit),
//     inserts its keyed jobs PARKED and runs the admission pass;
//   - the write that ends an admitted job (a fenced completion, a rescue
//     with no retry left, a cancel) counts it in a keyTally, and its
//     transaction ends with the admission pass over the tally, which frees
//     those slots and admits the keys' next parked jobs — except a batched
//     completion's keyed successes, which lock their keys first and are
//     ended together with their keys' next jobs' admission in one update
//     (completeKeyedAdmit);
//   - a manual retry locks the key first and parks the job, then runs the
//     pass.
//
// A retry (the run failed and is re-queued) and a rescue that re-queues
// keep their slot: the job stays admitted. Parked rows of a key are inserted
// and admitted only under the key's lock; a cancel of a parked job does not
// take it (it frees nothing), and the pass counts what it admitted from the
// rows its update matched.

// keyTally counts, per concurrency key, the admitted jobs a transaction
// ended (slots to free). A key with count 0 is still passed through the
// admission (a submit, a retry: parked jobs may be admitted).
type keyTally map[string]int

// free records that one admitted job of key ended; no-op for "".
func (t keyTally) free(key string) {
	if key != "" {
		t[key]++
	}
}

// touch makes key part of the admission pass without freeing a slot.
func (t keyTally) touch(key string) {
	if _, ok := t[key]; !ok && key != "" {
		t[key] = 0
	}
}

// keyPickChunk bounds the keys of one UNION pick statement.
const keyPickChunk = 200

// admitKeys is the admission pass over the keys of t, in the caller's
// transaction: it locks the key rows (ckey order), frees t's slots, admits
// up to each key's free slots of its parked jobs — by priority DESC, run_at,
// id — and writes the new counts. Nothing when t is empty.
//
// The common case, a key with one free slot, costs no statement of its own:
// the locking read of the keys also reads and locks each key's best parked
// job (keyLockNext), after that key's row is locked, so it sees every
// commit the key's lock waited for: a key with no parked job read has none,
// and one update admits the picks. The update still runs behind a
// savepoint: when it matches fewer rows than it was given, it is rolled
// back and those keys take the exact path — a locking read of their parked
// jobs (pickParked). A key with more than one free slot takes that path
// too.
func admitKeys(ctx context.Context, db jobqdb.DBTX, t keyTally) error {
	if len(t) == 0 {
		return nil
	}
	q := jobqdb.New(db)
	keys := slices.Sorted(maps.Keys(t))
	rows, err := keyLockNext(ctx, db, keys)
	if err != nil {
		return err
	}
	admitted := make(map[string]int, len(rows))
	free := make(map[string]int, len(rows))
	var fast []uint64
	fastKey := map[uint64]string{}
	for _, r := range rows {
		n := max(r.admitted-t[r.key], 0)
		admitted[r.key] = n
		switch f := r.maxRunning - n; {
		case f < 1 || r.next == 0:
			// No slot free, or no job parked (keyLockNext's pick is a
			// locking read made under the key's lock: its "none" is exact).
		case f == 1:
			fast = append(fast, r.next)
			fastKey[r.next] = r.key
		default:
			free[r.key] = f // several slots: the exact pick of as many jobs
		}
	}
	if len(fast) > 0 {
		slices.Sort(fast)
		ok, err := admitExactly(ctx, db, fast)
		if err != nil {
			return err
		}
		for _, id := range fast {
			if ok {
				admitted[fastKey[id]]++
			} else {
				free[fastKey[id]] = 1
			}
		}
	}
	if err := admitPicked(ctx, db, q, free, admitted); err != nil {
		return err
	}
	return writeAdmitted(ctx, q, rows, admitted)
}

// admitPicked admits up to free[k] parked jobs of each key k whose row
// this transaction holds, picked exactly (pickParked, after the keys are
// locked), and adds them to admitted. Nothing when free is empty.
func admitPicked(ctx context.Context, db jobqdb.DBTX, q *jobqdb.Queries, free, admitted map[string]int) error {
	if len(free) == 0 {
		return nil
	}
	picked, byKey, err := pickParked(ctx, db, free)
	if err != nil || len(picked) == 0 {
		return err
	}
	slices.Sort(picked)
	// The picked rows are locked and were PARKED when locked, under their
	// keys' locks: the update matches every one.
	n, err := q.JobAdmit(ctx, picked)
	if err != nil {
		return err
	}
	if int(n) != len(picked) {
		return errFenceMoved
	}
	for k, c := range byKey {
		admitted[k] += c
	}
	return nil
}

// writeAdmitted sets the admitted count of each locked key in rows to
// admitted[key]: one KeyAddAdmitted per distinct change, none for a key
// whose count is unchanged (a freed slot handed to its next job).
func writeAdmitted(ctx context.Context, q *jobqdb.Queries, rows []lockedKey, admitted map[string]int) error {
	byDelta := map[int][]string{}
	for _, r := range rows {
		if d := admitted[r.key] - r.admitted; d != 0 {
			byDelta[d] = append(byDelta[d], r.key)
		}
	}
	for _, d := range slices.Sorted(maps.Keys(byDelta)) {
		if _, err := q.KeyAddAdmitted(ctx, jobqdb.KeyAddAdmittedParams{Delta: int32(d), Ckeys: byDelta[d]}); err != nil {
			return err
		}
	}
	return nil
}

// completeKeyedAdmit writes the keyed group of a batched completion — the
// fenced successes ids of one attempt number, without children, whose jobs
// carry keys (one per job, repeats included) — and the admission of their
// keys' next jobs, in the caller's transaction, in three round trips
// (admitKeys after JobCompleteFencedMany takes four): the locking read of
// the keys with each one's best parked job (keyLockNext, ckey order), one
// JobCompleteAdmitMany that ends the runs and admits those picks, and a
// KeyAddAdmitted only where a key's count changes (with limit 1 and a next
// job, it does not: the freed slot is the next job's). A key with more
// than one free slot gets the exact pick (pickParked) after the update.
//
// The keys are locked before the runs' rows: every other writer that
// holds a key row either locked its keys first (a submit, a manual retry,
// another completion) or holds only rows this one does not write (a cancel
// holds the row it cancels, never a RUNNING one of the batch; a rescue
// could hold a run of the batch only once that run's lease expired, and
// then the deadlock it can meet is retried like any 1213). The picks are
// read and locked under their keys' locks (keyLockNext), so they are exact;
// should the update still match fewer rows than it was given, it is taken
// like a stale run: errStaleInBatch has the batch written again split
// (completeSplit).
func completeKeyedAdmit(ctx context.Context, db jobqdb.DBTX, q *jobqdb.Queries, ids []uint64, attempt int, keys []string) error {
	freed := keyTally{}
	for _, k := range keys {
		freed.free(k)
	}
	rows, err := keyLockNext(ctx, db, slices.Sorted(maps.Keys(freed)))
	if err != nil {
		return err
	}
	admitted := make(map[string]int, len(rows))
	free := map[string]int{}
	var admit []uint64
	for _, r := range rows {
		n := max(r.admitted-freed[r.key], 0)
		admitted[r.key] = n
		switch f := r.maxRunning - n; {
		case f < 1 || r.next == 0:
			// No slot free, or no job parked (exact: see admitKeys).
		case f == 1:
			admit = append(admit, r.next)
			admitted[r.key]++
		default:
			free[r.key] = f // several slots: the exact pick (see admitKeys)
		}
	}
	slices.Sort(admit)
	n, err := q.JobCompleteAdmitMany(ctx, jobqdb.JobCompleteAdmitManyParams{Ids: ids, Attempt: int32(attempt), Admit: admit})
	if err != nil {
		return err
	}
	if int(n) != len(ids)+len(admit) {
		return errStaleInBatch
	}
	if err := admitPicked(ctx, db, q, free, admitted); err != nil {
		return err
	}
	return writeAdmitted(ctx, q, rows, admitted)
}

// lockedKey is one locked key row with its best parked job (0: none read).
type lockedKey struct {
	key                  string
	maxRunning, admitted int
	next                 uint64
}

// keyLockNext locks the rows of keys in ckey order and reads, for each, the
// id of its best parked job (one index dive of idx_key_parked per key). The
// pick is a locking read of its own (FOR UPDATE in the subquery), made for
// each key after its row is locked: it reads the newest committed rows, not
// the statement's view, so a job parked by a submit that committed while
// this read waited for the key's lock is seen (a consistent read would have
// missed it: a slot left free with a job parked), and the job picked stays
// PARKED until this transaction admits it.
func keyLockNext(ctx context.Context, db jobqdb.DBTX, keys []string) ([]lockedKey, error) {
	var b strings.Builder
	b.WriteString(`SELECT k.ckey, k.max_running, k.admitted,
       (SELECT q.id FROM job_queue AS q FORCE INDEX (idx_key_parked) WHERE q.parked_key = k.ckey
        ORDER BY q.priority DESC, q.run_at, q.id LIMIT 1 FOR UPDATE)
FROM concurrency_key AS k WHERE k.ckey IN (`)
	args := make([]any, len(keys))
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('?')
		args[i] = k
	}
	b.WriteString(") ORDER BY k.ckey FOR UPDATE")
	rs, err := db.QueryContext(ctx, b.String(), args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []lockedKey
	for rs.Next() {
		var r lockedKey
		var next sql.NullInt64
		if err := rs.Scan(&r.key, &r.maxRunning, &r.admitted, &next); err != nil {
			return nil, err
		}
		r.next = uint64(next.Int64)
		out = append(out, r)
	}
	return out, rs.Err()
}

// admitExactly admits ids (parked jobs of keys this transaction holds) if
// every one of them is still PARKED; otherwise it writes nothing (the
// update is rolled back to a savepoint) and reports false.
func admitExactly(ctx context.Context, db jobqdb.DBTX, ids []uint64) (bool, error) {
	if _, err := db.ExecContext(ctx, "SAVEPOINT jobq_admit"); err != nil {
		return false, err
	}
	n, err := jobqdb.New(db).JobAdmit(ctx, ids)
	if err != nil {
		return false, err
	}
	if int(n) == len(ids) {
		return true, nil
	}
	_, err = db.ExecContext(ctx, "ROLLBACK TO SAVEPOINT jobq_admit")
	return false, err
}

// pickParked locks up to free[k] parked jobs of each key k, best first (one
// LIMITed range of idx_key_parked per key, keyPickChunk keys per
// statement), and returns their ids and how many each key got.
func pickParked(ctx context.Context, db jobqdb.DBTX, free map[string]int) ([]uint64, map[string]int, error) {
	keys := slices.Sorted(maps.Keys(free))
	var ids []uint64
	byKey := map[string]int{}
	for start := 0; start < len(keys); start += keyPickChunk {
		chunk := keys[start:min(start+keyPickChunk, len(keys))]
		var b strings.Builder
		args := make([]any, 0, 2*len(chunk))
		for i, k := range chunk {
			if i > 0 {
				b.WriteString(" UNION ALL ")
			}
			b.WriteString("(SELECT id, parked_key FROM job_queue FORCE INDEX (idx_key_parked) WHERE parked_key = ? ORDER BY priority DESC, run_at, id LIMIT ? FOR UPDATE)")
			args = append(args, k, free[k])
		}
		rows, err := db.QueryContext(ctx, b.String(), args...)
		if err != nil {
			return nil, nil, err
		}
		for rows.Next() {
			var id uint64
			var k string
			if err := rows.Scan(&id, &k); err != nil {
				rows.Close()
				return nil, nil, err
			}
			ids = append(ids, id)
			byKey[k]++
		}
		if err := rows.Close(); err != nil {
			return nil, nil, err
		}
		if err := rows.Err(); err != nil {
			return nil, nil, err
		}
	}
	return ids, byKey, nil
}

// upsertKeys creates or updates the rows of the keys of ps (the limit of the
// last submit of a key in ps wins) in ckey order, which locks them for the
// rest of the transaction: the submit's admission pass runs under them.
func upsertKeys(ctx context.Context, tx *sql.Tx, ps []jobq.SubmitParams, idx []int) (keyTally, error) {
	limits := map[string]int{}
	for _, i := range idx {
		if p := ps[i]; p.ConcurrencyKey != "" {
			limits[p.ConcurrencyKey] = max(p.ConcurrencyLimit, 1)
		}
	}
	if len(limits) == 0 {
		return nil, nil
	}
	keys := slices.Sorted(maps.Keys(limits))
	t := make(keyTally, len(keys))
	for start := 0; start < len(keys); start += 1000 {
		chunk := keys[start:min(start+1000, len(keys))]
		var b strings.Builder
		b.WriteString("INSERT INTO concurrency_key (ckey, max_running, admitted, update_time) VALUES ")
		args := make([]any, 0, 2*len(chunk))
		for i, k := range chunk {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString("(?, ?, 0, NOW(6))")
			args = append(args, k, limits[k])
			t.touch(k)
		}
		b.WriteString(" ON DUPLICATE KEY UPDATE max_running = VALUES(max_running), update_time = NOW(6)")
		if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// lockKeysOf locks the key rows of the keyed jobs among ids that a manual
// retry can move (FAILED or CANCELED; read without locking first: a key
// never changes) and returns them as a tally with nothing freed, for the
// write that parks those jobs. A job in any other status is left out: the
// retry does not move it, and a RUNNING one's completion holds its row
// while it waits for the key's (rows first, key last), so taking the key
// first here and then waiting for that row would deadlock. A terminal job
// leaves its status only under its key's lock, so none is missed.
//
// keyed reports whether any of ids has a key at all (parkedKeysOf is then
// worth its read after the update).
func lockKeysOf(ctx context.Context, q *jobqdb.Queries, ids []uint64) (t keyTally, keyed bool, err error) {
	st, err := q.JobKeyStates(ctx, ids)
	if err != nil || len(st) == 0 {
		return keyTally{}, false, err
	}
	t = keyTally{}
	for _, s := range st {
		if js := jobq.JobState(s.Status); js == jobq.StateFailed || js == jobq.StateCanceled {
			t.touch(s.ConcurrencyKey.String)
		}
	}
	if len(t) == 0 {
		return t, true, nil
	}
	if _, err := q.KeyLock(ctx, slices.Sorted(maps.Keys(t))); err != nil {
		return nil, true, err
	}
	return t, true, nil
}

// parkedKeysOf adds to t the keys of the jobs among ids that the retry's
// update just parked although lockKeysOf did not see them retryable (a
// run that ended between that read and the update): the admission pass
// locks those keys after their rows, like a completion's.
func parkedKeysOf(ctx context.Context, q *jobqdb.Queries, ids []uint64, t keyTally) error {
	st, err := q.JobKeyStates(ctx, ids)
	if err != nil {
		return err
	}
	for _, s := range st {
		if jobq.JobState(s.Status) == jobq.StateParked {
			t.touch(s.ConcurrencyKey.String)
		}
	}
	return nil
}

// ConcurrencyKeyState is one concurrency key's row: its limit and how many
// of its jobs are admitted now.
type ConcurrencyKeyState struct {
	Key        string
	MaxRunning int
	Admitted   int
}

// ConcurrencyKeyGet returns key's row; jobq.ErrNotFound when no job ever
// carried it.
func (s *Store) ConcurrencyKeyGet(ctx context.Context, key string) (ConcurrencyKeyState, error) {
	r, err := s.q.KeyGet(ctx, key)
	if err != nil {
		return ConcurrencyKeyState{}, notFound(err)
	}
	return ConcurrencyKeyState{Key: r.Ckey, MaxRunning: int(r.MaxRunning), Admitted: int(r.Admitted)}, nil
}

// keyedEnd adds to t the slot of job id when it has a concurrency key and
// its status (read in the transaction that just wrote it) is terminal.
func keyedEnd(t keyTally, status string, key sql.NullString) {
	if key.Valid && jobq.JobState(status).Terminal() {
		t.free(key.String)
	}
}
