package jobtypes

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// The effect type's end marker says when its work ended on the database
// clock, not when its INSERT ran: here the INSERT is held behind a table
// lock until the test sees it waiting, and the marker still precedes the
// unlock — and follows the non_tx row by at least the sleep. Both hold on
// any machine speed (the marker is never later than the true end, and the
// true end precedes the INSERT the test saw waiting).
func TestEffectEndMarkerIsTheWorkEndNotTheInsert(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	ctx := context.Background()
	db := st.DB()
	if err := RegisterTestbed(ctx, scheduler.NewRegistry(), db); err != nil {
		t.Fatal(err)
	}
	lock, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	waitInsert := func(like string) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			var n int
			if err := lock.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.processlist
				WHERE info LIKE ? AND id <> CONNECTION_ID() AND db = DATABASE()`, like).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no INSERT like %q waiting on the lock within 2 minutes", like)
			}
			time.Sleep(10 * time.Millisecond) // polls the processlist: a statement waiting on a table lock sends no event
		}
	}
	count := func(id uint64, kind string) int {
		t.Helper()
		var n int
		if err := lock.QueryRowContext(ctx, "SELECT COUNT(*) FROM job_effect WHERE job_id = ? AND kind = ?", id, kind).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Lock job_effect after the run's non_tx row is in and before its
	// sleep ends; a machine too slow for that within the sleep gets another
	// run with a sleep twice as long.
	var job *scheduler.Job
	var unlockedAt time.Time
	for ms := 200; ; ms *= 2 {
		if ms > 60000 {
			t.Fatal("could not lock job_effect between a run's non_tx row and its end within a minute's sleep")
		}
		job = &scheduler.Job{ClaimedJob: jobq.ClaimedJob{ID: uint64(ms), Attempt: 1, JobType: Effect, Params: json.RawMessage(fmt.Sprintf(`{"ms":%d}`, ms))}, Owner: "r1"}
		done := make(chan error, 1)
		go func() { done <- (EffectHandler{DB: db}).Work(ctx, job) }()
		for count(job.ID, "non_tx") == 0 {
			time.Sleep(5 * time.Millisecond) // polls job_effect: the handler, called directly, reports its first row nowhere else
		}
		if _, err := lock.ExecContext(ctx, "LOCK TABLES job_effect WRITE"); err != nil {
			t.Fatal(err)
		}
		caught := count(job.ID, "end") == 0
		if caught {
			waitInsert("INSERT INTO job_effect%'end'%")
			if err := lock.QueryRowContext(ctx, "SELECT NOW(6)").Scan(&unlockedAt); err != nil {
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond) // hold it: a slow INSERT, as on a busy database
		}
		if _, err := lock.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("Work: %v", err)
		}
		if caught {
			break
		}
	}
	ms := job.ID
	var nonTx, end time.Time
	if err := db.QueryRowContext(ctx, "SELECT created_at FROM job_effect WHERE job_id = ? AND kind = 'non_tx'", job.ID).Scan(&nonTx); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, "SELECT created_at FROM job_effect WHERE job_id = ? AND kind = 'end'", job.ID).Scan(&end); err != nil {
		t.Fatal(err)
	}
	t.Logf("non_tx %s, end %s (+%s), end INSERT seen waiting at %s", nonTx.Format(time.StampMicro), end.Format(time.StampMicro),
		end.Sub(nonTx), unlockedAt.Format(time.StampMicro))
	if end.Sub(nonTx) < time.Duration(ms)*time.Millisecond {
		t.Errorf("end marker %s after the non_tx row, want ≥ the %dms sleep", end.Sub(nonTx), ms)
	}
	if !end.Before(unlockedAt) {
		t.Errorf("end marker %s is not before %s, when its INSERT was already waiting: it is the INSERT's time, not the work's end",
			end.Format(time.StampMicro), unlockedAt.Format(time.StampMicro))
	}
}
