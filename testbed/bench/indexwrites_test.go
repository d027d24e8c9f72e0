package bench

import (
	"context"
	"fmt"
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
	// (RUNNING → SUCCESS) both. idx_type_status keys type_status
	// (migration 021), where RUNNING reads WAITING: the claim leaves it
	// alone, the completion moves it.
	claim := []string{"job_queue.idx_lease", "job_queue.idx_scan"}
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
			st, c := countingStore(t, dsn, admin, n, "SELECT id FROM job_queue WHERE job_key LIKE ? ORDER BY id", prefix+"%")
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

// TestIndexWritesPerKeyedJob counts the index entries of a keyed job that
// waits PARKED behind its key's running job: n keys of limit 1, two jobs
// each; the sample is the second jobs. The first jobs' batched completion
// (JobCompleteAdmitMany) admits them — PARKED → WAITING moves idx_scan and
// idx_key_parked and idx_type_status (idx_lease keys index_status, where
// PARKED reads WAITING: migration 021) — and their own claim and
// completion then move what a plain job's do: 3 + 2 + 2 = 7 entries per
// keyed job, where a plain one costs 4.
func TestIndexWritesPerKeyedJob(t *testing.T) {
	const n = 50
	ctx := context.Background()
	dsn := testdb.DSN(t)
	admin, err := store.Open(ctx, dsn, store.PoolConfig{MaxOpen: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ps := make([]jobq.SubmitParams, 2*n)
	for i := range ps {
		ps[i] = jobq.SubmitParams{JobKey: fmt.Sprintf("keyed-%d", i), JobType: "noop", Params: "{}", RequestHash: "h",
			ConcurrencyKey: fmt.Sprintf("k-%03d", i%n), ConcurrencyLimit: 1}
	}
	if _, err := admin.JobSubmitMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	st, c := countingStore(t, dsn, admin, n, "SELECT id FROM job_queue WHERE status = 'PARKED' ORDER BY id")
	for round := range 2 {
		jobs, err := st.JobClaimSkipLocked(ctx, claimParams(2*n))
		if err != nil || len(jobs) != n {
			t.Fatalf("round %d: claimed %d, %v; want %d (one per key)", round, len(jobs), err, n)
		}
		comps := make([]jobq.Completion, len(jobs))
		for i, j := range jobs {
			comps[i] = jobq.Completion{Fence: j.Fence(), Outcome: jobq.OutcomeSuccess}
		}
		if applied, err := st.JobCompleteMany(ctx, comps); err != nil || slices.Contains(applied, false) {
			t.Fatalf("round %d: complete: %v (applied %v)", round, err, applied)
		}
	}
	stats := c.Stats()
	var b strings.Builder
	WriteIndexWriteTable(&b, stats)
	t.Logf("index entries changed per keyed job, %d parked jobs:\n%s", n, b.String())
	// Per index, over the statements that wrote it: the admission
	// (idx_scan, idx_key_parked, idx_type_status — JobAdmit, or
	// JobCompleteAdmitMany when the completion and the admission share one
	// update), the claim (idx_scan, idx_lease) and the completion
	// (idx_lease, idx_type_status).
	want := map[string]float64{"job_queue.idx_scan": 2, "job_queue.idx_key_parked": 1, "job_queue.idx_lease": 2, "job_queue.idx_type_status": 2}
	got := map[string]float64{}
	var total float64
	for _, s := range stats {
		total += s.PerJob
		for ix, v := range s.Indexes {
			got[ix] += v
		}
		if s.Stmt == "JobAdmit" {
			if ix := slices.Sorted(maps.Keys(s.Indexes)); !slices.Equal(ix, []string{"job_queue.idx_key_parked", "job_queue.idx_scan", "job_queue.idx_type_status"}) {
				t.Errorf("the admission changes %v, want idx_key_parked, idx_scan and idx_type_status only", ix)
			}
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("index entries per keyed job %v, want %v", got, want)
	}
	if total != 7 {
		t.Errorf("%.2f index entries per keyed job, want 7", total)
	}
}

// countingStore opens a store on dsn whose writes count index entries for
// the sample: the want jobs that sampleQuery (run on admin) returns.
func countingStore(t *testing.T, dsn string, admin *store.Store, want int, sampleQuery string, args ...any) (*store.Store, *IndexWriteCounter) {
	t.Helper()
	rows, err := admin.DB().Query(sampleQuery, args...)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := scanIDs(rows)
	if err != nil || len(ids) != want {
		t.Fatalf("sample of %d jobs, %v; want %d", len(ids), err, want)
	}
	c := &IndexWriteCounter{}
	db, err := OpenIndexCountingDB(dsn, 4, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st, err := store.OpenDB(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	c.SetSample(ids)
	return st, c
}
