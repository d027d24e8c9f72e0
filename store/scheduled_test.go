package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/gen/jobqdb"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/store"
)

func submitAt(t *testing.T, st *store.Store, key string, runAt time.Time) jobq.Job {
	t.Helper()
	j, created, err := st.JobSubmit(context.Background(), jobq.SubmitParams{
		JobKey: key, JobType: "noop", Params: "{}", RequestHash: key, MaxRetry: 3, RunAt: &runAt,
	})
	if err != nil || !created {
		t.Fatalf("submit %s: created=%v err=%v", key, created, err)
	}
	return j
}

// A submit due later is SCHEDULED; the promoter's probe sees its run_at;
// promotion waits for the database clock; cancel, retry and get work on it.
func TestScheduledLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testdb.Store(t)
	now, err := st.DBNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	later := now.Add(time.Hour).Truncate(time.Microsecond)
	due := submitAt(t, st, "due", now.Add(-time.Second))
	fut := submitAt(t, st, "future", later)
	fut2 := submitAt(t, st, "future-2", later.Add(time.Minute))
	if due.Status != jobq.StateWaiting || fut.Status != jobq.StateScheduled || fut2.Status != jobq.StateScheduled {
		t.Fatalf("statuses %s %s %s, want WAITING SCHEDULED SCHEDULED", due.Status, fut.Status, fut2.Status)
	}
	sn, err := st.JobScheduledNext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !sn.Next.Equal(later) || sn.DBNow.Before(now) {
		t.Fatalf("scheduled next = %+v, want next %s and db_now ≥ %s", sn, later, now)
	}
	if n, err := st.JobPromoteDue(ctx, 10); err != nil || n != 0 {
		t.Fatalf("promote before due: n=%d err=%v, want 0", n, err)
	}
	if _, err := st.DB().Exec("UPDATE job_queue SET run_at = NOW(6) - INTERVAL 1 SECOND WHERE id = ?", fut.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := st.JobPromoteDue(ctx, 10); err != nil || n != 1 {
		t.Fatalf("promote when due: n=%d err=%v, want 1", n, err)
	}
	if got, _ := st.JobGet(ctx, fut.ID); got.Status != jobq.StateWaiting {
		t.Fatalf("promoted job is %s, want WAITING", got.Status)
	}
	if sn, _ := st.JobScheduledNext(ctx); !sn.Next.Equal(later.Add(time.Minute)) {
		t.Fatalf("scheduled next after promotion = %s, want %s", sn.Next, later.Add(time.Minute))
	}

	c, err := st.JobCancel(ctx, fut2.ID)
	if err != nil || c.Status != jobq.StateCanceled {
		t.Fatalf("cancel SCHEDULED: status=%s err=%v, want CANCELED", c.Status, err)
	}
	if sn, _ := st.JobScheduledNext(ctx); !sn.Next.IsZero() {
		t.Fatalf("scheduled next with none scheduled = %s, want zero", sn.Next)
	}
	r, err := st.JobRetry(ctx, fut2.ID)
	if err != nil || r.Status != jobq.StateWaiting || r.RunAt.After(time.Now().Add(time.Hour)) {
		t.Fatalf("retry of the canceled job: status=%s run_at=%s err=%v, want WAITING due now", r.Status, r.RunAt, err)
	}
	list, _, err := st.JobList(ctx, jobq.ListParams{Status: jobq.StateScheduled, Limit: 10})
	if err != nil || len(list) != 0 {
		t.Fatalf("list SCHEDULED = %d jobs, err %v, want 0", len(list), err)
	}
}

// The idle probe and the skiplocked claim's locking read touch at most two
// index entries however many jobs wait in the future (Handler_read_*).
func TestScanSkipsScheduledJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testdb.Store(t)
	if _, err := st.DB().Exec(`INSERT INTO job_queue (job_key, job_type, params, request_hash, status, priority, run_at, create_time, update_time)
		SELECT CONCAT('f-', seq), 'noop', '{}', 'h', 'SCHEDULED', seq % 7, NOW(6) + INTERVAL 1 DAY, NOW(6), NOW(6) FROM seq_1_to_5000`); err != nil {
		t.Fatal(err)
	}
	conn, err := st.DB().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	q := jobqdb.New(conn)
	for name, run := range map[string]func() error{
		"scan (idle probe, cas read)": func() error { _, err := q.JobScanAvailable(ctx, 1); return err },
		"promoter probe":              func() error { _, err := q.JobScheduledNext(ctx); return err },
		"skiplocked locking read": func() error {
			tx, err := conn.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			_, err = q.WithTx(tx).JobLockAvailable(ctx, jobqdb.JobLockAvailableParams{Excluded: []string{""}, Limit: 1})
			return err
		},
	} {
		// The first run on a freshly written table also reads its persistent
		// statistics; the second is what every later scan costs.
		for i := range 2 {
			if _, err := conn.ExecContext(ctx, "FLUSH STATUS"); err != nil {
				t.Fatal(err)
			}
			if err := run(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if got := testdb.HandlerReads(t, conn); i == 1 && got > 2 {
				t.Errorf("%s read %d index entries with 5,000 scheduled jobs, want ≤ 2", name, got)
			}
		}
	}
}

// Migration 005 moves WAITING jobs that are not yet due to SCHEDULED, and
// back on down.
func TestMigration005MovesFutureJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testdb.Store(t)
	now, _ := st.DBNow(ctx)
	fut := submitAt(t, st, "future", now.Add(time.Hour))
	due := submitAt(t, st, "due", now.Add(-time.Hour))
	status := func(id uint64) jobq.JobState {
		// A column read, not JobGet: below the latest migration the row
		// lacks columns JobGet's SELECT * names.
		var s string
		if err := st.DB().QueryRowContext(ctx, "SELECT status FROM job_queue WHERE id = ?", id).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return jobq.JobState(s)
	}
	ms, err := st.MigrateStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	steps := 0
	for _, m := range ms {
		if m.Applied && m.Version >= 5 {
			steps++
		}
	}
	if _, err := st.MigrateDown(ctx, steps); err != nil {
		t.Fatalf("down %d: %v", steps, err)
	}
	if got := fmt.Sprintf("%s %s", status(fut.ID), status(due.ID)); got != "WAITING WAITING" {
		t.Fatalf("after down: %s, want WAITING WAITING", got)
	}
	if _, err := st.MigrateUp(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	if got := fmt.Sprintf("%s %s", status(fut.ID), status(due.ID)); got != "SCHEDULED WAITING" {
		t.Fatalf("after up: %s, want SCHEDULED WAITING", got)
	}
}

// A promotion never waits for a lock: a due SCHEDULED row another
// transaction holds (another replica's promotion, a completion parking a
// retry over a slow link) is skipped at once and the other due rows are
// promoted; the held row is promoted once it is free.
func TestPromoteSkipsHeldRowsWithoutWaiting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testdb.Store(t)
	now, err := st.DBNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held := submitAt(t, st, "held", now.Add(time.Hour))
	free := submitAt(t, st, "free", now.Add(time.Hour))
	if _, err := st.DB().Exec("UPDATE job_queue SET run_at = NOW(6) - INTERVAL 1 SECOND WHERE id IN (?, ?)", held.ID, free.ID); err != nil {
		t.Fatal(err)
	}
	tx, err := st.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SELECT id FROM job_queue WHERE id = ? FOR UPDATE", held.ID); err != nil {
		t.Fatal(err)
	}
	// The lock is held until the call returns: a call that waited for it
	// could only end with an error (lock wait timeout, or the hang bound).
	bound, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if n, err := st.JobPromoteDue(bound, 10); err != nil || n != 1 {
		t.Fatalf("promote with job %d held: n=%d err=%v; want 1 without waiting for the lock", held.ID, n, err)
	}
	if got, _ := st.JobGet(ctx, free.ID); got.Status != jobq.StateWaiting {
		t.Fatalf("free job is %s, want WAITING", got.Status)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n, err := st.JobPromoteDue(ctx, 10); err != nil || n != 1 {
		t.Fatalf("promote once the row is free: n=%d err=%v, want 1", n, err)
	}
}
