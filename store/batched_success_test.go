package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/store"
)

// A FAILED job retried by hand, then succeeding in a batch: two attempts
// everywhere (executions, job_attempt, QueueStats, Activity).
func TestManualRetryThenBatchedSuccess(t *testing.T) {
	bothDialects(t, manualRetryThenBatchedSuccess)
}

func manualRetryThenBatchedSuccess(t *testing.T, st *store.Store) {
	ctx := context.Background()
	id := submitJob(t, st, "manual", "t", 0)
	a := claimOne(t, st, "a", 30*time.Second)
	if ap, err := st.JobCompleteMany(ctx, []jobq.Completion{{Fence: a.Fence(), Outcome: jobq.OutcomeFailed, Error: "boom"}}); err != nil || !ap[0] {
		t.Fatalf("fail: %v %v", ap, err)
	}
	if j := jobRow(t, st, id); j.Status != jobq.StateFailed {
		t.Fatalf("status %s", j.Status)
	}
	if _, err := st.JobRetry(ctx, id); err != nil {
		t.Fatal(err)
	}
	b := claimOne(t, st, "b", 30*time.Second)
	if ap, err := st.JobCompleteMany(ctx, []jobq.Completion{{Fence: b.Fence(), Outcome: jobq.OutcomeSuccess}}); err != nil || !ap[0] {
		t.Fatalf("success: %v %v", ap, err)
	}
	if got, want := execSummary(t, st, id), "1:a:FAILED 2:b:SUCCESS "; got != want {
		t.Errorf("executions %q, want %q", got, want)
	}
	var n, ns int
	if err := st.DB().QueryRow("SELECT COUNT(*), COALESCE(SUM(outcome='SUCCESS'),0) FROM job_attempt WHERE job_id = ?", id).Scan(&n, &ns); err != nil || n != 2 || ns != 1 {
		t.Errorf("job_attempt rows %d (success %d), %v; want 2 (1)", n, ns, err)
	}
	qs, err := st.QueueStats(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if qs.Finished["SUCCESS"] != 1 || qs.Finished["FAILED"] != 1 {
		t.Errorf("QueueStats finished %v; want SUCCESS 1 FAILED 1", qs.Finished)
	}
	act, err := st.Activity(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	var started, succ, failed int64
	for _, m := range act.Minutes {
		started += m.Started
		succ += m.Finished[jobq.OutcomeSuccess]
		failed += m.Finished[jobq.OutcomeFailed]
	}
	if started != 2 || succ != 1 || failed != 1 {
		t.Errorf("activity started %d success %d failed %d; want 2 1 1", started, succ, failed)
	}
	attempts := map[string]int64{}
	for _, r := range act.Replicas {
		attempts[r.Owner] = r.Attempts
	}
	if attempts["a"] != 1 || attempts["b"] != 1 {
		t.Errorf("activity replicas %v; want a:1 b:1", attempts)
	}
}

// A cancel requested while the run is in flight, then the run's batched
// success: CANCELED, exactly one execution row, counted once.
func TestCancelDuringBatchedSuccess(t *testing.T) {
	bothDialects(t, cancelDuringBatchedSuccess)
}

func cancelDuringBatchedSuccess(t *testing.T, st *store.Store) {
	ctx := context.Background()
	id := submitJob(t, st, "cancel", "t", 3)
	other := submitJob(t, st, "other", "t", 3)
	a := claimOne(t, st, "a", 30*time.Second)
	b := claimOne(t, st, "a", 30*time.Second)
	if a.ID != id {
		a, b = b, a
	}
	if _, err := st.JobCancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	ap, err := st.JobCompleteMany(ctx, []jobq.Completion{{Fence: a.Fence(), Outcome: jobq.OutcomeSuccess}, {Fence: b.Fence(), Outcome: jobq.OutcomeSuccess}})
	if err != nil || !ap[0] || !ap[1] {
		t.Fatalf("complete: %v %v", ap, err)
	}
	if j := jobRow(t, st, id); j.Status != jobq.StateCanceled {
		t.Fatalf("status %s, want CANCELED", j.Status)
	}
	if got := execSummary(t, st, id); got != "1:a:CANCELED " {
		t.Errorf("executions %q", got)
	}
	if got := execSummary(t, st, other); got != "1:a:SUCCESS " {
		t.Errorf("other executions %q", got)
	}
	var n int
	if err := st.DB().QueryRow("SELECT COUNT(*) FROM job_attempt").Scan(&n); err != nil || n != 2 {
		t.Errorf("job_attempt rows %d, %v; want 2", n, err)
	}
	// A retried completion (lost ack) of the canceled run is applied.
	ap, err = st.JobCompleteMany(ctx, []jobq.Completion{{Fence: a.Fence(), Outcome: jobq.OutcomeSuccess}, {Fence: b.Fence(), Outcome: jobq.OutcomeSuccess}})
	if err != nil || !ap[0] || !ap[1] {
		t.Fatalf("retried complete: %v %v; want applied", ap, err)
	}
	if err := st.DB().QueryRow("SELECT COUNT(*) FROM job_execution").Scan(&n); err != nil || n != 1 {
		t.Errorf("job_execution rows after retry %d, %v; want 1", n, err)
	}
	qs, err := st.QueueStats(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if qs.Finished["SUCCESS"] != 1 || qs.Finished["CANCELED"] != 1 {
		t.Errorf("QueueStats finished %v; want SUCCESS 1 CANCELED 1", qs.Finished)
	}
	// A stale fence (an attempt that never ran) is refused; nothing written.
	ap, err = st.JobCompleteMany(ctx, []jobq.Completion{{Fence: jobq.Fence{ID: other, Attempt: 2}, Outcome: jobq.OutcomeSuccess}})
	if err != nil || ap[0] {
		t.Fatalf("forged attempt: %v %v; want refused", ap, err)
	}
	if out, err := st.ExecutionOutcome(ctx, jobq.Fence{ID: other, Attempt: 2}); err != nil || out != "" {
		t.Errorf("forged attempt outcome %q %v", out, err)
	}
	if err := st.DB().QueryRow("SELECT COUNT(*) FROM job_execution").Scan(&n); err != nil || n != 1 {
		t.Errorf("job_execution rows after forged %d, %v; want 1", n, err)
	}
}

// Purge of batched successes: job rows go, no execution rows orphaned.
func TestPurgeBatchedSuccess(t *testing.T) { bothDialects(t, purgeBatchedSuccess) }

func purgeBatchedSuccess(t *testing.T, st *store.Store) {
	ctx := context.Background()
	var cs []jobq.Completion
	_, x := reclaimedElsewhere(t, st, "rescued")
	for i := range 5 {
		submitJob(t, st, "p"+string(rune('a'+i)), "t", 3)
	}
	for range 5 {
		c := claimOne(t, st, "a", 30*time.Second)
		cs = append(cs, jobq.Completion{Fence: c.Fence(), Outcome: jobq.OutcomeSuccess})
	}
	cs = append(cs, jobq.Completion{Fence: x.Fence(), Outcome: jobq.OutcomeSuccess})
	if _, err := st.JobCompleteMany(ctx, cs); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().Exec("UPDATE job_queue SET finished_at = NOW(6) - INTERVAL 2 HOUR, create_time = NOW(6) - INTERVAL 3 HOUR"); err != nil {
		t.Fatal(err)
	}
	res, err := st.JobPurge(ctx, jobq.PurgeParams{OlderThan: time.Hour, Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Jobs != 6 || res.Executions != 1 {
		t.Errorf("purge %+v; want 6 jobs 1 execution", res)
	}
	var n int
	if err := st.DB().QueryRow("SELECT (SELECT COUNT(*) FROM job_execution) + (SELECT COUNT(*) FROM job_attempt) + (SELECT COUNT(*) FROM job_queue)").Scan(&n); err != nil || n != 0 {
		t.Errorf("rows left %d, %v", n, err)
	}
}

// Migrate down to 016 and up again with data present: jobs survive, the
// view and the virtual columns come back, and the queue works after.
func TestMigrateDownUpWithData(t *testing.T) { bothDialects(t, migrateDownUpWithData) }

func migrateDownUpWithData(t *testing.T, st *store.Store) {
	ctx := context.Background()
	_, x := reclaimedElsewhere(t, st, "rescued")
	submitJob(t, st, "ok", "t", 3)
	c := claimOne(t, st, "a", 30*time.Second)
	if _, err := st.JobCompleteMany(ctx, []jobq.Completion{{Fence: x.Fence(), Outcome: jobq.OutcomeSuccess}, {Fence: c.Fence(), Outcome: jobq.OutcomeSuccess}}); err != nil {
		t.Fatal(err)
	}
	submitJob(t, st, "running", "t", 3)
	claimOne(t, st, "a", 30*time.Second)
	submitJob(t, st, "waiting", "t", 3)
	submitAt(t, st, "scheduled", time.Now().Add(time.Hour))
	count := func(q string) int {
		t.Helper()
		var n int
		if err := st.DB().QueryRow(q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	before := count("SELECT COUNT(*) FROM job_queue")
	attempts := count("SELECT COUNT(*) FROM job_attempt")
	// Down to schema 018 (idx_due indexes WAITING jobs too), whatever
	// came after 019.
	above := stepsFrom(t, 19)
	if down, err := st.MigrateDown(ctx, above); err != nil || len(down) != above || down[above-1] != 19 {
		t.Fatalf("down to 018: %v %v", down, err)
	}
	if n := count("SELECT COUNT(*) FROM job_queue WHERE due_status IS NOT NULL"); n != 2 {
		t.Errorf("due_status not null at 018 %d, want 2 (waiting, scheduled)", n)
	}
	down, err := st.MigrateDown(ctx, 2)
	if err != nil || len(down) != 2 || down[0] != 18 || down[1] != 17 {
		t.Fatalf("down: %v %v", down, err)
	}
	if n := count("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'job_queue' AND COLUMN_NAME IN ('scan_status','due_status')"); n != 0 {
		t.Errorf("virtual columns after down: %d", n)
	}
	if n := count("SELECT COUNT(*) FROM information_schema.VIEWS WHERE TABLE_SCHEMA = DATABASE()"); n != 0 {
		t.Errorf("views after down: %d", n)
	}
	if n := count("SELECT COUNT(*) FROM job_queue"); n != before {
		t.Errorf("jobs after down %d, want %d", n, before)
	}
	// Schema 016 has no view: every ended attempt is a job_execution row
	// again, the batched successes' included, as job_attempt showed them.
	if n := count("SELECT COUNT(*) FROM job_execution"); n != attempts {
		t.Errorf("job_execution rows after down %d, want %d (job_attempt's)", n, attempts)
	}
	if n := count("SELECT COUNT(*) FROM job_queue q JOIN job_execution e ON e.job_id = q.id AND e.attempt = q.attempt AND e.outcome = 'SUCCESS' AND e.owner = q.owner AND e.started_at = q.started_at AND e.finished_at = q.finished_at WHERE q.status = 'SUCCESS'"); n != 2 {
		t.Errorf("SUCCESS jobs with their attempt's row after down %d, want 2", n)
	}
	var idx string
	if err := st.DB().QueryRow("SELECT GROUP_CONCAT(COLUMN_NAME ORDER BY SEQ_IN_INDEX) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'job_queue' AND INDEX_NAME = 'idx_due'").Scan(&idx); err != nil || idx != "status,run_at" {
		t.Errorf("idx_due after down %q %v", idx, err)
	}
	up, err := st.MigrateUp(ctx)
	if err != nil || len(up) != above+2 {
		t.Fatalf("up: %v %v", up, err)
	}
	if n := count("SELECT COUNT(*) FROM job_queue"); n != before {
		t.Errorf("jobs after up %d, want %d", n, before)
	}
	if n := count("SELECT COUNT(*) FROM job_attempt"); n != attempts {
		t.Errorf("job_attempt after up %d, want %d", n, attempts)
	}
	if n := count("SELECT COUNT(*) FROM job_queue WHERE scan_status = 'WAITING'"); n != 1 {
		t.Errorf("scan_status WAITING %d, want 1", n)
	}
	if n := count("SELECT COUNT(*) FROM job_queue WHERE due_status IS NOT NULL"); n != 1 {
		t.Errorf("due_status not null %d, want 1 (scheduled)", n)
	}
	w := claimOne(t, st, "b", 30*time.Second)
	if ap, err := st.JobCompleteMany(ctx, []jobq.Completion{{Fence: w.Fence(), Outcome: jobq.OutcomeSuccess}}); err != nil || !ap[0] {
		t.Fatalf("complete after up %v %v", ap, err)
	}
	if n := count("SELECT COUNT(*) FROM job_attempt"); n != attempts+1 {
		t.Errorf("job_attempt after a success %d, want %d", n, attempts+1)
	}
	p, err := st.JobIdleProbe(ctx, 10)
	if err != nil || p.Due != 0 {
		t.Errorf("idle probe %+v %v", p, err)
	}
}

// bothDialects runs f on a store in the server's own dialect and on one
// opened in the forced MySQL dialect.
func bothDialects(t *testing.T, f func(t *testing.T, st *store.Store)) {
	t.Parallel()
	t.Run("native", func(t *testing.T) { f(t, testdb.Store(t)) })
	t.Run("mysql", func(t *testing.T) {
		st, err := store.Open(context.Background(), testdb.DSN(t), store.PoolConfig{MaxOpen: 8, ForceMySQLDialect: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		f(t, st)
	})
}

// A long-running job (or one scheduled or retried far ahead) finishes now
// with a batched success after more than StatsRecentRows newer jobs were
// created: its success finished inside the window, alone, and must be
// counted by QueueStats and Activity as its execution row was before the
// batched success stopped writing one (the row's id was the newest).
func TestOldJobSuccessCountedInRecentStats(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	ctx := context.Background()
	submitJob(t, st, "long", "t", 3)
	c := claimOne(t, st, "a", time.Hour)
	// The newer jobs since, all gone but the newest (as after retention):
	// one row standing for StatsRecentRows+1 newer ids, never started.
	if _, err := st.DB().Exec(`INSERT INTO job_queue (id, job_key, job_type, params, request_hash, status, run_at, create_time, update_time, finished_at)
		VALUES (?, 'filler', 't', '{}', 'h', 'CANCELED', NOW(6), NOW(6), NOW(6), NOW(6))`, c.ID+jobq.StatsRecentRows+1); err != nil {
		t.Fatal(err)
	}
	if ap, err := st.JobCompleteMany(ctx, []jobq.Completion{{Fence: c.Fence(), Outcome: jobq.OutcomeSuccess}}); err != nil || !ap[0] {
		t.Fatalf("complete: %v %v", ap, err)
	}
	qs, err := st.QueueStats(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if qs.Finished["SUCCESS"] != 1 {
		t.Errorf("QueueStats finished %v; want the one SUCCESS of the window", qs.Finished)
	}
	act, err := st.Activity(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	var succ int64
	for _, m := range act.Minutes {
		succ += m.Finished[jobq.OutcomeSuccess]
	}
	if succ != 1 {
		t.Errorf("Activity successes %d; want 1", succ)
	}
}

// The keyed batch (completeKeyedAdmit, one statement with the admissions):
// a cancel requested during the run ends it CANCELED with one execution
// row; the other keyed run succeeds without one; the key's parked job is
// admitted; the retried batch is applied and writes nothing more.
func TestKeyedBatchCancel(t *testing.T) {
	bothDialects(t, keyedBatchCancel)
}

func keyedBatchCancel(t *testing.T, st *store.Store) {
	ctx := context.Background()
	submit := func(key string) jobq.Job {
		j, _, err := st.JobSubmit(ctx, jobq.SubmitParams{JobKey: key, JobType: "t", Params: "{}", RequestHash: key,
			MaxRetry: 3, ConcurrencyKey: "ck", ConcurrencyLimit: 2})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	a, b, c := submit("k1"), submit("k2"), submit("k3")
	if c.Status != jobq.StateParked {
		t.Fatalf("third keyed job %s, want PARKED", c.Status)
	}
	cs, err := st.JobClaimSkipLocked(ctx, jobq.ClaimParams{Owner: "a", Limit: 2, Lease: time.Minute})
	if err != nil || len(cs) != 2 {
		t.Fatalf("claim %d %v", len(cs), err)
	}
	if _, err := st.JobCancel(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	batch := []jobq.Completion{}
	for _, x := range cs {
		batch = append(batch, jobq.Completion{Fence: x.Fence(), Outcome: jobq.OutcomeSuccess, ConcurrencyKey: x.ConcurrencyKey})
	}
	for i := range 2 {
		ap, err := st.JobCompleteMany(ctx, batch)
		if err != nil || !ap[0] || !ap[1] {
			t.Fatalf("complete %d: %v %v", i, ap, err)
		}
	}
	if got := execSummary(t, st, a.ID); got != "1:a:CANCELED " {
		t.Errorf("canceled keyed job executions %q", got)
	}
	if got := execSummary(t, st, b.ID); got != "1:a:SUCCESS " {
		t.Errorf("keyed success executions %q", got)
	}
	if j := jobRow(t, st, c.ID); j.Status != jobq.StateWaiting {
		t.Errorf("parked job %s, want WAITING", j.Status)
	}
	var n int
	if err := st.DB().QueryRow("SELECT COUNT(*) FROM job_execution").Scan(&n); err != nil || n != 1 {
		t.Errorf("execution rows %d %v, want 1", n, err)
	}
}

// Workflow parents in one batch: one without an output (batched, no
// execution row), one with an output (row by row), one whose cancel was
// requested while it ran. The children see each parent's status and the
// output of the one that has one; the canceled parent's child is canceled.
func TestWorkflowParentsBatched(t *testing.T) {
	bothDialects(t, workflowParentsBatched)
}

func workflowParentsBatched(t *testing.T, st *store.Store) {
	ctx := context.Background()
	wf, _, err := st.WorkflowSubmit(ctx, jobq.WorkflowSubmitParams{WorkflowKey: "bk", RequestHash: "h", Jobs: []jobq.WorkflowJobParams{
		wfJob("p1"), wfJob("p2"), wfJob("p3"), wfJob("c12", "p1", "p2"), wfJob("c3", "p3"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	c := claimAll(t, st)
	if len(c) != 3 {
		t.Fatalf("claimed %v", c)
	}
	if _, err := st.JobCancel(ctx, c["p3"].ID); err != nil {
		t.Fatal(err)
	}
	withOut := success(c["p2"])
	withOut.Output = json.RawMessage(`{"v":2}`)
	batch := []jobq.Completion{success(c["p1"]), withOut, success(c["p3"])}
	for i := range 2 {
		ap, err := st.JobCompleteMany(ctx, batch)
		if err != nil || !ap[0] || !ap[1] || !ap[2] {
			t.Fatalf("complete %d: %v %v", i, ap, err)
		}
	}
	want := map[string]jobq.JobState{"p1": jobq.StateSuccess, "p2": jobq.StateSuccess, "p3": jobq.StateCanceled,
		"c12": jobq.StateWaiting, "c3": jobq.StateCanceled}
	if got := statuses(t, st, wf.ID); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
	got := claimAll(t, st)
	child, ok := got["c12"]
	if !ok {
		t.Fatalf("c12 not claimable: %v", got)
	}
	ps, err := st.JobParents(ctx, []uint64{child.ID})
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, p := range ps[child.ID] {
		parts = append(parts, fmt.Sprintf("%s:%s:%s", p.JobKey, p.Status, p.Output))
	}
	if s := fmt.Sprint(parts); s != "[p1:SUCCESS: p2:SUCCESS:{\"v\":2}]" {
		t.Errorf("parents %s", s)
	}
	for key, want := range map[string]string{"p1": "1:r1:SUCCESS ", "p2": "1:r1:SUCCESS ", "p3": "1:r1:CANCELED "} {
		if s := execSummary(t, st, c[key].ID); s != want {
			t.Errorf("%s executions %q, want %q", key, s, want)
		}
	}
}

// The same success twice in one batch (a resend merged into the flush of
// the first): both applied, one SUCCESS, one attempt in job_attempt.
func TestDuplicateSuccessInOneBatch(t *testing.T) {
	bothDialects(t, duplicateSuccessInOneBatch)
}

func duplicateSuccessInOneBatch(t *testing.T, st *store.Store) {
	ctx := context.Background()
	id := submitJob(t, st, "dup", "t", 3)
	other := submitJob(t, st, "dup-other", "t", 3)
	a := claimOne(t, st, "a", time.Minute)
	b := claimOne(t, st, "a", time.Minute)
	s := jobq.Completion{Fence: a.Fence(), Outcome: jobq.OutcomeSuccess}
	ap, err := st.JobCompleteMany(ctx, []jobq.Completion{s, {Fence: b.Fence(), Outcome: jobq.OutcomeSuccess}, s})
	if err != nil || !ap[0] || !ap[1] || !ap[2] {
		t.Fatalf("complete: %v %v; want all applied", ap, err)
	}
	for _, j := range []uint64{id, other} {
		if got := execSummary(t, st, j); got != "1:a:SUCCESS " {
			t.Errorf("job %d executions %q", j, got)
		}
	}
	var n int
	if err := st.DB().QueryRow("SELECT COUNT(*) FROM job_attempt").Scan(&n); err != nil || n != 2 {
		t.Errorf("job_attempt rows %d %v, want 2", n, err)
	}
}
