package robustness

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/store"
	"github.com/jobq/jobq/testbed/dbprovider"
)

// TestThrowawayServer runs the tests that change a server's global state
// or stop it, on a throwaway mariadbd of their own (never the shared one):
// first time zones, then binlog_format=STATEMENT (the server keeps a binary
// log for it), then a 30 s outage.
func TestThrowawayServer(t *testing.T) {
	t.Parallel()
	if dbprovider.FindServerBinary() == "" {
		t.Fatal("no mariadbd or mysqld binary: these tests need a throwaway server (apt-get install mariadb-server)")
	}
	ctx := context.Background()
	ls, err := dbprovider.StartLocal(ctx, dbprovider.LocalOptions{Args: []string{"--log-bin", "--server-id=1"}})
	if err != nil {
		t.Fatalf("start a throwaway server: %v", err)
	}
	t.Cleanup(func() { _ = ls.Stop() })
	root, err := sql.Open("mysql", ls.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := root.Exec("CREATE DATABASE jobq CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		t.Fatal(err)
	}
	dsn := ls.DSN() + "jobq"
	st, err := store.Open(ctx, dsn, store.PoolConfig{MaxOpen: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.MigrateUp(ctx); err != nil {
		t.Fatal(err)
	}
	t.Run("time zones", func(t *testing.T) { testTimeZones(t, root, st, dsn) })
	t.Run("binlog statement format", func(t *testing.T) { testBinlogStatementFormat(t, root, ls.DSN()) })
	t.Run("outage", func(t *testing.T) { testOutage(t, ls, st, dsn) })
}

// testBinlogStatementFormat sets the server's binlog_format to STATEMENT,
// under which it refuses READ COMMITTED writes to InnoDB (error 1665), and
// runs each claim path on a store opened afterwards: each must fall back
// to the session's isolation level and claim its job, not fail for good.
// The limited-type claim (JobClaimLimited) had no fallback.
func testBinlogStatementFormat(t *testing.T, root *sql.DB, serverDSN string) {
	ctx := context.Background()
	if _, err := root.Exec("CREATE DATABASE jobq_binlog CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		t.Fatal(err)
	}
	dsn := serverDSN + "jobq_binlog"
	mig, err := store.Open(ctx, dsn, store.PoolConfig{MaxOpen: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer mig.Close()
	if _, err := mig.MigrateUp(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Exec("SET GLOBAL binlog_format = 'STATEMENT'"); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if _, err := root.Exec("SET GLOBAL binlog_format = 'MIXED'"); err != nil {
			t.Error(err)
		}
	}()
	// The refusal is real: a READ COMMITTED write on a new session fails
	// with 1665.
	probe, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	tx, err := probe.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec("UPDATE job_queue SET priority = priority WHERE id = 0")
	_ = tx.Rollback()
	if store.ErrorNumber(err) != store.ErrNumBinlogStmtMode {
		t.Fatalf("a READ COMMITTED write under binlog_format=STATEMENT: err %v, want error %d", err, store.ErrNumBinlogStmtMode)
	}

	const lease = 30 * time.Second
	claims := []struct {
		name  string
		claim func(st *store.Store) ([]jobq.ClaimedJob, error)
	}{
		{"limited", func(st *store.Store) ([]jobq.ClaimedJob, error) {
			if _, err := st.TypeSetLimit(ctx, "binlog-limited", 5); err != nil {
				return nil, err
			}
			return st.JobClaimLimited(ctx, "binlog-limited", jobq.ClaimParams{Owner: "r", Limit: 5, Lease: lease})
		}},
		{"skiplocked", func(st *store.Store) ([]jobq.ClaimedJob, error) {
			return st.JobClaimSkipLocked(ctx, jobq.ClaimParams{Owner: "r", Limit: 5, Lease: lease})
		}},
		{"cas", func(st *store.Store) ([]jobq.ClaimedJob, error) {
			cands, err := st.JobScanAvailable(ctx, 5)
			if err != nil {
				return nil, err
			}
			cs, _, err := st.JobClaimCAS(ctx, jobq.ClaimCASParams{ClaimParams: jobq.ClaimParams{Owner: "r", Limit: 5, Lease: lease}, Candidates: cands})
			return cs, err
		}},
	}
	for _, c := range claims { // one after the other: each claims the one WAITING job
		// A store of its own: the fallback is remembered per store.
		st, err := store.Open(ctx, dsn, store.PoolConfig{MaxOpen: 2})
		if err != nil {
			t.Fatal(err)
		}
		typ := "binlog-" + c.name
		job, created, err := st.JobSubmit(ctx, jobq.SubmitParams{JobKey: typ, JobType: typ, Params: "{}", RequestHash: typ})
		if err != nil || !created {
			t.Fatalf("%s: submit: created %v, err %v", c.name, created, err)
		}
		got, err := c.claim(st)
		st.Close()
		if err != nil || len(got) != 1 || got[0].ID != job.ID {
			t.Errorf("%s claim under binlog_format=STATEMENT: %d jobs, err %v; want job %d claimed", c.name, len(got), err, job.ID)
		}
	}
}

// testTimeZones sets the server's global time_zone to +09:00 and runs a
// replica with TZ=America/New_York: a job whose run_at is 2 s ahead
// (written with a New York offset) must start no earlier than run_at and
// within one poll interval after it; a job without run_at starts at once.
func testTimeZones(t *testing.T, root *sql.DB, st *store.Store, dsn string) {
	if _, err := root.Exec("SET GLOBAL time_zone = '+09:00'"); err != nil {
		t.Fatal(err)
	}
	var tz string
	if err := root.QueryRow("SELECT @@global.time_zone").Scan(&tz); err != nil || tz != "+09:00" {
		t.Fatalf("global time_zone = %q (%v)", tz, err)
	}
	const poll = 500 * time.Millisecond
	rp := startReplica(t, dsn, "TZ=America/New_York", replicaPollEnv+"="+poll.String(), replicaJitterEnv+"=0", replicaOwnerEnv+"=tz-replica")
	if rp.tz != "America/New_York" && rp.tz != "Local" {
		t.Fatalf("replica runs in time zone %q", rp.tz)
	}
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatalf("load America/New_York: %v", err)
	}
	dbNow, err := st.DBNow(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	runAt := dbNow.Add(2 * time.Second).Truncate(time.Microsecond)
	code, body := rp.submit(fmt.Sprintf(`{"job_key":"due-in-2s","job_type":"noop","run_at":%q}`, runAt.In(ny).Format(time.RFC3339Nano)))
	if code != 201 {
		t.Fatalf("submit: %d %s", code, body)
	}
	var created apitype.Job
	_ = json.Unmarshal([]byte(body), &created)
	if code, body := rp.submit(`{"job_key":"due-now","job_type":"noop"}`); code != 201 {
		t.Fatalf("submit: %d %s", code, body)
	}
	now := waitKey(t, st, "due-now", 2*time.Minute)
	// A time-zone mix-up shows as hours; a loaded machine as seconds.
	if d := now.StartedAt.Sub(now.CreateTime); d < 0 || d > 10*time.Minute {
		t.Errorf("a job due now started %s after its creation, want within minutes (a time-zone mix-up shows as hours)", d)
	}
	j := waitKey(t, st, "due-in-2s", 2*time.Minute)
	if !j.RunAt.Equal(runAt) {
		t.Errorf("run_at stored as %s, want %s", j.RunAt, runAt)
	}
	late := j.StartedAt.Sub(runAt)
	t.Logf("run_at %s (sent as %s), started %s: %s after due; poll interval %s",
		runAt.Format(time.RFC3339Nano), runAt.In(ny).Format(time.RFC3339Nano), j.StartedAt.Format(time.RFC3339Nano), late, poll)
	if late < 0 {
		t.Fatalf("the job started %s before its run_at", -late)
	}
	// How late (one poll interval on an idle machine) is the logged figure
	// above; the verdict is "never early" and "not hours off".
	if late > 10*time.Minute {
		t.Fatalf("the job started %s after its run_at, want within minutes (a time-zone mix-up shows as hours)", late)
	}
}

// waitKey waits until the job with key succeeds and returns it.
func waitKey(t *testing.T, st *store.Store, key string, d time.Duration) jobq.Job {
	t.Helper()
	var j jobq.Job
	waitUntil(t, d, key+" to succeed", func() bool {
		var err error
		j, err = st.JobGetByKey(context.Background(), key)
		return err == nil && j.Status == jobq.StateSuccess
	})
	if j.StartedAt == nil {
		t.Fatalf("%s: no started_at", key)
	}
	return j
}

// testOutage kills the database for 30 s under two replicas with jobs in
// flight and waiting: the replicas stay up, answer /healthz, report
// not-ready on /readyz and 503 on submits, and once the database is back
// they recover by themselves and every job succeeds.
func testOutage(t *testing.T, ls *dbprovider.LocalServer, st *store.Store, dsn string) {
	ctx := context.Background()
	a := startReplica(t, dsn, replicaOwnerEnv+"=outage-a", replicaJitterEnv+"=50ms")
	b := startReplica(t, dsn, replicaOwnerEnv+"=outage-b", replicaJitterEnv+"=50ms")
	const jobs = 40
	for i := range jobs {
		rp := a
		if i%2 == 1 {
			rp = b
		}
		if code, body := rp.submit(fmt.Sprintf(`{"job_key":"outage-%d","job_type":"sleep","params":{"ms":1000},"max_retry":10}`, i)); code != 201 {
			t.Fatalf("submit: %d %s", code, body)
		}
	}
	waitUntil(t, 10*time.Second, "jobs running", func() bool {
		var n int
		err := st.DB().QueryRow("SELECT COUNT(*) FROM job_queue WHERE job_key LIKE 'outage-%' AND status = 'RUNNING'").Scan(&n)
		return err == nil && n >= 10
	})
	before, _ := st.JobCountByStatus(ctx)
	if err := ls.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	t.Logf("database killed with %v", before)
	for _, rp := range []*replicaProc{a, b} {
		waitUntil(t, 10*time.Second, "/readyz 503", func() bool { return rp.status("/readyz") == 503 })
		code, body := rp.submit(`{"job_key":"during-outage","job_type":"noop"}`)
		if code != 503 || !strings.Contains(body, `"unavailable"`) {
			t.Errorf("submit during the outage: %d %s, want 503 unavailable", code, body)
		}
	}
	for time.Since(killed) < 30*time.Second {
		for _, rp := range []*replicaProc{a, b} {
			if !rp.alive() {
				t.Fatalf("a replica exited during the outage: %s", rp.stderr.String())
			}
			if c := rp.status("/healthz"); c != 200 {
				t.Fatalf("/healthz during the outage: %d", c)
			}
		}
		time.Sleep(time.Second)
	}
	if err := ls.Start(ctx); err != nil {
		t.Fatalf("restart the database: %v", err)
	}
	back := time.Now()
	for _, rp := range []*replicaProc{a, b} {
		waitUntil(t, 20*time.Second, "/readyz 200 after the outage", func() bool { return rp.status("/readyz") == 200 })
	}
	ready := time.Since(back)
	deadline := time.Now().Add(60 * time.Second)
	for {
		var done int
		err := st.DB().QueryRow("SELECT COUNT(*) FROM job_queue WHERE job_key LIKE 'outage-%' AND status = 'SUCCESS'").Scan(&done)
		if err == nil && done == jobs {
			break
		}
		if time.Now().After(deadline) {
			var rows []string
			r, _ := st.DB().Query("SELECT id, status, attempt, owner, lease_until, NOW(6), run_at FROM job_queue WHERE status <> 'SUCCESS' LIMIT 5")
			for r != nil && r.Next() {
				var id, attempt int
				var status string
				var owner sql.NullString
				var lease sql.NullTime
				var now, runAt time.Time
				_ = r.Scan(&id, &status, &attempt, &owner, &lease, &now, &runAt)
				rows = append(rows, fmt.Sprintf("%d %s a%d %s lease %v now %v run_at %v", id, status, attempt, owner.String, lease.Time, now, runAt))
			}
			t.Fatalf("%d of %d jobs succeeded 60s after the outage (%v)\n%s\nreplica a: %s\nreplica b: %s", done, jobs, err,
				strings.Join(rows, "\n"), tail(a.stderr.String(), 3000), tail(b.stderr.String(), 3000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("database down %s; replicas ready %s and all %d jobs done %s after it came back",
		back.Sub(killed).Round(time.Millisecond), ready.Round(time.Millisecond), jobs, time.Since(back).Round(time.Millisecond))
	var lost, dupSuccess int
	if err := st.DB().QueryRow(`SELECT
		(SELECT COUNT(*) FROM job_queue WHERE job_key LIKE 'outage-%' AND status <> 'SUCCESS'),
		(SELECT COUNT(*) FROM (SELECT job_id FROM job_attempt WHERE outcome = 'SUCCESS' GROUP BY job_id HAVING COUNT(*) > 1) d)`).
		Scan(&lost, &dupSuccess); err != nil {
		t.Fatal(err)
	}
	if lost != 0 || dupSuccess != 0 {
		t.Fatalf("%d jobs not SUCCESS, %d jobs with more than one SUCCESS execution", lost, dupSuccess)
	}
	for _, rp := range []*replicaProc{a, b} {
		if !rp.alive() {
			t.Fatalf("a replica exited: %s", rp.stderr.String())
		}
		if n := strings.Count(rp.stderr.String(), "\n"); n > 2000 {
			t.Errorf("a replica wrote %d log lines over a 30 s outage: retries are not backing off", n)
		}
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// waitUntil polls cond: these process-level tests' replicas run in child
// processes (and the database is killed under them), so no event of theirs
// reaches this process.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
