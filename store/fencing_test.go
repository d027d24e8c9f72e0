package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/store"
)

// These tests pin the store's fencing guarantees one statement at a time,
// with no scheduler and no timing: every interleaving is forced by the
// order of the calls. Each would fail on a one-line bug that the chaos
// scenarios catch only by luck (make mutants).

func submitJob(t *testing.T, st *store.Store, key, typ string, maxRetry int) uint64 {
	t.Helper()
	j, created, err := st.JobSubmit(context.Background(), jobq.SubmitParams{
		JobKey: key, JobType: typ, Params: "{}", RequestHash: key, MaxRetry: maxRetry,
	})
	if err != nil || !created {
		t.Fatalf("submit %s: created=%v err=%v", key, created, err)
	}
	return j.ID
}

// claimOne claims exactly one job with the skiplocked claim.
func claimOne(t *testing.T, st *store.Store, owner string, lease time.Duration) jobq.ClaimedJob {
	t.Helper()
	cs, err := st.JobClaimSkipLocked(context.Background(), jobq.ClaimParams{Owner: owner, Limit: 1, Lease: lease})
	if err != nil || len(cs) != 1 {
		t.Fatalf("claim by %s: %d claimed, err %v; want 1", owner, len(cs), err)
	}
	return cs[0]
}

// expireLease moves a RUNNING job's lease one second into the past on the
// database clock, as if its holder had stopped renewing it.
func expireLease(t *testing.T, st *store.Store, id uint64) {
	t.Helper()
	if _, err := st.DB().Exec(`UPDATE job_queue SET lease_until = NOW(6) - INTERVAL 1 SECOND WHERE id = ? AND status = 'RUNNING'`, id); err != nil {
		t.Fatalf("expire lease of job %d: %v", id, err)
	}
}

func rescue(t *testing.T, st *store.Store, f jobq.Fence) {
	t.Helper()
	ok, err := st.JobRescueExpired(context.Background(), f)
	if err != nil || !ok {
		t.Fatalf("rescue %+v: ok=%v err=%v; want rescued", f, ok, err)
	}
}

func jobRow(t *testing.T, st *store.Store, id uint64) jobq.Job {
	t.Helper()
	j, err := st.JobGet(context.Background(), id)
	if err != nil {
		t.Fatalf("get job %d: %v", id, err)
	}
	return j
}

// execSummary is "attempt:owner:outcome" per execution row ("-" for none).
func execSummary(t *testing.T, st *store.Store, id uint64) string {
	t.Helper()
	ex, err := st.JobExecutions(context.Background(), id)
	if err != nil {
		t.Fatalf("executions of job %d: %v", id, err)
	}
	out := ""
	for _, e := range ex {
		o := string(e.Outcome)
		if o == "" {
			o = "-"
		}
		out += fmt.Sprintf("%d:%s:%s ", e.Attempt, e.Owner, o)
	}
	return out
}

// rowDigest is every job_queue column a fenced write could change.
func rowDigest(j jobq.Job) string {
	return fmt.Sprintf("status=%s attempt=%d owner=%q retry_times=%d lease_until=%v finished_at=%v update_time=%v cancel=%v",
		j.Status, j.Attempt, j.Owner, j.RetryTimes, j.LeaseUntil, j.FinishedAt, j.UpdateTime, j.CancelRequested)
}

// reclaimedElsewhere: owner a claims the job (attempt 1), its lease expires
// and is rescued, and owner b claims it again (attempt 2, still RUNNING).
func reclaimedElsewhere(t *testing.T, st *store.Store, key string) (a, b jobq.ClaimedJob) {
	t.Helper()
	submitJob(t, st, key, "t", 3)
	a = claimOne(t, st, "a", 30*time.Second)
	expireLease(t, st, a.ID)
	rescue(t, st, a.Fence())
	b = claimOne(t, st, "b", 30*time.Second)
	if b.ID != a.ID || b.Attempt != 2 {
		t.Fatalf("re-claim: job %d attempt %d, want job %d attempt 2", b.ID, b.Attempt, a.ID)
	}
	return a, b
}

// A zombie (owner a, whose run was rescued and re-claimed by b) cannot
// renew the lease it lost: the renewal is fenced by owner, not by id alone.
func TestLeaseRenewOfLostRunMatchesNothing(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	ctx := context.Background()
	a, _ := reclaimedElsewhere(t, st, "renew")
	before := jobRow(t, st, a.ID)

	n, err := st.LeaseRenewMany(ctx, jobq.LeaseRenewParams{Owner: "a", Lease: time.Hour, IDs: []uint64{a.ID}})
	if err != nil || len(n) != 0 {
		t.Fatalf("LeaseRenewMany(owner a) = %v, %v; want no row", n, err)
	}
	if got, want := rowDigest(jobRow(t, st, a.ID)), rowDigest(before); got != want {
		t.Fatalf("after the zombie's renewal:\n got %s\nwant %s", got, want)
	}
	n, err = st.LeaseRenewMany(ctx, jobq.LeaseRenewParams{Owner: "b", Lease: time.Hour, IDs: []uint64{a.ID}})
	if err != nil || len(n) != 1 || n[0] != a.ID {
		t.Fatalf("LeaseRenewMany(owner b) = %v, %v; want [%d]", n, err, a.ID)
	}
}

// skewedStore opens a store on dsn whose sessions' clock (the timestamp
// variable, which NOW(6) follows) is frozen one hour ahead of this host.
func skewedStore(t *testing.T, dsn string) (*store.Store, time.Time) {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ahead := time.Now().Add(time.Hour).Truncate(time.Microsecond).UTC()
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["timestamp"] = strconv.FormatFloat(float64(ahead.UnixMicro())/1e6, 'f', 6, 64)
	st, err := store.Open(context.Background(), cfg.FormatDSN(), store.PoolConfig{MaxOpen: 4})
	if err != nil {
		t.Fatalf("open skewed store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	now, err := st.DBNow(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !now.Equal(ahead) {
		t.Fatalf("skewed session clock = %v, want %v", now, ahead)
	}
	return st, ahead
}

// Every claim path stamps started_at and the lease from the database clock,
// never the replica's: with the session clock an hour ahead of the host,
// started_at is that clock and lease_until − started_at is the lease.
func TestClaimStampsDatabaseClock(t *testing.T) {
	t.Parallel()
	const lease = 7 * time.Second
	paths := map[string]func(st *store.Store) ([]jobq.ClaimedJob, error){
		"skiplocked": func(st *store.Store) ([]jobq.ClaimedJob, error) {
			return st.JobClaimSkipLocked(context.Background(), jobq.ClaimParams{Owner: "r", Limit: 5, Lease: lease})
		},
		"cas": func(st *store.Store) ([]jobq.ClaimedJob, error) {
			cands, err := st.JobScanAvailable(context.Background(), 5)
			if err != nil {
				return nil, err
			}
			cs, _, err := st.JobClaimCAS(context.Background(), jobq.ClaimCASParams{
				ClaimParams: jobq.ClaimParams{Owner: "r", Limit: 5, Lease: lease}, Candidates: cands})
			return cs, err
		},
		"limited type": func(st *store.Store) ([]jobq.ClaimedJob, error) {
			if _, err := st.TypeSetLimit(context.Background(), "t", 5); err != nil {
				return nil, err
			}
			return st.JobClaimLimited(context.Background(), "t", jobq.ClaimParams{Owner: "r", Limit: 5, Lease: lease})
		},
	}
	for name, claim := range paths {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dsn := testdb.DSN(t)
			host, err := store.Open(context.Background(), dsn, store.PoolConfig{MaxOpen: 4})
			if err != nil {
				t.Fatal(err)
			}
			defer host.Close()
			ids := []uint64{submitJob(t, host, "c1", "t", 0), submitJob(t, host, "c2", "t", 0)}
			skewed, dbNow := skewedStore(t, dsn)
			cs, err := claim(skewed)
			if err != nil || len(cs) != len(ids) {
				t.Fatalf("claim: %d jobs, err %v; want %d", len(cs), err, len(ids))
			}
			for _, c := range cs {
				j := jobRow(t, host, c.ID)
				if j.StartedAt == nil || !j.StartedAt.Equal(dbNow) || !c.StartedAt.Equal(dbNow) {
					t.Errorf("job %d: started_at %v (claim returned %v), want the database clock %v", c.ID, j.StartedAt, c.StartedAt, dbNow)
					continue
				}
				if j.LeaseUntil == nil || j.LeaseUntil.Sub(*j.StartedAt) != lease || !c.LeaseUntil.Equal(*j.LeaseUntil) {
					t.Errorf("job %d: lease_until %v (claim returned %v), want started_at + %s = %v", c.ID, j.LeaseUntil, c.LeaseUntil, lease, dbNow.Add(lease))
				}
				ex, err := host.JobExecutions(context.Background(), c.ID)
				if err != nil || len(ex) != 1 || !ex[0].StartedAt.Equal(dbNow) {
					t.Errorf("job %d: executions %+v (err %v), want one started at %v", c.ID, ex, err, dbNow)
				}
			}
		})
	}
}

// A run that lost its job (rescued, re-claimed by b, which is still
// RUNNING) has its late success refused on every completion path: the job
// row is untouched, attempt 1's audit row says STALE and attempt 2's is
// still open.
func TestLateSuccessRefusedWhileNextRunIsRunning(t *testing.T) {
	t.Parallel()
	paths := map[string]func(st *store.Store, late jobq.Completion, other jobq.ClaimedJob) (bool, error){
		"batched alone": func(st *store.Store, late jobq.Completion, _ jobq.ClaimedJob) (bool, error) {
			applied, err := st.JobCompleteMany(context.Background(), []jobq.Completion{late})
			if err != nil {
				return false, err
			}
			return applied[0], nil
		},
		"batched with a live run": func(st *store.Store, late jobq.Completion, other jobq.ClaimedJob) (bool, error) {
			applied, err := st.JobCompleteMany(context.Background(), []jobq.Completion{
				{Fence: other.Fence(), Outcome: jobq.OutcomeSuccess}, late,
			})
			if err != nil {
				return false, err
			}
			if !applied[0] {
				return false, errors.New("the live run's success in the same batch was refused")
			}
			return applied[1], nil
		},
		"transactional": func(st *store.Store, late jobq.Completion, _ jobq.ClaimedJob) (bool, error) {
			return st.JobCompleteTx(context.Background(), late, func(context.Context, jobq.Tx) error {
				return errors.New("fn called for a stale run")
			})
		},
	}
	for name, complete := range paths {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := testdb.Store(t)
			a, _ := reclaimedElsewhere(t, st, "late")
			submitJob(t, st, "other", "t", 3)
			other := claimOne(t, st, "a", 30*time.Second)
			before := jobRow(t, st, a.ID)

			applied, err := complete(st, jobq.Completion{Fence: a.Fence(), Outcome: jobq.OutcomeSuccess}, other)
			if err != nil || applied {
				t.Fatalf("late success of attempt 1: applied=%v err=%v; want refused", applied, err)
			}
			if got, want := rowDigest(jobRow(t, st, a.ID)), rowDigest(before); got != want {
				t.Fatalf("job row after the late success:\n got %s\nwant %s", got, want)
			}
			if got, want := execSummary(t, st, a.ID), "1:a:STALE 2:b:- "; got != want {
				t.Fatalf("executions = %q, want %q", got, want)
			}
		})
	}
}

// One batch of successes across attempt numbers (the batched path sends one
// fenced update per attempt and writes no execution row for a success): a
// first attempt and a second (after a rescue) both apply, each job's
// executions end with its own attempt's SUCCESS, read from the job row —
// job_execution has no row for it (the row-by-row fallback writes one) and
// the job_attempt view shows it.
// A stale first attempt of a third job, batched with a live first attempt,
// is refused and leaves its row as it was.
func TestBatchedSuccessAcrossAttempts(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	ctx := context.Background()
	_, x := reclaimedElsewhere(t, st, "second-attempt")
	z, _ := reclaimedElsewhere(t, st, "stale-first")
	submitJob(t, st, "first-attempt", "t", 3)
	y := claimOne(t, st, "a", 30*time.Second)
	submitJob(t, st, "live-first", "t", 3)
	w := claimOne(t, st, "a", 30*time.Second)
	if y.Attempt != 1 || x.Attempt != 2 || w.Attempt != 1 {
		t.Fatalf("attempts %d, %d, %d; want 1, 2, 1", y.Attempt, x.Attempt, w.Attempt)
	}

	applied, err := st.JobCompleteMany(ctx, []jobq.Completion{
		{Fence: y.Fence(), Outcome: jobq.OutcomeSuccess},
		{Fence: x.Fence(), Outcome: jobq.OutcomeSuccess},
	})
	if err != nil || fmt.Sprint(applied) != "[true true]" {
		t.Fatalf("JobCompleteMany(attempt 1, attempt 2) = %v, %v; want [true true]", applied, err)
	}
	for _, c := range []struct {
		id      uint64
		attempt int
		execs   string
	}{
		{y.ID, 1, "1:a:SUCCESS "},
		{x.ID, 2, "1:a:LEASE_EXPIRED 2:b:SUCCESS "},
	} {
		if j := jobRow(t, st, c.id); j.Status != jobq.StateSuccess || j.Attempt != c.attempt {
			t.Errorf("job %d: status %s attempt %d, want SUCCESS at attempt %d", c.id, j.Status, j.Attempt, c.attempt)
		}
		if got := execSummary(t, st, c.id); got != c.execs {
			t.Errorf("job %d: executions %q, want %q", c.id, got, c.execs)
		}
		ex, err := st.JobExecutions(ctx, c.id)
		if err != nil || len(ex) == 0 || ex[len(ex)-1].FinishedAt == nil {
			t.Fatalf("job %d: executions %+v, %v", c.id, ex, err)
		}
		// The batched path writes no execution row for a success (the job
		// row is its record); the row-by-row fallback writes one.
		var rows int
		if err := st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM job_execution WHERE job_id = ? AND attempt = ?`,
			c.id, c.attempt).Scan(&rows); err != nil || rows != 0 {
			t.Errorf("job %d attempt %d: %d execution rows (%v), want 0: written row by row, not by the batch", c.id, c.attempt, rows, err)
		}
		var viewed string
		if err := st.DB().QueryRowContext(ctx, `SELECT CONCAT(owner, ':', outcome, ':', finished_at IS NOT NULL) FROM job_attempt WHERE job_id = ? AND attempt = ?`,
			c.id, c.attempt).Scan(&viewed); err != nil || viewed != ex[len(ex)-1].Owner+":SUCCESS:1" {
			t.Errorf("job %d attempt %d in job_attempt: %q, %v; want %q", c.id, c.attempt, viewed, err, ex[len(ex)-1].Owner+":SUCCESS:1")
		}
	}

	zBefore := jobRow(t, st, z.ID)
	applied, err = st.JobCompleteMany(ctx, []jobq.Completion{
		{Fence: w.Fence(), Outcome: jobq.OutcomeSuccess},
		{Fence: z.Fence(), Outcome: jobq.OutcomeSuccess},
	})
	if err != nil || fmt.Sprint(applied) != "[true false]" {
		t.Fatalf("JobCompleteMany(live attempt 1, stale attempt 1) = %v, %v; want [true false]", applied, err)
	}
	if j := jobRow(t, st, w.ID); j.Status != jobq.StateSuccess || execSummary(t, st, w.ID) != "1:a:SUCCESS " {
		t.Errorf("live job %d: status %s, executions %q; want SUCCESS, \"1:a:SUCCESS \"", w.ID, j.Status, execSummary(t, st, w.ID))
	}
	if got, want := rowDigest(jobRow(t, st, z.ID)), rowDigest(zBefore); got != want {
		t.Errorf("stale job's row:\n got %s\nwant %s", got, want)
	}
	if got, want := execSummary(t, st, z.ID), "1:a:STALE 2:b:- "; got != want {
		t.Errorf("stale job's executions = %q, want %q", got, want)
	}
}

// A job with max_retry 1 survives one rescue and fails at the second:
// WAITING with retry_times 1, then FAILED with retry_times still 1 (the
// second rescue spends no retry it does not grant).
func TestRescueGrantsMaxRetryThenFails(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	id := submitJob(t, st, "poison", "t", 1)
	var got []string
	for range 2 {
		c := claimOne(t, st, "a", 30*time.Second)
		expireLease(t, st, id)
		rescue(t, st, c.Fence())
		j := jobRow(t, st, id)
		got = append(got, fmt.Sprintf("%s retry_times=%d", j.Status, j.RetryTimes))
	}
	if want := "[WAITING retry_times=1 FAILED retry_times=1]"; fmt.Sprint(got) != want {
		t.Fatalf("after two rescues: %v, want %s", got, want)
	}
	if got, want := execSummary(t, st, id), "1:a:LEASE_EXPIRED 2:a:LEASE_EXPIRED "; got != want {
		t.Fatalf("executions = %q, want %q", got, want)
	}
}

// outcomeAgrees is the documented mapping between a terminal job's status
// and its last execution's outcome (chaos checker status_vs_last_execution):
// SUCCESS ⇐ SUCCESS; FAILED ⇐ FAILED or LEASE_EXPIRED; CANCELED ⇐ anything
// but SUCCESS (CANCELED when the run itself ended it).
func outcomeAgrees(status jobq.JobState, last jobq.Outcome) bool {
	switch status {
	case jobq.StateSuccess:
		return last == jobq.OutcomeSuccess
	case jobq.StateFailed:
		return last == jobq.OutcomeFailed || last == jobq.OutcomeLeaseExpired
	case jobq.StateCanceled:
		return last != jobq.OutcomeSuccess && last != ""
	}
	return true
}

// completionPaths are the ways a run's outcome reaches the store.
var completionPaths = map[string]func(st *store.Store, c jobq.ClaimedJob) (bool, error){
	"batched success": func(st *store.Store, c jobq.ClaimedJob) (bool, error) {
		applied, err := st.JobCompleteMany(context.Background(), []jobq.Completion{{Fence: c.Fence(), Outcome: jobq.OutcomeSuccess}})
		if err != nil {
			return false, err
		}
		return applied[0], nil
	},
	"transactional success": func(st *store.Store, c jobq.ClaimedJob) (bool, error) {
		return st.JobCompleteTx(context.Background(), jobq.Completion{Fence: c.Fence(), Outcome: jobq.OutcomeSuccess},
			func(context.Context, jobq.Tx) error { return nil })
	},
	"failure with retry": func(st *store.Store, c jobq.ClaimedJob) (bool, error) {
		applied, err := st.JobCompleteMany(context.Background(), []jobq.Completion{
			{Fence: c.Fence(), Outcome: jobq.OutcomeFailed, Error: "boom", Retry: true, Backoff: time.Hour}})
		if err != nil {
			return false, err
		}
		return applied[0], nil
	},
	"release": func(st *store.Store, c jobq.ClaimedJob) (bool, error) {
		applied, err := st.JobCompleteMany(context.Background(), []jobq.Completion{{Fence: c.Fence(), Outcome: jobq.OutcomeReleased}})
		if err != nil {
			return false, err
		}
		return applied[0], nil
	},
}

// A cancel requested while the run is RUNNING, before its outcome is
// written (the handler returned before a heartbeat saw the request), ends
// the job CANCELED — and its execution row says CANCELED too, on every
// completion path.
func TestCancelBeforeCompletionRecordsCanceled(t *testing.T) {
	t.Parallel()
	for name, complete := range completionPaths {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := testdb.Store(t)
			id := submitJob(t, st, "c1", "sleep", 3)
			c := claimOne(t, st, "a", 30*time.Second)
			if j, err := st.JobCancel(context.Background(), id); err != nil || j.Status != jobq.StateRunning || !j.CancelRequested {
				t.Fatalf("cancel: %+v, %v; want RUNNING with cancel_requested", j, err)
			}
			applied, err := complete(st, c)
			if err != nil || !applied {
				t.Fatalf("completion: applied=%v err=%v", applied, err)
			}
			if j := jobRow(t, st, id); j.Status != jobq.StateCanceled {
				t.Fatalf("job status %s, want CANCELED", j.Status)
			}
			if got, want := execSummary(t, st, id), "1:a:CANCELED "; got != want {
				t.Fatalf("executions = %q, want %q", got, want)
			}
			// A retry of the same completion (its acknowledgement lost) is
			// recognised as already applied, not as stale.
			if applied, err := complete(st, c); err != nil || !applied {
				t.Fatalf("repeated completion: applied=%v err=%v; want applied (its own commit)", applied, err)
			}
			if got, want := execSummary(t, st, id), "1:a:CANCELED "; got != want {
				t.Fatalf("executions after the repeat = %q, want %q", got, want)
			}
		})
	}
}

// 100 races of a cancel request against the run's completion, over every
// completion path: whichever wins, the job's final status and its last
// execution's outcome agree.
func TestCancelRaceJobAndAuditAgree(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	ctx := context.Background()
	names := []string{"batched success", "transactional success", "failure with retry", "release"}
	for i := range 100 {
		name := names[i%len(names)]
		id := submitJob(t, st, fmt.Sprintf("race-%d", i), "sleep", 0)
		c := claimOne(t, st, "a", 30*time.Second)
		start := make(chan struct{})
		errs := make(chan error, 2)
		go func() {
			<-start
			_, err := st.JobCancel(ctx, id)
			errs <- err
		}()
		go func() {
			<-start
			_, err := completionPaths[name](st, c)
			errs <- err
		}()
		close(start)
		for range 2 {
			// ErrInvalidState: the cancel came after the job ended.
			if err := <-errs; err != nil && !errors.Is(err, jobq.ErrInvalidState) {
				t.Fatalf("trial %d (%s): %v", i, name, err)
			}
		}
		j := jobRow(t, st, id)
		ex, err := st.JobExecutions(ctx, id)
		if err != nil || len(ex) != 1 {
			t.Fatalf("trial %d: executions %v, err %v", i, ex, err)
		}
		if !j.Terminal() || !outcomeAgrees(j.Status, ex[0].Outcome) {
			t.Fatalf("trial %d (%s): job %s but its execution says %q", i, name, j.Status, ex[0].Outcome)
		}
	}
}

// The cas claim's attempt guard: a candidate read at attempt 0 does not
// claim the job once it was claimed and handed back (WAITING again at
// attempt 1) meanwhile — the classic ABA race, closed in the store whatever
// state the job went through.
func TestCASClaimRefusesStaleCandidate(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	ctx := context.Background()
	id := submitJob(t, st, "aba", "t", 3)
	stale, err := st.JobScanAvailable(ctx, 10)
	if err != nil || len(stale) != 1 || stale[0] != (jobq.Fence{ID: id, Attempt: 0}) {
		t.Fatalf("scan = %v, %v; want the job at attempt 0", stale, err)
	}
	c := claimOne(t, st, "a", 30*time.Second)
	if applied, err := st.JobCompleteMany(ctx, []jobq.Completion{{Fence: c.Fence(), Outcome: jobq.OutcomeReleased}}); err != nil || !applied[0] {
		t.Fatalf("release: %v %v", applied, err)
	}
	before := jobRow(t, st, id)
	claimed, lost, err := st.JobClaimCAS(ctx, jobq.ClaimCASParams{
		ClaimParams: jobq.ClaimParams{Owner: "b", Limit: 1, Lease: 30 * time.Second}, Candidates: stale})
	if err != nil || len(claimed) != 0 || lost != 1 {
		t.Fatalf("cas claim with the stale candidate: %d claimed, %d lost, err %v; want 0 and 1", len(claimed), lost, err)
	}
	if got, want := rowDigest(jobRow(t, st, id)), rowDigest(before); got != want {
		t.Fatalf("job row after the stale cas:\n got %s\nwant %s", got, want)
	}
}

// A rescuer that read a run as expired does not take it back when the run
// renewed its lease before the rescue's update: the update is conditioned
// on the lease, not only on status and attempt.
func TestRescueSkipsLeaseRenewedAfterTheRead(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	ctx := context.Background()
	submitJob(t, st, "renewed", "t", 3)
	c := claimOne(t, st, "a", 30*time.Second)
	expireLease(t, st, c.ID)
	cands, err := st.JobRescueCandidates(ctx, 10)
	if err != nil || len(cands) != 1 || cands[0] != c.Fence() {
		t.Fatalf("rescue candidates = %v, %v; want %v", cands, err, c.Fence())
	}
	if n, err := st.LeaseRenewMany(ctx, jobq.LeaseRenewParams{Owner: "a", Lease: 30 * time.Second, IDs: []uint64{c.ID}}); err != nil || len(n) != 1 {
		t.Fatalf("renew: %v, %v", n, err)
	}
	before := jobRow(t, st, c.ID)
	if ok, err := st.JobRescueExpired(ctx, cands[0]); err != nil || ok {
		t.Fatalf("rescue of a renewed run: ok=%v err=%v; want nothing done", ok, err)
	}
	if got, want := rowDigest(jobRow(t, st, c.ID)), rowDigest(before); got != want {
		t.Fatalf("job row after the rescue:\n got %s\nwant %s", got, want)
	}
	if got, want := execSummary(t, st, c.ID), "1:a:- "; got != want {
		t.Fatalf("executions = %q, want %q", got, want)
	}
}

// A renewal never waits for a lock: a run whose row another transaction
// holds (here an open transaction that locked it, as the run's own outcome
// write or a slow peer's statement does between round trips) is left out,
// at once, and every other run is renewed. The held row is renewed once it
// is free.
func TestLeaseRenewSkipsHeldRowsWithoutWaiting(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	ctx := context.Background()
	submitJob(t, st, "held", "t", 0)
	submitJob(t, st, "free", "t", 0)
	held, free := claimOne(t, st, "a", 30*time.Second), claimOne(t, st, "a", 30*time.Second)

	tx, err := st.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT id FROM job_queue WHERE id = ? FOR UPDATE`, held.ID); err != nil {
		t.Fatal(err)
	}
	// The lock is held until the call returns: a call that waited for it
	// could only end with an error (lock wait timeout, or the hang bound).
	bound, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	ids, err := st.LeaseRenewMany(bound, jobq.LeaseRenewParams{Owner: "a", Lease: time.Hour, IDs: []uint64{held.ID, free.ID}})
	if err != nil || len(ids) != 1 || ids[0] != free.ID {
		t.Fatalf("renew with job %d held: %v, %v; want [%d] without waiting for the lock", held.ID, ids, err, free.ID)
	}
	if j := jobRow(t, st, free.ID); j.LeaseUntil == nil || time.Until(*j.LeaseUntil) < 30*time.Minute {
		t.Errorf("free run's lease_until %v; want renewed by an hour", j.LeaseUntil)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	ids, err = st.LeaseRenewMany(ctx, jobq.LeaseRenewParams{Owner: "a", Lease: time.Hour, IDs: []uint64{held.ID, free.ID}})
	if err != nil || len(ids) != 2 {
		t.Fatalf("renew once the row is free: %v, %v; want both", ids, err)
	}
}

// The heartbeat's session (READ COMMITTED, a short lock wait) never goes
// back to the pool when it is closed: a renewal that fails on it (here a
// cancelled context) drops the connection, and every pooled connection
// still has the server's defaults — a handler's transaction or a claim
// never inherits the heartbeat's settings.
func TestRenewSessionSettingsDoNotReachThePool(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	ctx := context.Background()
	const pool = 4
	st.DB().SetMaxOpenConns(pool)
	st.DB().SetMaxIdleConns(pool)
	submitJob(t, st, "r", "t", 0)
	c := claimOne(t, st, "a", time.Minute)
	renew := func(ctx context.Context) error {
		_, err := st.LeaseRenewMany(ctx, jobq.LeaseRenewParams{Owner: "a", Lease: time.Minute, IDs: []uint64{c.ID}})
		return err
	}
	if err := renew(ctx); err != nil { // opens the heartbeat's session
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := renew(cancelled); err == nil {
		t.Fatal("renew with a cancelled context succeeded; want an error (which closes the session)")
	}
	var want struct {
		iso  string
		wait int
	}
	if err := st.DB().QueryRowContext(ctx, "SELECT @@global.tx_isolation, @@global.innodb_lock_wait_timeout").Scan(&want.iso, &want.wait); err != nil {
		t.Fatal(err)
	}
	conns := make([]*sql.Conn, 0, pool)
	defer func() {
		for _, cn := range conns {
			_ = cn.Close()
		}
	}()
	for range pool { // every connection the pool can hand out, at once
		cn, err := st.DB().Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, cn)
		var iso string
		var wait int
		if err := cn.QueryRowContext(ctx, "SELECT @@session.tx_isolation, @@session.innodb_lock_wait_timeout").Scan(&iso, &wait); err != nil {
			t.Fatal(err)
		}
		if iso != want.iso || wait != want.wait {
			t.Fatalf("pooled connection %d: isolation %s, lock wait %d s; want the server's %s, %d s (the heartbeat's session leaked into the pool)",
				len(conns), iso, wait, want.iso, want.wait)
		}
	}
}

// A rescue never waits for a lock: an expired run whose row another
// transaction holds (its own outcome write, another replica's rescue, round
// trips long over a slow link) is skipped at once, and rescued by a later
// pass once the row is free.
func TestRescueSkipsHeldRowWithoutWaiting(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	ctx := context.Background()
	submitJob(t, st, "held", "t", 3)
	c := claimOne(t, st, "a", 30*time.Second)
	expireLease(t, st, c.ID)
	tx, err := st.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT id FROM job_queue WHERE id = ? FOR UPDATE`, c.ID); err != nil {
		t.Fatal(err)
	}
	// The lock is held until the call returns: a call that waited for it
	// could only end with an error (lock wait timeout, or the hang bound).
	bound, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if ok, err := st.JobRescueExpired(bound, c.Fence()); err != nil || ok {
		t.Fatalf("rescue of a held row: ok=%v err=%v; want skipped without waiting for the lock", ok, err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	rescue(t, st, c.Fence())
}

// lastFinished is when the last execution row of job id finished.
func lastFinished(t *testing.T, st *store.Store, id uint64) time.Time {
	t.Helper()
	ex, err := st.JobExecutions(context.Background(), id)
	if err != nil || len(ex) == 0 || ex[len(ex)-1].FinishedAt == nil {
		t.Fatalf("job %d: executions %+v, %v", id, ex, err)
	}
	return *ex[len(ex)-1].FinishedAt
}

// liveAndStaleBatch: z is a stale run of owner a (its job re-claimed by b),
// live three runs of a; batch completes all four with success, in the
// order live[0], z, live[1], live[2].
func liveAndStaleBatch(t *testing.T, st *store.Store) (z jobq.ClaimedJob, live []jobq.ClaimedJob, batch []jobq.Completion) {
	t.Helper()
	z, _ = reclaimedElsewhere(t, st, "stale")
	for i := range 3 {
		submitJob(t, st, fmt.Sprintf("live-%d", i), "t", 3)
		live = append(live, claimOne(t, st, "a", 30*time.Second))
	}
	for _, j := range []jobq.ClaimedJob{live[0], z, live[1], live[2]} {
		batch = append(batch, jobq.Completion{Fence: j.Fence(), Outcome: jobq.OutcomeSuccess})
	}
	return z, live, batch
}

// A stale success in a completion batch costs its own row-by-row write,
// not one per completion: the batch is written again split by a read of
// the fence states, the live successes still by one update and one
// execution insert (one finished_at), the stale one row by row (its STALE
// mark); a fence sent twice is written once and answered applied twice. It
// fails when the stale batch is written row by row throughout.
func TestStaleSuccessSplitsTheBatch(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	ctx := context.Background()
	z, live, batch := liveAndStaleBatch(t, st)
	zBefore := jobRow(t, st, z.ID)
	batch = append(batch, batch[3]) // a repeated fence: applied once, answered applied twice
	applied, err := st.JobCompleteMany(ctx, batch)
	if err != nil || fmt.Sprint(applied) != "[true false true true true]" {
		t.Fatalf("JobCompleteMany(live, stale, live, live, the last again) = %v, %v; want [true false true true true]", applied, err)
	}
	first := lastFinished(t, st, live[0].ID)
	for _, j := range live {
		if r := jobRow(t, st, j.ID); r.Status != jobq.StateSuccess || execSummary(t, st, j.ID) != "1:a:SUCCESS " {
			t.Errorf("live job %d: status %s, executions %q; want SUCCESS, \"1:a:SUCCESS \"", j.ID, r.Status, execSummary(t, st, j.ID))
		}
		if f := lastFinished(t, st, j.ID); !f.Equal(first) {
			t.Errorf("live job %d finished at %v, job %d at %v: written row by row, want the split batch's one insert", j.ID, f, live[0].ID, first)
		}
	}
	if got, want := rowDigest(jobRow(t, st, z.ID)), rowDigest(zBefore); got != want {
		t.Errorf("stale job's row:\n got %s\nwant %s", got, want)
	}
	if got, want := execSummary(t, st, z.ID), "1:a:STALE 2:b:- "; got != want {
		t.Errorf("stale job's executions = %q, want %q", got, want)
	}
}

// A run that turns stale between the split's fence-state read and its
// batched write (rescued in that window) makes the batched write match
// fewer rows: the split is rolled back and tried again, which settles it.
// When every try is overtaken (here: a rescue at each of the three), the
// batch is written row by row. Either way every completion gets its exact
// answer. Not parallel: the hook runs inside the store.
func TestRunTurningStaleDuringTheSplit(t *testing.T) {
	for _, c := range []struct {
		name     string
		rescues  int // runs rescued, one per split try
		splits   int
		want     string
		statuses string // live[0..2] after the batch
	}{
		{"one rescue: the second split settles it", 1, 2, "[false false true true]", "WAITING SUCCESS SUCCESS"},
		{"a rescue at every split: row by row", 3, 3, "[false false false false]", "WAITING WAITING WAITING"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := testdb.Store(t)
			ctx := context.Background()
			z, live, batch := liveAndStaleBatch(t, st)
			// live[0] (then live[2], live[1]) is rescued at a split's turn:
			// the order puts a just-rescued run ahead of live ones.
			order := []jobq.ClaimedJob{live[0], live[2], live[1]}
			splits := 0
			store.SetBeforeSplitWrite(st, func() {
				if splits < c.rescues {
					expireLease(t, st, order[splits].ID)
					rescue(t, st, order[splits].Fence())
				}
				splits++
			})
			applied, err := st.JobCompleteMany(ctx, batch)
			if err != nil || fmt.Sprint(applied) != c.want {
				t.Fatalf("JobCompleteMany(live, stale, live, live) with %d rescues during the splits = %v, %v; want %s", c.rescues, applied, err, c.want)
			}
			if splits != c.splits {
				t.Errorf("the split ran %d times, want %d: a batch overtaken by a rescue during its split is split again, up to 3 times, before row by row", splits, c.splits)
			}
			var statuses []string
			for k, j := range live {
				r := jobRow(t, st, j.ID)
				statuses = append(statuses, string(r.Status))
				want := "1:a:SUCCESS "
				if k == 0 || c.rescues == 3 { // rescued: refused, the rescue's row marked STALE
					want = "1:a:STALE "
				}
				if got := execSummary(t, st, j.ID); got != want {
					t.Errorf("job %d: executions %q, want %q", j.ID, got, want)
				}
			}
			if got := strings.Join(statuses, " "); got != c.statuses {
				t.Errorf("live jobs' statuses %q, want %q", got, c.statuses)
			}
			if got, want := execSummary(t, st, z.ID), "1:a:STALE 2:b:- "; got != want {
				t.Errorf("stale job's executions = %q, want %q", got, want)
			}
		})
	}
}
