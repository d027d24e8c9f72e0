package store_test

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	jobqsql "github.com/jobq/jobq/sql"
	"github.com/jobq/jobq/store"
)

func uniqueSubmit(t *testing.T, st *store.Store, p jobq.SubmitParams) (jobq.Job, bool) {
	t.Helper()
	j, created, err := st.JobSubmit(context.Background(), p)
	if err != nil {
		t.Fatalf("submit %s: %v", p.JobKey, err)
	}
	return j, created
}

// waitDBClockPast polls the database clock until it is after at: waiting
// on a condition of the database, not on a timer of the test.
func waitDBClockPast(t *testing.T, st *store.Store, at time.Time) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; {
		now, err := st.DBNow(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if now.After(at) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("database clock %s never passed %s", now, at)
		}
		time.Sleep(20 * time.Millisecond) // polling the database clock
	}
}

func params(key string) jobq.SubmitParams {
	return jobq.SubmitParams{JobKey: key, JobType: "noop", Params: "{}", RequestHash: "h-" + key, MaxRetry: 3}
}

// A key submitted without a window is held for good, terminal or not.
func TestUniqueDefaultKeyIsPermanent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testdb.Store(t)
	a, created := uniqueSubmit(t, st, params("perm"))
	if !created || a.UniqueUntil != nil || a.UniqueWhileActive {
		t.Fatalf("first submit %+v created=%v", a, created)
	}
	if _, err := st.JobCancel(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if b, created := uniqueSubmit(t, st, params("perm")); created || b.ID != a.ID {
		t.Fatalf("resubmit of a terminal permanent key: job %d created=%v, want job %d", b.ID, created, a.ID)
	}
	other := params("perm")
	other.RequestHash = "different"
	if _, _, err := st.JobSubmit(ctx, other); !errors.Is(err, jobq.ErrKeyConflict) {
		t.Fatalf("different request on a permanent key: %v, want ErrKeyConflict", err)
	}
}

// unique_for_ms: inside the window the key names the job (same request:
// that job; another: conflict); once the database clock passed it, a
// submit releases the key and creates a new job, which GET by key returns.
func TestUniqueForWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testdb.Store(t)
	p := params("win")
	p.UniqueForMs = 1500
	a, created := uniqueSubmit(t, st, p)
	if !created || a.UniqueUntil == nil || a.UniqueUntil.Sub(a.CreateTime) != 1500*time.Millisecond {
		t.Fatalf("first submit %+v created=%v: want unique_until = create_time + 1.5 s", a, created)
	}
	if b, created := uniqueSubmit(t, st, p); created || b.ID != a.ID {
		t.Fatalf("inside the window: job %d created=%v, want job %d", b.ID, created, a.ID)
	}
	other := p
	other.RequestHash = "different"
	if _, _, err := st.JobSubmit(ctx, other); !errors.Is(err, jobq.ErrKeyConflict) {
		t.Fatalf("different request inside the window: %v, want ErrKeyConflict", err)
	}
	waitDBClockPast(t, st, *a.UniqueUntil)
	// A different request after the window is a new job, not a conflict;
	// it has no window of its own: the key is now held for good.
	c, created, err := st.JobSubmit(ctx, other)
	if err != nil || !created || c.ID == a.ID || c.KeyReleased {
		t.Fatalf("after the window: job %+v created=%v, %v; want a new job", c, created, err)
	}
	if old, err := st.JobGet(ctx, a.ID); err != nil || !old.KeyReleased || old.JobKey != "win" {
		t.Fatalf("the first job %+v, %v: want it kept, its key released", old, err)
	}
	if byKey, err := st.JobGetByKey(ctx, "win"); err != nil || byKey.ID != c.ID {
		t.Fatalf("GET by key: %+v, %v; want the holder %d", byKey, err, c.ID)
	}
	if d, created := uniqueSubmit(t, st, other); created || d.ID != c.ID {
		t.Fatalf("resubmit to the permanent holder: job %d created=%v, want %d", d.ID, created, c.ID)
	}
}

// unique_while active: the key names the job until it is terminal.
func TestUniqueWhileActive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testdb.Store(t)
	p := params("act")
	p.UniqueWhileActive = true
	a, _ := uniqueSubmit(t, st, p)
	if b, created := uniqueSubmit(t, st, p); created || b.ID != a.ID {
		t.Fatalf("while WAITING: job %d created=%v, want %d", b.ID, created, a.ID)
	}
	if _, err := st.JobCancel(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	b, created := uniqueSubmit(t, st, p)
	if !created || b.ID == a.ID || !b.UniqueWhileActive {
		t.Fatalf("after the job ended: %+v created=%v, want a new job holding while active", b, created)
	}
	// A batch of the same key while b is active answers b, and after b
	// ended creates the next one.
	out, err := st.JobSubmitMany(ctx, []jobq.SubmitParams{p, params("act-other")})
	if err != nil || out[0].Created || out[0].ID != b.ID || !out[1].Created {
		t.Fatalf("batch while active: %+v, %v; want existing %d and one created", out, err, b.ID)
	}
	if _, err := st.JobCancel(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	plain := params("act")
	plain.RequestHash = p.RequestHash
	out, err = st.JobSubmitMany(ctx, []jobq.SubmitParams{plain})
	if err != nil || !out[0].Created || out[0].ID == b.ID {
		t.Fatalf("batch after the holder ended: %+v, %v; want a new job", out, err)
	}
}

// Concurrent submits of a key whose window passed create exactly one job.
func TestUniqueWindowConcurrentSubmitsMakeOneJob(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	p := params("race")
	p.UniqueForMs = 1
	a, _ := uniqueSubmit(t, st, p)
	waitDBClockPast(t, st, *a.UniqueUntil)
	p.UniqueForMs = 60_000
	const n = 8
	ids := make([]uint64, n)
	createdN := 0
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j, created, err := st.JobSubmit(context.Background(), p)
			if err != nil {
				t.Errorf("submit %d: %v", i, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			ids[i] = j.ID
			if created {
				createdN++
			}
		}()
	}
	wg.Wait()
	if createdN != 1 {
		t.Fatalf("%d of %d concurrent submits created a job, want 1 (ids %v)", createdN, n, ids)
	}
	for _, id := range ids {
		if id != ids[0] || id == a.ID {
			t.Fatalf("ids %v: want one new job for all", ids)
		}
	}
}

// Migration 015 on a table with jobs: every existing job keeps its key,
// for good; down again works while no key was released.
func TestUniqueWindowMigrationOnExistingTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testdb.Store(t)
	steps := stepsFrom(t, 15)
	if _, err := st.MigrateDown(ctx, steps); err != nil {
		t.Fatalf("down to before 015: %v", err)
	}
	for _, k := range []string{"old-1", "old-2"} {
		if _, err := st.DB().ExecContext(ctx, `INSERT INTO job_queue (job_key, job_type, params, request_hash, status, run_at, create_time, update_time)
			VALUES (?, 'noop', '{}', ?, 'SUCCESS', NOW(6), NOW(6), NOW(6))`, k, "h-"+k); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.MigrateUp(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	old, err := st.JobGetByKey(ctx, "old-1")
	if err != nil || old.KeyReleased || old.UniqueUntil != nil {
		t.Fatalf("existing job after 015: %+v, %v", old, err)
	}
	if j, created := uniqueSubmit(t, st, params("old-1")); created || j.ID != old.ID {
		t.Fatalf("resubmit of an existing key: job %d created=%v, want %d", j.ID, created, old.ID)
	}
	if _, err := st.MigrateDown(ctx, steps); err != nil {
		t.Fatalf("down with no released key: %v", err)
	}
	if _, err := st.MigrateUp(ctx); err != nil {
		t.Fatal(err)
	}
}

// A keyed submit on a key whose holder has a uniqueness window: inside the
// window it gets the holder, after it a new keyed job holds the key (the
// batch path releases the key in its own transaction).
func TestUniqueWindowHolderThenKeyedSubmit(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	p := params("win-keyed")
	p.UniqueForMs = 1000
	a, _ := uniqueSubmit(t, st, p)
	keyed := params("win-keyed")
	keyed.ConcurrencyKey, keyed.ConcurrencyLimit = "device-1", 1
	if b, created := uniqueSubmit(t, st, keyed); created || b.ID != a.ID {
		t.Fatalf("keyed submit inside the window: job %d created=%v, want job %d", b.ID, created, a.ID)
	}
	waitDBClockPast(t, st, *a.UniqueUntil)
	c, created, err := st.JobSubmit(context.Background(), keyed)
	if err != nil || !created || c.ID == a.ID || c.ConcurrencyKey != "device-1" {
		t.Fatalf("keyed submit after the window: job %+v created=%v, %v; want a new keyed job", c, created, err)
	}
	if old, err := st.JobGet(context.Background(), a.ID); err != nil || !old.KeyReleased {
		t.Fatalf("the windowed holder %+v, %v: want its key released", old, err)
	}
}

// stepsFrom is the number of migrations numbered from version on: the
// steps MigrateDown takes to the schema before version.
func stepsFrom(t *testing.T, version int) int {
	t.Helper()
	files, err := fs.Glob(jobqsql.Migrations, "migrations/*.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		v, err := strconv.Atoi(strings.SplitN(path.Base(f), "_", 2)[0])
		if err != nil {
			t.Fatalf("migration %s: %v", f, err)
		}
		if v >= version {
			n++
		}
	}
	return n
}
