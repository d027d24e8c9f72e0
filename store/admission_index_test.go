package store_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/store"
)

// checkKeys checks every concurrency key: its admitted count equals its
// jobs admitted now (WAITING, SCHEDULED, RUNNING, HELD or BLOCKED: not
// PARKED, not terminal), never above its limit, and no job is left PARKED
// while the key has a slot free.
func checkKeys(t *testing.T, st *store.Store) {
	t.Helper()
	rows, err := st.DB().QueryContext(context.Background(), `SELECT k.ckey, k.max_running, k.admitted,
		(SELECT COUNT(*) FROM job_queue q WHERE q.concurrency_key = k.ckey
		  AND q.status NOT IN ('PARKED', 'SUCCESS', 'FAILED', 'CANCELED')),
		(SELECT COUNT(*) FROM job_queue q WHERE q.concurrency_key = k.ckey AND q.status = 'PARKED')
		FROM concurrency_key k ORDER BY k.ckey`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		var limit, admitted, live, parked int
		if err := rows.Scan(&key, &limit, &admitted, &live, &parked); err != nil {
			t.Fatal(err)
		}
		if admitted != live || live > limit || (parked > 0 && live < limit) {
			t.Errorf("key %s: limit %d, admitted %d, jobs admitted %d, parked %d", key, limit, admitted, live, parked)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// The counts by type and status, and the listings by status and by type and
// status, equal the table's own counts with every non-terminal status mixed
// in: PARKED (keyed, some due later), SCHEDULED (admitted keyed ones too),
// HELD, BLOCKED, RUNNING, and a type whose only jobs are PARKED but one.
func TestStatusCountsWithEveryStatusMixed(t *testing.T) {
	bothDialects(t, statusCountsWithEveryStatusMixed)
}

func statusCountsWithEveryStatusMixed(t *testing.T, st *store.Store) {
	ctx := context.Background()
	later := time.Now().Add(time.Hour)
	submit := func(key, typ, ckey string, limit int, runAt *time.Time) uint64 {
		t.Helper()
		j, _, err := st.JobSubmit(ctx, jobq.SubmitParams{JobKey: key, JobType: typ, Params: "{}", RequestHash: key,
			ConcurrencyKey: ckey, ConcurrencyLimit: limit, RunAt: runAt})
		if err != nil {
			t.Fatal(err)
		}
		return j.ID
	}
	for i := range 4 {
		submit(fmt.Sprintf("a-k1-%d", i), "a", "k1", 2, nil) // 2 WAITING, 2 PARKED
	}
	submit("a-k2-later-0", "a", "k2", 1, &later) // SCHEDULED, admitted
	submit("a-k2-later-1", "a", "k2", 1, &later) // PARKED
	submit("a-plain-later", "a", "", 0, &later)  // SCHEDULED
	held := submit("a-held", "a", "", 0, nil)
	blocked := submit("a-blocked", "a", "", 0, nil)
	failed := submit("a-failed", "a", "", 0, nil)
	submit("b-k3-0", "b", "k3", 1, nil) // claimed below: RUNNING
	for i := 1; i < 4; i++ {
		submit(fmt.Sprintf("b-k3-%d", i), "b", "k3", 1, nil) // PARKED
	}
	c, err := st.JobClaimSkipLocked(ctx, jobq.ClaimParams{Owner: "o", Limit: 1, Lease: time.Minute})
	if err != nil || len(c) != 1 {
		t.Fatalf("claim: %v %v", c, err)
	}
	for _, q := range []string{
		fmt.Sprintf("UPDATE job_queue SET status = 'HELD' WHERE id = %d", held),
		fmt.Sprintf("UPDATE job_queue SET status = 'BLOCKED', blocked_parents = 1 WHERE id = %d", blocked),
		fmt.Sprintf("UPDATE job_queue SET status = 'FAILED', finished_at = NOW(6) WHERE id = %d", failed),
	} {
		if _, err := st.DB().ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// The table's own counts.
	rows, err := st.DB().QueryContext(ctx, "SELECT job_type, status, COUNT(*) FROM job_queue GROUP BY job_type, status ORDER BY job_type, status")
	if err != nil {
		t.Fatal(err)
	}
	var want []jobq.TypeStatusCount
	byStatus := map[string]int64{}
	for rows.Next() {
		var c jobq.TypeStatusCount
		if err := rows.Scan(&c.JobType, &c.Status, &c.Count); err != nil {
			t.Fatal(err)
		}
		want = append(want, c)
		byStatus[string(c.Status)] += c.Count
	}
	rows.Close()
	qs, err := st.QueueStats(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(qs.ByTypeStatus) != fmt.Sprint(want) {
		t.Errorf("by type and status\n got %v\nwant %v", qs.ByTypeStatus, want)
	}
	if fmt.Sprint(qs.ByStatus) != fmt.Sprint(byStatus) {
		t.Errorf("by status %v, want %v", qs.ByStatus, byStatus)
	}
	for _, w := range want {
		for _, typ := range []string{w.JobType, ""} {
			n := w.Count
			if typ == "" {
				n = byStatus[string(w.Status)]
			}
			var got []string
			before := uint64(0)
			for {
				jobs, next, err := st.JobList(ctx, jobq.ListParams{Status: w.Status, JobType: typ, Limit: 2, BeforeID: before})
				if err != nil {
					t.Fatal(err)
				}
				for _, j := range jobs {
					if j.Status != w.Status || (typ != "" && j.JobType != typ) {
						t.Errorf("list %s of type %q: job %s is %s of type %s", w.Status, typ, j.JobKey, j.Status, j.JobType)
					}
					got = append(got, j.JobKey)
				}
				if next == 0 || len(jobs) == 0 {
					break
				}
				before = next
			}
			if int64(len(got)) != n {
				t.Errorf("list %s of type %q: %d jobs %v, want %d", w.Status, typ, len(got), got, n)
			}
		}
	}
	checkKeys(t, st)
}

// A type limited to 2 running jobs whose jobs carry concurrency keys (two
// keys of limit 1, three jobs each): the limited claim never runs more than
// 2, never a PARKED job, and every completion admits the key's next job,
// until all six ran.
func TestLimitedTypeWithKeyedJobs(t *testing.T) { bothDialects(t, limitedTypeWithKeyedJobs) }

func limitedTypeWithKeyedJobs(t *testing.T, st *store.Store) {
	ctx := context.Background()
	if _, err := st.TypeSetLimit(ctx, "lim", 2); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		for _, k := range []string{"x", "y"} {
			key := fmt.Sprintf("%s-%d", k, i)
			if _, _, err := st.JobSubmit(ctx, jobq.SubmitParams{JobKey: key, JobType: "lim", Params: "{}", RequestHash: key, ConcurrencyKey: k}); err != nil {
				t.Fatal(err)
			}
		}
	}
	done := map[string]bool{}
	for round := 0; len(done) < 6; round++ {
		if round > 10 {
			t.Fatalf("after %d rounds %d jobs done: %v", round, len(done), done)
		}
		claimed, err := st.JobClaimLimited(ctx, "lim", jobq.ClaimParams{Owner: "o", Limit: 10, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(claimed) != 2 {
			t.Fatalf("round %d: claimed %d jobs, want 2 (one per key, the type's limit)", round, len(claimed))
		}
		keys := map[string]bool{}
		var comps []jobq.Completion
		for _, c := range claimed {
			k := c.JobKey[:1]
			if keys[k] {
				t.Fatalf("round %d: two jobs of key %s claimed at once", round, k)
			}
			keys[k] = true
			done[c.JobKey] = true
			comps = append(comps, jobq.Completion{Fence: c.Fence(), Outcome: jobq.OutcomeSuccess, ConcurrencyKey: k})
		}
		if again, err := st.JobClaimLimited(ctx, "lim", jobq.ClaimParams{Owner: "o", Limit: 10, Lease: time.Minute}); err != nil || len(again) != 0 {
			t.Fatalf("round %d: a claim at the limit took %d jobs (%v)", round, len(again), err)
		}
		checkKeys(t, st)
		if _, err := st.JobCompleteMany(ctx, comps); err != nil {
			t.Fatal(err)
		}
		checkKeys(t, st)
	}
}

// A cancel of a PARKED job holds its row while a completion of the key's
// running job picks, under the key's lock and FOR UPDATE, that very job as
// the key's next: the pick waits for the row, and once the cancel commits
// it must pick the key's following parked job (or take the exact path), not
// read "none" and leave that job parked with the slot free.
func TestKeyedCompletionPickWaitsForACanceledPick(t *testing.T) {
	for _, next := range []int{1, 0} {
		t.Run(fmt.Sprintf("parked after it %d", next), func(t *testing.T) {
			t.Parallel()
			st := testdb.Store(t)
			testdb.ServerWide(t, st, "jobq_test_innodb_trx_watch")
			ctx := context.Background()
			var ids []uint64
			for i := range 2 + next {
				k := fmt.Sprintf("j%d", i)
				j, _, err := st.JobSubmit(ctx, jobq.SubmitParams{JobKey: k, JobType: "noop", Params: "{}", RequestHash: k, ConcurrencyKey: "dev"})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, j.ID)
			}
			claimed, err := st.JobClaimSkipLocked(ctx, jobq.ClaimParams{Owner: "a", Limit: 5, Lease: time.Minute})
			if err != nil || len(claimed) != 1 {
				t.Fatalf("claim: %v %v, want j0", claimed, err)
			}
			// The cancel of j1, written as the store writes one (its key
			// locked, then its row, ended; a PARKED job frees no slot), held open.
			peer := openPeer(t, st,
				"SELECT admitted FROM concurrency_key WHERE ckey = 'dev' FOR UPDATE",
				fmt.Sprintf("SELECT status, concurrency_key FROM job_queue FORCE INDEX (PRIMARY) WHERE id = %d FOR UPDATE", ids[1]),
				fmt.Sprintf(`UPDATE job_queue SET status = 'CANCELED', cancel_requested = 1, finished_at = NOW(6), update_time = NOW(6)
					WHERE id = %d AND status = 'PARKED'`, ids[1]),
			)
			done := make(chan error, 1)
			go func() {
				_, err := st.JobCompleteMany(ctx, []jobq.Completion{{Fence: claimed[0].Fence(), Outcome: jobq.OutcomeSuccess, ConcurrencyKey: "dev"}})
				done <- err
			}()
			commitWhenKeyWaited(t, st, peer, done)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if j, _ := st.JobGet(ctx, ids[1]); j.Status != jobq.StateCanceled {
				t.Errorf("j1 is %s, want CANCELED", j.Status)
			}
			if next == 1 {
				if j, _ := st.JobGet(ctx, ids[2]); j.Status != jobq.StateWaiting {
					t.Errorf("j2 is %s, want WAITING: admitted in j0's slot", j.Status)
				}
			}
			checkKeys(t, st)
		})
	}
}

// Cancels of PARKED and of admitted jobs race completions of the same keys
// and of others (batches ending runs of several keys, in either order of
// the batch): nothing fails (a deadlock is retried inside the store), and
// every key's admitted count equals its admitted jobs afterwards.
func TestKeyedCancelsRaceCompletions(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	ctx := context.Background()
	keys := []string{"k1", "k2", "k3"}
	var all []uint64
	for i := range 24 {
		for _, k := range keys {
			key := fmt.Sprintf("%s-%d", k, i)
			j, _, err := st.JobSubmit(ctx, jobq.SubmitParams{JobKey: key, JobType: "noop", Params: "{}", RequestHash: key, ConcurrencyKey: k, ConcurrencyLimit: 2})
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, j.ID)
		}
	}
	for round := 0; round < 16; round++ {
		claimed, err := st.JobClaimSkipLocked(ctx, jobq.ClaimParams{Owner: "o", Limit: 100, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(claimed) == 0 {
			break
		}
		sort.Slice(claimed, func(i, j int) bool { return claimed[i].ID < claimed[j].ID })
		var comps []jobq.Completion
		for _, c := range claimed {
			comps = append(comps, jobq.Completion{Fence: c.Fence(), Outcome: jobq.OutcomeSuccess, ConcurrencyKey: c.JobKey[:2]})
		}
		// Two batches, each ending runs of every key, in opposite orders.
		half := len(comps) / 2
		a := comps[:half]
		b := append([]jobq.Completion(nil), comps[half:]...)
		for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
			b[i], b[j] = b[j], b[i]
		}
		// A cancel of a PARKED or WAITING job of each key.
		var cancels []uint64
		for _, id := range all {
			if j, _ := st.JobGet(ctx, id); j.Status == jobq.StateParked || j.Status == jobq.StateWaiting {
				cancels = append(cancels, id)
				if len(cancels) == 3 {
					break
				}
			}
		}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		start := make(chan struct{})
		for _, batch := range [][]jobq.Completion{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if _, err := st.JobCompleteMany(ctx, batch); err != nil {
					errs <- fmt.Errorf("complete: %w", err)
				}
			}()
		}
		for _, id := range cancels {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if _, err := st.JobCancel(ctx, id); err != nil {
					errs <- fmt.Errorf("cancel %d: %w", id, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		checkKeys(t, st)
		if t.Failed() {
			return
		}
	}
}

// Migration 021 down and up again with PARKED, WAITING, RUNNING jobs
// present: the jobs keep their statuses, the stats and listings tell them
// apart, and the key's admission still works after up.
func TestMigrate021DownUpWithParkedJobs(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	ctx := context.Background()
	for i := range 3 {
		k := fmt.Sprintf("m%d", i)
		if _, _, err := st.JobSubmit(ctx, jobq.SubmitParams{JobKey: k, JobType: "noop", Params: "{}", RequestHash: k, ConcurrencyKey: "dev"}); err != nil {
			t.Fatal(err)
		}
	}
	claimed, err := st.JobClaimSkipLocked(ctx, jobq.ClaimParams{Owner: "o", Limit: 5, Lease: time.Minute})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	if down, err := st.MigrateDown(ctx, 1); err != nil || fmt.Sprint(down) != "[21]" {
		t.Fatalf("down: %v %v, want [21]", down, err)
	}
	// Between down and up, a replica of this version fails every reader
	// of idx_lease and idx_type_status (index_status is gone): like 020,
	// the replicas are stopped before migrating down past 021.
	if _, err := st.JobRescueCandidates(ctx, 10); err == nil {
		t.Log("rescue candidates read without index_status")
	} else {
		t.Logf("after down 021: rescue candidates: %v", err)
	}
	if up, err := st.MigrateUp(ctx); err != nil || fmt.Sprint(up) != "[21]" {
		t.Fatalf("up: %v %v, want [21]", up, err)
	}
	qs, err := st.QueueStats(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if qs.ByStatus["PARKED"] != 2 || qs.ByStatus["RUNNING"] != 1 || qs.ByStatus["WAITING"] != 0 {
		t.Errorf("by status %v, want PARKED 2, RUNNING 1", qs.ByStatus)
	}
	if jobs, _, err := st.JobList(ctx, jobq.ListParams{Status: jobq.StateParked, JobType: "noop", Limit: 10}); err != nil || len(jobs) != 2 {
		t.Errorf("list PARKED: %d jobs (%v), want 2", len(jobs), err)
	}
	if _, err := st.JobCompleteMany(ctx, []jobq.Completion{{Fence: claimed[0].Fence(), Outcome: jobq.OutcomeSuccess, ConcurrencyKey: "dev"}}); err != nil {
		t.Fatal(err)
	}
	if next, err := st.JobClaimSkipLocked(ctx, jobq.ClaimParams{Owner: "o", Limit: 5, Lease: time.Minute}); err != nil || len(next) != 1 || next[0].JobKey != "m1" {
		t.Fatalf("claim after up: %v %v, want m1", next, err)
	}
	if got, err := st.JobRescueCandidates(ctx, 10); err != nil || len(got) != 0 {
		t.Errorf("rescue candidates %v %v, want none (lease live)", got, err)
	}
	checkKeys(t, st)
}

// A type rate-limited per rate key (1 start an hour each) whose jobs also
// carry concurrency keys (limit 2): the claim starts one job per rate key,
// holds the rest of each rate key's admitted jobs (HELD keeps the slot),
// never claims a PARKED one, and the stats and listings count the HELD and
// PARKED jobs apart.
func TestRatePerKeyTypeWithConcurrencyKeys(t *testing.T) {
	bothDialects(t, ratePerKeyTypeWithConcurrencyKeys)
}

func ratePerKeyTypeWithConcurrencyKeys(t *testing.T, st *store.Store) {
	ctx := context.Background()
	if _, err := st.TypeSetRateLimit(ctx, "rl", jobq.RateLimit{Starts: 1, Period: time.Hour, PerKey: true}); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		for _, k := range []string{"x", "y"} {
			key := fmt.Sprintf("%s-%d", k, i)
			if _, _, err := st.JobSubmit(ctx, jobq.SubmitParams{JobKey: key, JobType: "rl", Params: "{}", RequestHash: key,
				ConcurrencyKey: "c" + k, ConcurrencyLimit: 2, RateKey: "r" + k}); err != nil {
				t.Fatal(err)
			}
		}
	}
	claimed, err := st.JobClaimLimited(ctx, "rl", jobq.ClaimParams{Owner: "o", Limit: 10, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 2 || claimed[0].JobKey[:1] == claimed[1].JobKey[:1] {
		t.Fatalf("claimed %v, want one job of each rate key", claimed)
	}
	if again, err := st.JobClaimLimited(ctx, "rl", jobq.ClaimParams{Owner: "o", Limit: 10, Lease: time.Minute}); err != nil || len(again) != 0 {
		t.Fatalf("a second claim in the window took %v (%v)", again, err)
	}
	checkKeys(t, st)
	qs, err := st.QueueStats(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := st.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM job_queue WHERE status = 'PARKED'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if qs.ByStatus["RUNNING"] != 2 || qs.ByStatus["PARKED"] != n || n != 4 || qs.ByStatus["HELD"]+qs.ByStatus["WAITING"] != 2 {
		t.Errorf("by status %v (PARKED in the table: %d), want RUNNING 2, PARKED 4, HELD+WAITING 2", qs.ByStatus, n)
	}
	for _, s := range []jobq.JobState{jobq.StateHeld, jobq.StateParked, jobq.StateWaiting, jobq.StateRunning} {
		jobs, _, err := st.JobList(ctx, jobq.ListParams{Status: s, JobType: "rl", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(jobs)) != qs.ByStatus[string(s)] {
			t.Errorf("list %s: %d jobs, stats say %d", s, len(jobs), qs.ByStatus[string(s)])
		}
	}
	var comps []jobq.Completion
	for _, c := range claimed {
		comps = append(comps, jobq.Completion{Fence: c.Fence(), Outcome: jobq.OutcomeSuccess, ConcurrencyKey: "c" + c.JobKey[:1]})
	}
	if _, err := st.JobCompleteMany(ctx, comps); err != nil {
		t.Fatal(err)
	}
	checkKeys(t, st)
}

// A completion of a key's running job reads the key's next parked job with
// a locking read of idx_key_parked (keyLockNext) under the key's lock: it
// locks the entry, then the row. A cancel of that PARKED job ends it
// (JobCancelWaiting), which writes the entry; had it locked the row first
// (JobLockState) without the key, the two would deadlock (1213, which
// JobCancel returns to its caller). So the cancel locks the key first, as
// written here: the completion waits for the key, and both succeed.
func TestCancelOfAParkedJobWhileACompletionPicksIt(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	testdb.ServerWide(t, st, "jobq_test_innodb_trx_watch")
	ctx := context.Background()
	var ids []uint64
	for i := range 3 {
		k := fmt.Sprintf("j%d", i)
		j, _, err := st.JobSubmit(ctx, jobq.SubmitParams{JobKey: k, JobType: "noop", Params: "{}", RequestHash: k, ConcurrencyKey: "dev"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	claimed, err := st.JobClaimSkipLocked(ctx, jobq.ClaimParams{Owner: "a", Limit: 5, Lease: time.Minute})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v, want j0", claimed, err)
	}
	// The cancel of j1, its first statements run and held open.
	peer := openPeer(t, st,
		"SELECT admitted FROM concurrency_key WHERE ckey = 'dev' FOR UPDATE",
		fmt.Sprintf("SELECT status, concurrency_key FROM job_queue FORCE INDEX (PRIMARY) WHERE id = %d FOR UPDATE", ids[1]))
	done := make(chan error, 1)
	go func() {
		_, err := st.JobCompleteMany(ctx, []jobq.Completion{{Fence: claimed[0].Fence(), Outcome: jobq.OutcomeSuccess, ConcurrencyKey: "dev"}})
		done <- err
	}()
	// Once the completion waits for j1's row (a statement of its running
	// for 50 ms: in its locking read of the keys, or in the admission's
	// update when that read takes no lock), the cancel goes on: its
	// update, then its commit.
	for deadline := time.Now().Add(20 * time.Second); ; {
		var n int
		if err := st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
			WHERE DB = DATABASE() AND ID <> CONNECTION_ID() AND INFO IS NOT NULL AND TIME_MS > 50`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the completion returned (%v) while the cancel held j1's row", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Log("the completion was not seen waiting; the cancel goes on anyway")
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	_, cancelErr := peer.ExecContext(ctx, fmt.Sprintf(`UPDATE job_queue FORCE INDEX (PRIMARY)
		SET status = 'CANCELED', cancel_requested = 1, finished_at = NOW(6), update_time = NOW(6)
		WHERE id = %d AND status IN ('WAITING', 'SCHEDULED', 'BLOCKED', 'PARKED', 'HELD')`, ids[1]))
	if cancelErr == nil {
		cancelErr = peer.Commit()
	}
	completeErr := <-done
	if cancelErr != nil || completeErr != nil {
		t.Fatalf("cancel of the parked job: %v; completion: %v; want both to succeed", cancelErr, completeErr)
	}
	if j, _ := st.JobGet(ctx, ids[1]); j.Status != jobq.StateCanceled {
		t.Errorf("j1 is %s, want CANCELED", j.Status)
	}
	if j, _ := st.JobGet(ctx, ids[2]); j.Status != jobq.StateWaiting {
		t.Errorf("j2 is %s, want WAITING: admitted in j0's slot", j.Status)
	}
	checkKeys(t, st)
}
