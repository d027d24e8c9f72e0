package bench

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

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
			db, err := OpenIndexCountingDB(dsn, 4, &c)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			st, err := store.OpenDB(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
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
