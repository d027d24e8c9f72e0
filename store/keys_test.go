package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/store"
)

// The admission's fast path admits its candidates only all together: when
// one of them is no longer PARKED (a peer admitted it after the stale read
// that chose it), nothing is written and the caller takes the exact path.
func TestAdmitExactlyAllOrNothing(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	ctx := context.Background()
	var ids []uint64
	for _, k := range []string{"a", "b", "c"} {
		j, _, err := st.JobSubmit(ctx, jobq.SubmitParams{JobKey: k, JobType: "noop", Params: "{}", RequestHash: k, ConcurrencyKey: "dev"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	// a is admitted (WAITING), b and c are parked.
	if ok, err := store.AdmitExactly(ctx, st, ids); err != nil || ok {
		t.Fatalf("admit of a WAITING and two PARKED jobs: ok=%v err=%v, want false", ok, err)
	}
	for _, id := range ids[1:] {
		if j, _ := st.JobGet(ctx, id); j.Status != jobq.StateParked {
			t.Fatalf("job %d is %s after the refused admit, want PARKED (rolled back)", id, j.Status)
		}
	}
	if ok, err := store.AdmitExactly(ctx, st, ids[1:]); err != nil || !ok {
		t.Fatalf("admit of two PARKED jobs: ok=%v err=%v, want true", ok, err)
	}
}

// A batched keyed completion picks each key's next job in the locking read
// of its keys, which may predate a peer's commit it waited for: here a
// cancel of the key's other admitted job admitted the parked job p (and
// committed) while the completion of r waited for the key's row. The
// completion must not count p twice: whether its read saw p parked or not,
// it ends r SUCCESS, admits p2 in r's slot, and leaves the key at its
// limit of 2.
func TestKeyedCompletionAfterAPeerAdmittedItsPick(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	// It holds a transaction idle: serialised with the idle-transaction
	// reaper's test, which would end it.
	testdb.ServerWide(t, st, "jobq_test_innodb_trx_watch")
	ctx := context.Background()
	var ids []uint64
	for _, k := range []string{"r", "x", "p", "p2"} {
		j, _, err := st.JobSubmit(ctx, jobq.SubmitParams{JobKey: k, JobType: "noop", Params: "{}", RequestHash: k, ConcurrencyKey: "dev", ConcurrencyLimit: 2})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	r, x, p, p2 := ids[0], ids[1], ids[2], ids[3]
	claimed, err := st.JobClaimSkipLocked(ctx, jobq.ClaimParams{Owner: "a", Limit: 1, Lease: time.Minute})
	if err != nil || len(claimed) != 1 || claimed[0].ID != r {
		t.Fatalf("claim: %v %v, want job r (%d)", claimed, err, r)
	}
	// The peer: a cancel of x, written as the store writes one (the key row
	// locked, x ended, p admitted in x's slot), held open.
	peer := openPeer(t, st,
		"SELECT admitted FROM concurrency_key WHERE ckey = 'dev' FOR UPDATE",
		fmt.Sprintf("UPDATE job_queue SET status = 'CANCELED', finished_at = NOW(6) WHERE id = %d", x),
		fmt.Sprintf("UPDATE job_queue SET status = 'WAITING' WHERE id = %d AND status = 'PARKED'", p),
	)
	done := make(chan error, 1)
	go func() {
		applied, err := st.JobCompleteMany(ctx, []jobq.Completion{{Fence: claimed[0].Fence(), Outcome: jobq.OutcomeSuccess, ConcurrencyKey: "dev"}})
		if err == nil && !applied[0] {
			err = fmt.Errorf("completion of r not applied")
		}
		done <- err
	}()
	commitWhenKeyWaited(t, st, peer, done)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for id, want := range map[uint64]jobq.JobState{r: jobq.StateSuccess, x: jobq.StateCanceled, p: jobq.StateWaiting, p2: jobq.StateWaiting} {
		if j, _ := st.JobGet(ctx, id); j.Status != want {
			t.Fatalf("job %d is %s, want %s", id, j.Status, want)
		}
	}
	if k, err := st.ConcurrencyKeyGet(ctx, "dev"); err != nil || k.Admitted != 2 {
		t.Fatalf("key dev: %+v %v, want 2 admitted", k, err)
	}
}

// idx_lease indexes PARKED jobs as WAITING, idx_type_status RUNNING ones
// (migration 021); every read by status still tells them
// apart: the counts by type and status, and the listings by status and by
// type and status.
func TestParkedAndWaitingToldApart(t *testing.T) { bothDialects(t, parkedAndWaitingToldApart) }

func parkedAndWaitingToldApart(t *testing.T, st *store.Store) {
	ctx := context.Background()
	submit := func(key, typ, ckey string) {
		t.Helper()
		if _, _, err := st.JobSubmit(ctx, jobq.SubmitParams{JobKey: key, JobType: typ, Params: "{}", RequestHash: key, ConcurrencyKey: ckey}); err != nil {
			t.Fatal(err)
		}
	}
	// Type a: key k1's first job admitted, two parked, one plain job;
	// type b: key k2's first admitted, one parked.
	for i := range 3 {
		submit(fmt.Sprintf("a-k1-%d", i), "a", "k1")
	}
	submit("a-plain", "a", "")
	submit("b-k2-0", "b", "k2")
	submit("b-k2-1", "b", "k2")
	// One job of type c runs (first in priority), one waits.
	if _, _, err := st.JobSubmit(ctx, jobq.SubmitParams{JobKey: "c-0", JobType: "c", Params: "{}", RequestHash: "c-0", Priority: 9}); err != nil {
		t.Fatal(err)
	}
	if got, err := st.JobClaimSkipLocked(ctx, jobq.ClaimParams{Owner: "r", Limit: 1, Lease: time.Minute}); err != nil || len(got) != 1 || got[0].JobType != "c" {
		t.Fatalf("claim of c-0: %v %v", got, err)
	}
	submit("c-1", "c", "")
	qs, err := st.QueueStats(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want := []jobq.TypeStatusCount{
		{JobType: "a", Status: jobq.StateParked, Count: 2}, {JobType: "a", Status: jobq.StateWaiting, Count: 2},
		{JobType: "b", Status: jobq.StateParked, Count: 1}, {JobType: "b", Status: jobq.StateWaiting, Count: 1},
		{JobType: "c", Status: jobq.StateRunning, Count: 1}, {JobType: "c", Status: jobq.StateWaiting, Count: 1},
	}
	if fmt.Sprint(qs.ByTypeStatus) != fmt.Sprint(want) {
		t.Errorf("by type and status %v, want %v", qs.ByTypeStatus, want)
	}
	if qs.ByStatus["PARKED"] != 3 || qs.ByStatus["WAITING"] != 4 || qs.ByStatus["RUNNING"] != 1 || len(qs.ByStatus) != 3 {
		t.Errorf("by status %v, want PARKED 3, WAITING 4, RUNNING 1", qs.ByStatus)
	}
	for _, c := range []struct {
		status  jobq.JobState
		jobType string
		want    int
	}{
		{jobq.StateParked, "", 3}, {jobq.StateWaiting, "", 4}, {jobq.StateRunning, "", 1},
		{jobq.StateParked, "a", 2}, {jobq.StateWaiting, "a", 2}, {jobq.StateParked, "b", 1}, {jobq.StateWaiting, "b", 1},
		{jobq.StateRunning, "a", 0}, {jobq.StateRunning, "c", 1}, {jobq.StateWaiting, "c", 1},
	} {
		jobs, _, err := st.JobList(ctx, jobq.ListParams{Status: c.status, JobType: c.jobType, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != c.want {
			t.Errorf("list %s of type %q: %d jobs, want %d", c.status, c.jobType, len(jobs), c.want)
		}
		for _, j := range jobs {
			if j.Status != c.status {
				t.Errorf("list %s of type %q: job %s is %s", c.status, c.jobType, j.JobKey, j.Status)
			}
		}
	}
}

// commitWhenKeyWaited commits peer once a locking read of concurrency_key
// (the completion whose result done carries) is in the server's process
// list, waiting there for the peer's key row (the list is read live, unlike
// information_schema.INNODB_TRX, a cache that a busy shared server can
// leave behind). After the bound it commits anyway, well inside the lock
// wait timeout: the completion may then not have waited, and the outcome
// the caller checks must hold all the same.
func commitWhenKeyWaited(t *testing.T, st *store.Store, peer *sql.Tx, done <-chan error) {
	t.Helper()
	ctx := context.Background()
	waited := false
	for deadline := time.Now().Add(20 * time.Second); !waited && time.Now().Before(deadline); {
		select {
		case err := <-done:
			t.Fatalf("the completion returned (%v) while the peer held the key row", err)
		default:
		}
		var n int
		if err := st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
			WHERE DB = DATABASE() AND ID <> CONNECTION_ID() AND INFO LIKE '%FROM concurrency_key AS k%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if waited = n > 0; !waited {
			time.Sleep(5 * time.Millisecond)
		}
	}
	if !waited {
		t.Log("the completion was not seen waiting for the key row; the peer commits anyway")
	}
	if err := peer.Commit(); err != nil {
		t.Fatal(err)
	}
}

// A batched keyed completion trusts the locking read of its keys when it
// finds no parked job for a key: that pick is read under the key's lock,
// so a job a submit parked and committed while the completion waited for
// the key's row is seen and admitted in the freed slot, not left PARKED
// with the key's slot free. The completion ends runs of two keys, so the
// pick of the first key (read before the wait) would give a consistent
// read its view before the peer's commit.
func TestKeyedCompletionSeesAJobParkedWhileItWaited(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	testdb.ServerWide(t, st, "jobq_test_innodb_trx_watch")
	ctx := context.Background()
	if _, _, err := st.JobSubmit(ctx, jobq.SubmitParams{JobKey: "a", JobType: "noop", Params: "{}", RequestHash: "a", ConcurrencyKey: "aaa"}); err != nil {
		t.Fatal(err)
	}
	r, _, err := st.JobSubmit(ctx, jobq.SubmitParams{JobKey: "r", JobType: "noop", Params: "{}", RequestHash: "r", ConcurrencyKey: "dev"})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := st.JobClaimSkipLocked(ctx, jobq.ClaimParams{Owner: "a", Limit: 2, Lease: time.Minute})
	if err != nil || len(claimed) != 2 {
		t.Fatalf("claim: %v %v, want jobs a and r", claimed, err)
	}
	// The peer: a submit of q on the same key, written as the store writes
	// one (the key row locked, q inserted PARKED: r holds the only slot),
	// held open.
	peer := openPeer(t, st,
		"SELECT admitted FROM concurrency_key WHERE ckey = 'dev' FOR UPDATE",
		`INSERT INTO job_queue (job_key, job_type, params, request_hash, status, priority, max_retry, timeout_ms,
			run_at, create_time, update_time, concurrency_key)
		 SELECT 'q', job_type, params, 'q', 'PARKED', priority, max_retry, timeout_ms, NOW(6), NOW(6), NOW(6), 'dev'
		 FROM job_queue WHERE job_key = 'r'`,
	)
	done := make(chan error, 1)
	go func() {
		comps := make([]jobq.Completion, len(claimed))
		for i, c := range claimed {
			comps[i] = jobq.Completion{Fence: c.Fence(), Outcome: jobq.OutcomeSuccess, ConcurrencyKey: "aaa"}
			if c.ID == r.ID {
				comps[i].ConcurrencyKey = "dev"
			}
		}
		applied, err := st.JobCompleteMany(ctx, comps)
		if err == nil && slices.Contains(applied, false) {
			err = fmt.Errorf("completions not applied: %v", applied)
		}
		done <- err
	}()
	commitWhenKeyWaited(t, st, peer, done)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if j, _ := st.JobGet(ctx, r.ID); j.Status != jobq.StateSuccess {
		t.Fatalf("job r is %s, want SUCCESS", j.Status)
	}
	var q jobq.JobState
	if err := st.DB().QueryRowContext(ctx, "SELECT status FROM job_queue WHERE job_key = 'q'").Scan(&q); err != nil || q != jobq.StateWaiting {
		t.Fatalf("job q is %s (%v), want WAITING: admitted in r's slot", q, err)
	}
	if k, err := st.ConcurrencyKeyGet(ctx, "dev"); err != nil || k.Admitted != 1 {
		t.Fatalf("key dev: %+v %v, want 1 admitted", k, err)
	}
}

// openPeer begins a READ COMMITTED transaction, runs stmts in it and leaves
// it open (rolled back at the test's end unless committed).
func openPeer(t *testing.T, st *store.Store, stmts ...string) *sql.Tx {
	t.Helper()
	ctx := context.Background()
	peer, err := st.DB().BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Rollback() })
	for _, q := range stmts {
		if _, err := peer.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return peer
}
