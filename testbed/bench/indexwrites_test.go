package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/store"
)

// TestIndexWritesPerJob drains a sample of jobs through the store's own
// claim and batched completion (both claim strategies) and counts the
// index entries each statement changes per job (IndexWriteCounter). It
// prints the table (go test -v) and pins which indexes each drain
// statement writes, so a schema or query change that adds one shows here.
func TestIndexWritesPerJob(t *testing.T) {
	const n = 100
	// Indexes each statement changes for every job of a plain success
	// (no workflow, concurrency key or rate key). idx_scan indexes
	// scan_status (migration 018), NULL outside WAITING, and idx_due
	// due_status (migration 019), NULL outside SCHEDULED: the claim
	// (WAITING → RUNNING) leaves idx_due alone and the completion
	// (RUNNING → SUCCESS) both.
	claim := []string{"job_queue.idx_lease", "job_queue.idx_scan", "job_queue.idx_type_status"}
	want := map[string][]string{
		"JobClaimMany":               claim,
		"JobClaimCAS":                claim,
		"JobCompleteFencedMany":      {"job_queue.idx_lease", "job_queue.idx_type_status"},
		"ExecutionRecordSuccessMany": {"job_execution.PRIMARY", "job_execution.uk_job_attempt"},
	}
	for _, strategy := range []string{"skiplocked", "cas"} {
		t.Run(strategy, func(t *testing.T) {
			ctx := context.Background()
			dsn := testdb.DSN(t)
			admin, err := store.Open(ctx, dsn, store.PoolConfig{MaxOpen: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer admin.Close()
			env := &Env{Admin: admin.DB()}
			prefix, err := env.Seed(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			rows, err := admin.DB().QueryContext(ctx, "SELECT id FROM job_queue WHERE job_key LIKE ? ORDER BY id", prefix+"%")
			if err != nil {
				t.Fatal(err)
			}
			ids, err := scanIDs(rows)
			if err != nil || len(ids) != n {
				t.Fatalf("seeded %d jobs, %v; want %d", len(ids), err, n)
			}
			var c IndexWriteCounter
			st := indexCountingStore(t, dsn, &c)
			c.SetSample(ids)
			var jobs []jobq.ClaimedJob
			switch strategy {
			case "skiplocked":
				jobs, err = st.JobClaimSkipLocked(ctx, claimParams(n))
			case "cas":
				var cands []jobq.Fence
				if cands, err = st.JobScanAvailable(ctx, n); err == nil {
					jobs, _, err = st.JobClaimCAS(ctx, jobq.ClaimCASParams{ClaimParams: claimParams(n), Candidates: cands})
				}
			}
			if err != nil || len(jobs) != n {
				t.Fatalf("claimed %d, %v; want %d", len(jobs), err, n)
			}
			comps := make([]jobq.Completion, len(jobs))
			for i, j := range jobs {
				comps[i] = jobq.Completion{Fence: j.Fence(), Outcome: jobq.OutcomeSuccess}
			}
			if applied, err := st.JobCompleteMany(ctx, comps); err != nil || slices.Contains(applied, false) {
				t.Fatalf("complete: %v (applied %v)", err, applied)
			}
			stats := c.Stats()
			var b strings.Builder
			WriteIndexWriteTable(&b, stats)
			t.Logf("index entries changed per job, %d jobs, %s claim:\n%s", n, strategy, b.String())
			for _, s := range stats {
				w, ok := want[s.Stmt]
				if !ok {
					if s.PerJob != 0 {
						t.Errorf("%s: %.2f index entries per job, want none", s.Stmt, s.PerJob)
					}
					continue
				}
				got := slices.Sorted(maps.Keys(s.Indexes))
				if !slices.Equal(got, w) {
					t.Errorf("%s changes %v, want %v", s.Stmt, got, w)
				}
				for ix, v := range s.Indexes {
					if v != 1 {
						t.Errorf("%s: %s %.2f entries per job, want 1", s.Stmt, ix, v)
					}
				}
			}
		})
	}
}

// TestIndexWritesPerKeyedJob counts the index entries a keyed job's start
// changes when its key's slot is freed by the batched completion of the
// job before it (limit 1): admitted to WAITING there and claimed after
// (no hand-off), or handed to the completing replica in the completion's
// transaction (jobq.WithKeyHandoff). It prints both tables (go test -v)
// and pins that the hand-off writes one entry each of idx_key_parked,
// idx_lease, idx_type_status and idx_scan (whose key carries the attempt:
// the entry stays in the NULL scan_status range), fewer entries than
// admission and claim together (9: idx_due and idx_scan move twice).
func TestIndexWritesPerKeyedJob(t *testing.T) {
	const n = 50
	total := map[bool]float64{}
	for _, handoff := range []bool{false, true} {
		ctx := context.Background()
		dsn := testdb.DSN(t)
		var c IndexWriteCounter
		st := indexCountingStore(t, dsn, &c)
		var next []uint64 // each key's second job: the sample
		for i := range n {
			for j := range 2 {
				k := fmt.Sprintf("h%v-%d-%d", handoff, i, j)
				job, _, err := st.JobSubmit(ctx, jobq.SubmitParams{JobKey: k, JobType: "noop", Params: "{}", RequestHash: k,
					ConcurrencyKey: fmt.Sprintf("key-%v-%d", handoff, i)})
				if err != nil {
					t.Fatal(err)
				}
				if j == 1 {
					next = append(next, job.ID)
				}
			}
		}
		first, err := st.JobClaimSkipLocked(ctx, claimParams(n))
		if err != nil || len(first) != n {
			t.Fatalf("claimed %d, %v; want %d", len(first), err, n)
		}
		c.SetSample(next)
		comps := make([]jobq.Completion, n)
		for i, j := range first {
			comps[i] = jobq.Completion{Fence: j.Fence(), Outcome: jobq.OutcomeSuccess, ConcurrencyKey: j.ConcurrencyKey}
		}
		h := &jobq.KeyHandoff{Owner: "gobench", Lease: 30 * time.Second, Limit: n}
		cctx := ctx
		if handoff {
			cctx = jobq.WithKeyHandoff(ctx, h)
		}
		if applied, err := st.JobCompleteMany(cctx, comps); err != nil || slices.Contains(applied, false) {
			t.Fatalf("complete: %v (applied %v)", err, applied)
		}
		if !handoff {
			if got, err := st.JobClaimSkipLocked(ctx, claimParams(n)); err != nil || len(got) != n {
				t.Fatalf("claimed %d, %v; want %d", len(got), err, n)
			}
		} else if len(h.Jobs) != n {
			t.Fatalf("handed off %d, want %d", len(h.Jobs), n)
		}
		stats := c.Stats()
		var b strings.Builder
		WriteIndexWriteTable(&b, stats)
		t.Logf("index entries changed per keyed job started after its key's previous job, %d keys, hand-off %v:\n%s", n, handoff, b.String())
		for _, s := range stats {
			total[handoff] += s.PerJob
			if s.Stmt == "JobHandoffMany" {
				want := []string{"job_queue.idx_key_parked", "job_queue.idx_lease", "job_queue.idx_scan", "job_queue.idx_type_status"}
				if got := slices.Sorted(maps.Keys(s.Indexes)); !slices.Equal(got, want) {
					t.Errorf("JobHandoffMany changes %v, want %v", got, want)
				}
			}
		}
	}
	t.Logf("index entries per keyed job: %.2f admitted and claimed, %.2f handed off", total[false], total[true])
	if total[true] >= total[false] {
		t.Errorf("the hand-off changes %.2f index entries per job, not fewer than admission and claim (%.2f)", total[true], total[false])
	}
}

// indexCountingStore opens a store on dsn whose statements c counts,
// closed at t's cleanup.
func indexCountingStore(t *testing.T, dsn string, c *IndexWriteCounter) *store.Store {
	t.Helper()
	db, err := OpenIndexCountingDB(dsn, 4, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st, err := store.OpenDB(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
