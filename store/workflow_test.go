package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/store"
)

func wfJob(key string, deps ...string) jobq.WorkflowJobParams {
	j := jobq.WorkflowJobParams{SubmitParams: jobq.SubmitParams{JobKey: key, JobType: "noop", Params: `{}`, RequestHash: "h-" + key, MaxRetry: 0}}
	for _, d := range deps {
		j.DependsOn = append(j.DependsOn, jobq.Dependency{JobKey: d, OnParentFailure: jobq.OnParentFailureCancel})
	}
	return j
}

// diamond is a → b, a → c, b → d, c → d, keys prefixed with p.
func diamond(p string) []jobq.WorkflowJobParams {
	return []jobq.WorkflowJobParams{wfJob(p + "a"), wfJob(p+"b", p+"a"), wfJob(p+"c", p+"a"), wfJob(p+"d", p+"b", p+"c")}
}

func statuses(t *testing.T, st *store.Store, wfID uint64) map[string]jobq.JobState {
	t.Helper()
	w, err := st.WorkflowGet(context.Background(), wfID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]jobq.JobState{}
	for _, j := range w.Jobs {
		out[j.JobKey] = j.Status
	}
	return out
}

// claimAll claims every WAITING job and returns them by key.
func claimAll(t *testing.T, st *store.Store) map[string]jobq.ClaimedJob {
	t.Helper()
	got, err := st.JobClaimSkipLocked(context.Background(), jobq.ClaimParams{Owner: "r1", Limit: 1000, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]jobq.ClaimedJob{}
	for _, c := range got {
		out[c.JobKey] = c
	}
	return out
}

func success(c jobq.ClaimedJob) jobq.Completion {
	return jobq.Completion{Fence: c.Fence(), Outcome: jobq.OutcomeSuccess, HasChildren: c.HasChildren, DueAt: c.RunAt}
}

// Children wait BLOCKED, outside the claim, and become WAITING in the
// transaction of their last parent's completion — exactly once when two
// parents complete at the same instant on two connections, on every path
// (batched, row by row with an output, transactional), and when the
// has-children hint is wrong (the batch's split puts it right).
func TestWorkflowUnblocksChildrenExactlyOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testdb.Store(t)
	paths := map[string]func(jobq.ClaimedJob) error{
		"batched": func(c jobq.ClaimedJob) error {
			ap, err := st.JobCompleteMany(ctx, []jobq.Completion{success(c)})
			if err == nil && !ap[0] {
				err = errors.New("not applied")
			}
			return err
		},
		"wrong-hint": func(c jobq.ClaimedJob) error {
			comp := success(c)
			comp.HasChildren = !comp.HasChildren
			ap, err := st.JobCompleteMany(ctx, []jobq.Completion{comp})
			if err == nil && !ap[0] {
				err = errors.New("not applied")
			}
			return err
		},
		"output": func(c jobq.ClaimedJob) error {
			comp := success(c)
			comp.Output = []byte(`{"k":"` + c.JobKey + `"}`)
			ap, err := st.JobCompleteMany(ctx, []jobq.Completion{comp})
			if err == nil && !ap[0] {
				err = errors.New("not applied")
			}
			return err
		},
		"tx": func(c jobq.ClaimedJob) error {
			ok, err := st.JobCompleteTx(ctx, success(c), func(context.Context, jobq.Tx) error { return nil })
			if err == nil && !ok {
				err = errors.New("not applied")
			}
			return err
		},
	}
	for name, complete := range paths {
		for round := 0; round < 5; round++ {
			p := fmt.Sprintf("%s%d-", name, round)
			wf, created, err := st.WorkflowSubmit(ctx, jobq.WorkflowSubmitParams{WorkflowKey: p, RequestHash: "h", Jobs: diamond(p)})
			if err != nil || !created {
				t.Fatalf("%s: submit: created=%v err=%v", p, created, err)
			}
			if got := statuses(t, st, wf.ID); got[p+"a"] != jobq.StateWaiting || got[p+"b"] != jobq.StateBlocked || got[p+"d"] != jobq.StateBlocked {
				t.Fatalf("%s: after submit %v", p, got)
			}
			c := claimAll(t, st)
			if len(c) != 1 || !c[p+"a"].HasChildren {
				t.Fatalf("%s: claimed %v, want only %sa with children", p, c, p)
			}
			if err := complete(c[p+"a"]); err != nil {
				t.Fatal(err)
			}
			c = claimAll(t, st)
			if len(c) != 2 {
				t.Fatalf("%s: claimed %d after a, want b and c", p, len(c))
			}
			var wg sync.WaitGroup
			errs := make(chan error, 2)
			for _, k := range []string{"b", "c"} {
				wg.Add(1)
				go func() { defer wg.Done(); errs <- complete(c[p+k]) }()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatalf("%s: %v", p, err)
				}
			}
			w, _ := st.WorkflowGet(ctx, wf.ID)
			d := w.Jobs[3]
			if d.Status != jobq.StateWaiting || d.BlockedParents != 0 {
				t.Fatalf("%s: d is %s with %d parents left, want WAITING with 0", p, d.Status, d.BlockedParents)
			}
			c = claimAll(t, st)
			if len(c) != 1 || c[p+"d"].ID == 0 {
				t.Fatalf("%s: claimed %v, want d", p, c)
			}
			if err := complete(c[p+"d"]); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A parent that fails for good cancels its descendants on 'cancel' edges;
// a 'run' edge lets its child run. Retrying the workflow re-arms the
// failed job and the descendants it cancelled.
func TestWorkflowFailurePolicyAndRetry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testdb.Store(t)
	jobs := []jobq.WorkflowJobParams{wfJob("a"), wfJob("b", "a"), wfJob("c", "b"), wfJob("cleanup", "a")}
	jobs[3].DependsOn[0].OnParentFailure = jobq.OnParentFailureRun
	wf, _, err := st.WorkflowSubmit(ctx, jobq.WorkflowSubmitParams{WorkflowKey: "w", RequestHash: "h", Jobs: jobs})
	if err != nil {
		t.Fatal(err)
	}
	c := claimAll(t, st)
	fail := jobq.Completion{Fence: c["a"].Fence(), Outcome: jobq.OutcomeFailed, Error: "boom", HasChildren: true}
	if _, err := st.JobCompleteMany(ctx, []jobq.Completion{fail}); err != nil {
		t.Fatal(err)
	}
	got := statuses(t, st, wf.ID)
	want := map[string]jobq.JobState{"a": jobq.StateFailed, "b": jobq.StateCanceled, "c": jobq.StateCanceled, "cleanup": jobq.StateWaiting}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("after a failed: %v, want %v", got, want)
		}
	}
	c = claimAll(t, st)
	if _, err := st.JobCompleteMany(ctx, []jobq.Completion{success(c["cleanup"])}); err != nil {
		t.Fatal(err)
	}
	_, n, err := st.WorkflowRetry(ctx, wf.ID)
	if err != nil || n != 3 {
		t.Fatalf("retry: re-armed %d, err %v; want 3", n, err)
	}
	got = statuses(t, st, wf.ID)
	want = map[string]jobq.JobState{"a": jobq.StateWaiting, "b": jobq.StateBlocked, "c": jobq.StateBlocked, "cleanup": jobq.StateSuccess}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("after retry: %v, want %v", got, want)
		}
	}
	for _, k := range []string{"a", "b", "c"} {
		c = claimAll(t, st)
		if len(c) != 1 {
			t.Fatalf("claiming %s: got %v", k, c)
		}
		if _, err := st.JobCompleteMany(ctx, []jobq.Completion{success(c[k])}); err != nil {
			t.Fatal(err)
		}
	}
	if got := statuses(t, st, wf.ID); got["c"] != jobq.StateSuccess {
		t.Fatalf("after the retry drained: %v", got)
	}
	// A parent whose cancel was requested while it ran ends CANCELED even
	// though its handler succeeded, on the batched path too: its children
	// are cancelled, not unblocked.
	wf3, _, err := st.WorkflowSubmit(ctx, jobq.WorkflowSubmitParams{WorkflowKey: "w3", RequestHash: "h", Jobs: diamond("y")})
	if err != nil {
		t.Fatal(err)
	}
	c = claimAll(t, st)
	if _, err := st.JobCancel(ctx, c["ya"].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.JobCompleteMany(ctx, []jobq.Completion{success(c["ya"])}); err != nil {
		t.Fatal(err)
	}
	for k, v := range statuses(t, st, wf3.ID) {
		if v != jobq.StateCanceled {
			t.Fatalf("after a cancel-requested parent succeeded, %s is %s", k, v)
		}
	}
	// Retention takes a purged job's edges with it.
	var edgesBefore int
	if err := st.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM job_dependency").Scan(&edgesBefore); err != nil || edgesBefore == 0 {
		t.Fatalf("edges before purge: %d %v", edgesBefore, err)
	}
	// The cleaner walks ids from the oldest and stops at the first job
	// created after the cutoff: age every job up to w3's, finish only w3's.
	if _, err := st.DB().ExecContext(ctx, "UPDATE job_queue SET create_time = NOW(6) - INTERVAL 2 DAY WHERE id <= (SELECT m FROM (SELECT MAX(id) AS m FROM job_queue WHERE workflow_id = ?) AS x)", wf3.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().ExecContext(ctx, "UPDATE job_queue SET finished_at = NOW(6) - INTERVAL 1 DAY WHERE workflow_id = ?", wf3.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.JobPurge(ctx, jobq.PurgeParams{OlderThan: time.Hour, Batch: 100}); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := st.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM job_dependency d JOIN job_queue q ON q.id = d.child_id WHERE q.workflow_id = ?", wf3.ID).Scan(&left); err != nil {
		t.Fatal(err)
	}
	var after int
	if err := st.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM job_dependency").Scan(&after); err != nil || after != edgesBefore-4 || left != 0 {
		t.Fatalf("edges after purging the diamond w3: %d of %d (want 4 fewer), %d left in w3; err %v", after, edgesBefore, left, err)
	}
	// Cancel: a workflow's waiting jobs end CANCELED at once.
	wf2, _, err := st.WorkflowSubmit(ctx, jobq.WorkflowSubmitParams{WorkflowKey: "w2", RequestHash: "h", Jobs: diamond("x")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.WorkflowCancel(ctx, wf2.ID); err != nil {
		t.Fatal(err)
	}
	for k, v := range statuses(t, st, wf2.ID) {
		if v != jobq.StateCanceled {
			t.Fatalf("after cancel %s is %s", k, v)
		}
	}
}

// A workflow submit is idempotent by workflow_key, all or nothing, and a
// spawn adds jobs with the spawning run's completion.
func TestWorkflowSubmitIdempotentAndSpawn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testdb.Store(t)
	p := jobq.WorkflowSubmitParams{WorkflowKey: "k", RequestHash: "h1", Jobs: diamond("k")}
	a, created, err := st.WorkflowSubmit(ctx, p)
	if err != nil || !created {
		t.Fatal(created, err)
	}
	b, created, err := st.WorkflowSubmit(ctx, p)
	if err != nil || created || b.ID != a.ID {
		t.Fatalf("resubmit: created=%v id %d/%d err %v", created, b.ID, a.ID, err)
	}
	p.RequestHash = "h2"
	if _, _, err := st.WorkflowSubmit(ctx, p); !errors.Is(err, jobq.ErrKeyConflict) {
		t.Fatalf("different body: %v, want ErrKeyConflict", err)
	}
	// A job key taken outside: nothing of the workflow is written.
	_, _, err = st.WorkflowSubmit(ctx, jobq.WorkflowSubmitParams{WorkflowKey: "k2", RequestHash: "h", Jobs: []jobq.WorkflowJobParams{wfJob("fresh"), wfJob("ka")}})
	var taken *jobq.WorkflowKeyTakenError
	if !errors.As(err, &taken) || taken.JobKey != "ka" {
		t.Fatalf("taken key: %v", err)
	}
	if _, err := st.JobGetByKey(ctx, "fresh"); !errors.Is(err, jobq.ErrNotFound) {
		t.Fatalf("a refused workflow left job 'fresh' behind: %v", err)
	}
	// Spawn: the map job adds m1, m2 and reduce (waiting for both).
	c := claimAll(t, st)
	comp := success(c["ka"])
	comp.Spawn = &jobq.Spawn{Jobs: []jobq.WorkflowJobParams{wfJob("m1"), wfJob("m2"), wfJob("reduce", "m1", "m2")}}
	if ap, err := st.JobCompleteMany(ctx, []jobq.Completion{comp}); err != nil || !ap[0] {
		t.Fatal(ap, err)
	}
	got := statuses(t, st, a.ID)
	if got["m1"] != jobq.StateWaiting || got["reduce"] != jobq.StateBlocked || got["kb"] != jobq.StateWaiting {
		t.Fatalf("after spawn: %v", got)
	}
	c = claimAll(t, st)
	var batch []jobq.Completion
	for _, k := range []string{"m1", "m2"} {
		batch = append(batch, success(c[k]))
	}
	if _, err := st.JobCompleteMany(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if got := statuses(t, st, a.ID); got["reduce"] != jobq.StateWaiting {
		t.Fatalf("reduce after both maps: %v", got)
	}
	parents, err := st.JobParents(ctx, []uint64{c["kb"].ID})
	if err != nil || len(parents[c["kb"].ID]) != 1 || parents[c["kb"].ID][0].JobKey != "ka" {
		t.Fatalf("parents of kb: %v %v", parents, err)
	}
}

// A manual retry (one job or in bulk) of a workflow job whose parents have
// not all succeeded puts it back BLOCKED, waiting for them, never WAITING.
func TestWorkflowManualRetryWaitsForParents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testdb.Store(t)
	wf, _, err := st.WorkflowSubmit(ctx, jobq.WorkflowSubmitParams{WorkflowKey: "mr", RequestHash: "h", Jobs: diamond("m")})
	if err != nil {
		t.Fatal(err)
	}
	c := claimAll(t, st)
	if _, err := st.JobCompleteMany(ctx, []jobq.Completion{{Fence: c["ma"].Fence(), Outcome: jobq.OutcomeFailed, Error: "x", HasChildren: true}}); err != nil {
		t.Fatal(err)
	}
	if n, err := st.JobRetryBulk(ctx, jobq.RetryBulkParams{Status: jobq.StateCanceled}); err != nil || n != 3 {
		t.Fatalf("bulk retry: %d %v, want 3", n, err)
	}
	got := statuses(t, st, wf.ID)
	if got["ma"] != jobq.StateFailed || got["mb"] != jobq.StateBlocked || got["mc"] != jobq.StateBlocked || got["md"] != jobq.StateBlocked {
		t.Fatalf("after bulk retry of the cancelled: %v", got)
	}
	if _, err := st.JobRetry(ctx, c["ma"].ID); err != nil {
		t.Fatal(err)
	}
	c = claimAll(t, st)
	if len(c) != 1 {
		t.Fatalf("claimable after retrying the parent: %v, want only ma", c)
	}
	if _, err := st.JobCompleteMany(ctx, []jobq.Completion{success(c["ma"])}); err != nil {
		t.Fatal(err)
	}
	if got := statuses(t, st, wf.ID); got["mb"] != jobq.StateWaiting || got["md"] != jobq.StateBlocked {
		t.Fatalf("after the parent succeeded: %v", got)
	}
}

// blockedParents returns job key's status and unfinished-parent counter in
// workflow wfID.
func blockedParents(t *testing.T, st *store.Store, wfID uint64, key string) (jobq.JobState, int) {
	t.Helper()
	w, err := st.WorkflowGet(context.Background(), wfID)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range w.Jobs {
		if j.JobKey == key {
			return j.Status, j.BlockedParents
		}
	}
	t.Fatalf("workflow %d has no job %s", wfID, key)
	return "", 0
}

// A child is unblocked in its parent's completion transaction, not beside
// it: when that transaction rolls back (here the handler's WorkTx fails, so
// the caller records a failed attempt instead), the child is still BLOCKED
// waiting for its parent; the completion that commits then unblocks it.
func TestWorkflowChildUnblockedInTheCompletionTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testdb.Store(t)
	wf, _, err := st.WorkflowSubmit(ctx, jobq.WorkflowSubmitParams{WorkflowKey: "txu", RequestHash: "h", Jobs: []jobq.WorkflowJobParams{wfJob("pa"), wfJob("pb", "pa")}})
	if err != nil {
		t.Fatal(err)
	}
	c := claimAll(t, st)
	errWork := errors.New("work tx failed")
	if ok, err := st.JobCompleteTx(ctx, success(c["pa"]), func(context.Context, jobq.Tx) error { return errWork }); ok || !errors.Is(err, errWork) {
		t.Fatalf("transactional completion whose WorkTx fails: applied=%v err=%v; want not applied, the WorkTx error", ok, err)
	}
	if state, n := blockedParents(t, st, wf.ID, "pb"); state != jobq.StateBlocked || n != 1 {
		t.Fatalf("child unblocked by a completion that rolled back: pb is %s with %d parents left, want BLOCKED with 1 (pa %s)",
			state, n, jobRow(t, st, c["pa"].ID).Status)
	}
	if ok, err := st.JobCompleteTx(ctx, success(c["pa"]), func(context.Context, jobq.Tx) error { return nil }); !ok || err != nil {
		t.Fatalf("transactional completion: applied=%v err=%v", ok, err)
	}
	if state, n := blockedParents(t, st, wf.ID, "pb"); state != jobq.StateWaiting || n != 0 {
		t.Fatalf("after its parent's completion committed: pb is %s with %d parents left, want WAITING with 0", state, n)
	}
}

// A completion sent again after its acknowledgement was lost is applied
// once, its children's counters included: on every path (batched, row by
// row with an output, transactional) the repeat of one parent's success
// leaves a child of two parents BLOCKED, waiting for the other.
func TestWorkflowRetriedCompletionSettlesChildrenOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testdb.Store(t)
	paths := map[string]func(jobq.Completion) (bool, error){
		"batched": func(c jobq.Completion) (bool, error) {
			ap, err := st.JobCompleteMany(ctx, []jobq.Completion{c})
			return err == nil && ap[0], err
		},
		"output": func(c jobq.Completion) (bool, error) {
			c.Output = []byte(`{"ok":true}`)
			ap, err := st.JobCompleteMany(ctx, []jobq.Completion{c})
			return err == nil && ap[0], err
		},
		"tx": func(c jobq.Completion) (bool, error) {
			return st.JobCompleteTx(ctx, c, func(context.Context, jobq.Tx) error { return nil })
		},
	}
	for name, complete := range paths {
		p := name + "-"
		wf, _, err := st.WorkflowSubmit(ctx, jobq.WorkflowSubmitParams{WorkflowKey: p, RequestHash: "h", Jobs: diamond(p)})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := complete(success(claimAll(t, st)[p+"a"])); !ok || err != nil {
			t.Fatalf("%s: complete a: %v %v", p, ok, err)
		}
		c := claimAll(t, st)
		for try := 1; try <= 2; try++ { // the second is the retry of a lost acknowledgement
			if ok, err := complete(success(c[p+"b"])); !ok || err != nil {
				t.Fatalf("%s: complete b (try %d): applied=%v err=%v; want applied", p, try, ok, err)
			}
		}
		if state, n := blockedParents(t, st, wf.ID, p+"d"); state != jobq.StateBlocked || n != 1 {
			t.Fatalf("%s: a retried completion settled its children again: d is %s with %d parents left after b's success was sent twice, want BLOCKED with 1 (c still running)", p, state, n)
		}
		if ok, err := complete(success(c[p+"c"])); !ok || err != nil {
			t.Fatalf("%s: complete c: %v %v", p, ok, err)
		}
		if state, n := blockedParents(t, st, wf.ID, p+"d"); state != jobq.StateWaiting || n != 0 {
			t.Fatalf("%s: after both parents: d is %s with %d parents left, want WAITING with 0", p, state, n)
		}
		if ok, err := complete(success(claimAll(t, st)[p+"d"])); !ok || err != nil {
			t.Fatalf("%s: complete d: %v %v", p, ok, err)
		}
	}
}

// A success with a spawn applies its spawn once: a repeat of the same
// completion (a retry after a lost acknowledgement, a replayed task token)
// writes nothing; it is applied when its spawn is the first one and refused
// when it differs.
func TestSpawnRepeatWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testdb.Store(t)
	wf, _, err := st.WorkflowSubmit(ctx, jobq.WorkflowSubmitParams{WorkflowKey: "sr", RequestHash: "h",
		Jobs: []jobq.WorkflowJobParams{wfJob("sra"), wfJob("srb", "sra")}})
	if err != nil {
		t.Fatal(err)
	}
	c := claimAll(t, st)
	first := success(c["sra"])
	first.Spawn = &jobq.Spawn{Jobs: []jobq.WorkflowJobParams{wfJob("srx")}}
	if ap, err := st.JobCompleteMany(ctx, []jobq.Completion{first}); err != nil || !ap[0] {
		t.Fatalf("first: %v %v", ap, err)
	}
	want := map[string]jobq.JobState{"sra": jobq.StateSuccess, "srb": jobq.StateWaiting, "srx": jobq.StateWaiting}
	check := func(step string) {
		t.Helper()
		got := statuses(t, st, wf.ID)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: jobs %v, want %v", step, got, want)
		}
	}
	check("first")
	// The identical retry: applied, nothing written.
	if ap, err := st.JobCompleteMany(ctx, []jobq.Completion{first}); err != nil || !ap[0] {
		t.Fatalf("identical retry: applied=%v err=%v, want applied", ap, err)
	}
	check("identical retry")
	for name, jobs := range map[string][]jobq.WorkflowJobParams{
		"other job":   {wfJob("sry")},
		"one more":    {wfJob("srx"), wfJob("sry")},
		"other hash":  {{SubmitParams: jobq.SubmitParams{JobKey: "srx", JobType: "noop", Params: `{}`, RequestHash: "other"}}},
		"other type":  {{SubmitParams: jobq.SubmitParams{JobKey: "srx", JobType: "sleep", Params: `{}`, RequestHash: "h-srx"}}},
		"empty spawn": {},
	} {
		again := first
		again.Spawn = &jobq.Spawn{Jobs: jobs}
		if ap, err := st.JobCompleteMany(ctx, []jobq.Completion{again}); err != nil || ap[0] {
			t.Fatalf("%s: applied=%v err=%v, want refused", name, ap, err)
		}
		check(name)
		out, err := st.ExecutionOutcome(ctx, first.Fence)
		if err != nil || !out.Own() {
			t.Fatalf("%s: the attempt's outcome after a refused repeat: %+v %v", name, out, err)
		}
	}
	if _, err := st.JobGetByKey(ctx, "sry"); !errors.Is(err, jobq.ErrNotFound) {
		t.Fatalf("a refused repeat wrote job sry: %v", err)
	}
}

// JobCompleteMany with an unblock limit in its context refuses, writing
// nothing, a batch whose parents would unblock more children between them
// than the limit, and names each parent's width; within the limit (or for one parent, however wide) it
// writes the batch and decrements each child by its parents in the batch
// (a child of both parents by 2, once).
func TestJobCompleteManyUnblockLimit(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	ctx := context.Background()
	wf, _, err := st.WorkflowSubmit(ctx, jobq.WorkflowSubmitParams{WorkflowKey: "limited", RequestHash: "h", Jobs: []jobq.WorkflowJobParams{
		wfJob("l-a"), wfJob("l-b"), wfJob("l-x"),
		wfJob("l-c1", "l-a"), wfJob("l-c2", "l-a"), wfJob("l-c3", "l-a", "l-b"), wfJob("l-c4", "l-b"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	claimed := claimAll(t, st)
	a, b, x := claimed["l-a"], claimed["l-b"], claimed["l-x"]
	batch := []jobq.Completion{success(a), success(x), success(b)}
	_, err = st.JobCompleteMany(jobq.WithUnblockLimit(ctx, 4), batch)
	var wide *jobq.UnblockTooWideError
	if !errors.As(err, &wide) || len(wide.Widths) != 2 || wide.Widths[a.ID] != 3 || wide.Widths[b.ID] != 2 {
		t.Fatalf("limit 4: err %v, want an UnblockTooWideError with widths a: 3, b: 2", err)
	}
	want := map[string]jobq.JobState{"l-a": jobq.StateRunning, "l-b": jobq.StateRunning, "l-x": jobq.StateRunning,
		"l-c1": jobq.StateBlocked, "l-c2": jobq.StateBlocked, "l-c3": jobq.StateBlocked, "l-c4": jobq.StateBlocked}
	if got := statuses(t, st, wf.ID); !maps.Equal(got, want) {
		t.Fatalf("after the refused batch: %v, want nothing written: %v", got, want)
	}
	applied, err := st.JobCompleteMany(jobq.WithUnblockLimit(ctx, 5), batch)
	if err != nil || !slices.Equal(applied, []bool{true, true, true}) {
		t.Fatalf("limit 5: %v, %v; want [true true true]", applied, err)
	}
	for k := range want {
		want[k] = jobq.StateWaiting
	}
	want["l-a"], want["l-b"], want["l-x"] = jobq.StateSuccess, jobq.StateSuccess, jobq.StateSuccess
	if got := statuses(t, st, wf.ID); !maps.Equal(got, want) {
		t.Fatalf("after the batch: %v, want %v", got, want)
	}
	// One parent wider than the limit is written, all its children with it.
	wf2, _, err := st.WorkflowSubmit(ctx, jobq.WorkflowSubmitParams{WorkflowKey: "limited-one", RequestHash: "h", Jobs: []jobq.WorkflowJobParams{
		wfJob("m-a"), wfJob("m-c1", "m-a"), wfJob("m-c2", "m-a"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	claimed = claimAll(t, st)
	if applied, err := st.JobCompleteMany(jobq.WithUnblockLimit(ctx, 1), []jobq.Completion{success(claimed["m-a"])}); err != nil || !applied[0] {
		t.Fatalf("one wide parent: %v, %v; want it written", applied, err)
	}
	if got := statuses(t, st, wf2.ID); got["m-c1"] != jobq.StateWaiting || got["m-c2"] != jobq.StateWaiting {
		t.Fatalf("one wide parent's children: %v, want WAITING", got)
	}
}

// WorkflowGet carries each SUCCESS job's output (its successful attempt's),
// as JobGet does, and none for jobs that have not succeeded.
func TestWorkflowGetCarriesOutputs(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	ctx := context.Background()
	wf, _, err := st.WorkflowSubmit(ctx, jobq.WorkflowSubmitParams{WorkflowKey: "outs", RequestHash: "h", Jobs: diamond("o-")})
	if err != nil {
		t.Fatal(err)
	}
	a := claimAll(t, st)["o-a"]
	c := success(a)
	c.Output = json.RawMessage(`{"image":"app:1"}`)
	if ok, err := st.JobCompleteMany(ctx, []jobq.Completion{c}); err != nil || !ok[0] {
		t.Fatalf("complete: %v %v", ok, err)
	}
	got, err := st.WorkflowGet(ctx, wf.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range got.Jobs {
		want := ""
		if j.JobKey == "o-a" {
			want = `{"image":"app:1"}`
		}
		if string(j.Output) != want {
			t.Errorf("%s (%s): output %q, want %q", j.JobKey, j.Status, j.Output, want)
		}
	}
}
