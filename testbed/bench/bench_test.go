package bench

import (
	"context"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/store"
)

// newTestHarness builds a harness on a fresh test database (testdb drops it).
func newTestHarness(t *testing.T, o Options) *Harness {
	t.Helper()
	dsn := testdb.DSN(t)
	st, err := store.Open(context.Background(), dsn, store.PoolConfig{MaxOpen: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	o.Logger = quietLogger()
	if o.Out == "" {
		o.Out = t.TempDir() // the CPU profile goes here, not into the source tree
	}
	return &Harness{opts: o.WithDefaults(), env: &Env{DSN: dsn, Admin: st.DB(), Server: st.Server}}
}

func TestRatio(t *testing.T) {
	for _, c := range []struct{ x, base, want float64 }{
		{800, 1000, 0.8}, {5000, 1000, 5}, {0, 1000, 0}, {100, 0, 0}, {100, -1, 0},
	} {
		if got := Ratio(c.x, c.base); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("Ratio(%v, %v) = %v, want %v", c.x, c.base, got, c.want)
		}
	}
	if got := perJob(-1, 10); got != -1 {
		t.Errorf("perJob(-1) = %v, want -1 (not observable)", got)
	}
	if got := perJob(50, 0); got != 0 {
		t.Errorf("perJob(50, 0) = %v, want 0", got)
	}
	if got := rate(300, 2*time.Second); got != 150 {
		t.Errorf("rate = %v, want 150", got)
	}
}

func pt(group, strat string, rows, batch, workers int, thr float64) Point {
	return Point{PointSpec: PointSpec{Group: group, Strategy: strat, TableRows: rows,
		ReplicaConfig: ReplicaConfig{Replicas: 3, BatchLimit: batch, Workers: workers}}, Throughput: thr}
}

func TestApplyRatiosUsesSameTableAndBatch(t *testing.T) {
	res := &Result{Points: []Point{
		pt("headline", StrategyCeiling, 0, 50, 50, 1000),
		pt("batch", StrategyCeiling, 0, 200, 200, 2000),
		pt("headline", StrategyClassic, 0, 200, 50, 150),
		pt("headline", StrategySkip, 0, 200, 50, 900), // claims ≤ 50: vs ceiling 50
		pt("batch", StrategySkip, 0, 200, 200, 1000),  // claims ≤ 200: vs ceiling 200
		pt("headline", StrategyCeiling, 1000000, 50, 50, 500),
		pt("headline", StrategyClassic, 1000000, 200, 50, 100),
		pt("headline", StrategySkip, 1000000, 200, 50, 450),
	}}
	ApplyRatios(res)
	want := map[int][2]float64{3: {0.9, 6}, 4: {0.5, 1000.0 / 150}, 7: {0.9, 4.5}}
	for i, w := range want {
		p := res.Points[i]
		if math.Abs(p.VsCeiling-w[0]) > 1e-9 || math.Abs(p.VsClassic-w[1]) > 1e-9 {
			t.Errorf("point %d (%s): vs ceiling %v, vs classic %v; want %v", i, p.Label(), p.VsCeiling, p.VsClassic, w)
		}
	}
	ts := EvaluateTargets(res)
	got := map[string]Target{}
	for _, tg := range ts {
		got[tg.Name] = tg
	}
	if tg := got["3 replicas skiplocked vs ceiling"]; !tg.Met || tg.Value != 0.9 {
		t.Errorf("ceiling target = %+v, want met at 0.9", tg)
	}
	if tg := got["3 replicas skiplocked vs classic"]; !tg.Met {
		t.Errorf("classic target = %+v, want met (6×)", tg)
	}
	if tg := got["1000000 terminal rows vs empty table (skiplocked)"]; tg.Met || math.Abs(tg.Value-0.5) > 1e-9 {
		t.Errorf("table-size target = %+v, want missed at 0.5", tg)
	}
	if tg := got["idle replica (skiplocked)"]; tg.Measured {
		t.Errorf("idle target = %+v, want not measured", tg)
	}
}

func TestMergeRoundsTakesMedian(t *testing.T) {
	a := pt("headline", StrategySkip, 0, 200, 50, 300)
	b := pt("headline", StrategySkip, 0, 200, 50, 100)
	c := pt("headline", StrategySkip, 0, 200, 50, 200)
	d := pt("headline", StrategyCeiling, 0, 50, 50, 900)
	got := MergeRounds([]Point{a, d, b, c})
	if len(got) != 2 || got[0].Strategy != StrategySkip || got[1].Strategy != StrategyCeiling {
		t.Fatalf("MergeRounds = %+v, want skiplocked then ceiling", got)
	}
	if got[0].Throughput != 200 || len(got[0].Rounds) != 3 || got[0].Rounds[0] != 300 {
		t.Errorf("merged = %v rounds %v, want median 200 of [300 100 200]", got[0].Throughput, got[0].Rounds)
	}
	if got[1].Rounds != nil {
		t.Errorf("single round has Rounds %v, want nil", got[1].Rounds)
	}
}

func TestPlanViolations(t *testing.T) {
	for _, c := range []struct {
		name string
		rows []PlanRow
		want int
	}{
		{"range on idx_scan", []PlanRow{{Table: "job_queue", Type: "ref", Key: "idx_scan", Extra: "Using where; Using index"}}, 0},
		{"full table scan", []PlanRow{{Table: "job_queue", Type: "ALL", Rows: 1000000}}, 1},
		{"full index scan", []PlanRow{{Table: "job_queue", Type: "index", Key: "idx_type_status"}}, 1},
		{"filesort", []PlanRow{{Table: "job_queue", Type: "ref", Key: "idx_lease", Extra: "Using where; Using filesort"}}, 1},
		{"scan and filesort", []PlanRow{{Table: "job_queue", Type: "ALL", Extra: "Using filesort"}}, 2},
		{"other table ignored", []PlanRow{{Table: "job_type_control", Type: "ALL"}}, 0},
	} {
		if got := PlanViolations(c.rows); len(got) != c.want {
			t.Errorf("%s: violations %v, want %d", c.name, got, c.want)
		}
	}
}

func TestParseQueriesAndBind(t *testing.T) {
	qs := ParseQueries("-- name: A :many\n-- comment\nSELECT id FROM t\nWHERE x = sqlc.arg(x) AND id IN (sqlc.slice(ids))\nLIMIT ?;\n\n-- name: B :exec\nUPDATE t SET y = 1;\n")
	if len(qs) != 2 || qs[0].Name != "A" || qs[1].SQL != "UPDATE t SET y = 1" {
		t.Fatalf("ParseQueries = %+v", qs)
	}
	got, err := Bind(qs[0].SQL, "1,2", map[string]string{"x": "'v'", "?": "200"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "SELECT id FROM t\nWHERE x = 'v' AND id IN (1,2)\nLIMIT 200"; got != want {
		t.Errorf("Bind = %q, want %q", got, want)
	}
	if _, err := Bind(qs[0].SQL, "1", map[string]string{}); err == nil || !strings.Contains(err.Error(), "x") {
		t.Errorf("Bind without x: err %v, want a missing-value error naming x", err)
	}
	all, err := SchedulerQueries()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, q := range all {
		names[q.Name] = true
	}
	for _, ss := range SteadyState {
		if !names[ss.Name] {
			t.Errorf("steady-state query %s not in sql/queries", ss.Name)
		}
	}
}

// TestExplainOnRealTable checks the fail rule against the real server: the
// steady-state scan and claim use idx_scan on a table of terminal rows, and
// a query that cannot use an index is caught.
func TestExplainOnRealTable(t *testing.T) {
	h := newTestHarness(t, Options{})
	ctx := context.Background()
	if err := h.env.Preload(ctx, 20000); err != nil {
		t.Fatal(err)
	}
	plans, err := h.explainAll(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != len(SteadyState) {
		t.Fatalf("%d plans, want %d", len(plans), len(SteadyState))
	}
	for _, p := range plans {
		if p.Enforced && len(p.Violations) > 0 {
			t.Errorf("%s: %v (plan %+v)", p.Query, p.Violations, p.Rows)
		}
		if len(p.Rows) == 0 {
			t.Errorf("%s: empty plan", p.Query)
		}
	}
	bad, err := Explain(ctx, h.env.Admin, "SELECT id FROM job_queue WHERE params = '{}' ORDER BY create_time LIMIT 10")
	if err != nil {
		t.Fatal(err)
	}
	v := PlanViolations(bad)
	if len(v) != 2 {
		t.Errorf("unindexed query: violations %v (plan %+v), want a full table scan and a filesort", v, bad)
	}
}

func TestEnvPreloadSeedReset(t *testing.T) {
	h := newTestHarness(t, Options{})
	ctx := context.Background()
	if err := h.env.Preload(ctx, 2500); err != nil {
		t.Fatal(err)
	}
	if h.env.BaseID == 0 || h.env.TableRows != 2500 {
		t.Fatalf("BaseID %d TableRows %d after Preload(2500)", h.env.BaseID, h.env.TableRows)
	}
	if _, err := h.env.Seed(ctx, 1200); err != nil {
		t.Fatal(err)
	}
	if n, err := h.env.Remaining(ctx); err != nil || n != 1200 {
		t.Fatalf("Remaining = %d, %v; want 1200", n, err)
	}
	if err := h.env.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	var total int
	if err := h.env.Admin.QueryRow("SELECT COUNT(*) FROM job_queue").Scan(&total); err != nil || total != 2500 {
		t.Fatalf("rows after Reset = %d, %v; want the 2500 pre-loaded", total, err)
	}
}

func TestStmtCounterCountsStatements(t *testing.T) {
	dsn := testdb.DSN(t)
	var c StmtCounter
	db, err := OpenCountingDB(dsn, 2, &c)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("SELECT 1"); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("SELECT ?", 2); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRow("SELECT COUNT(*) FROM job_queue").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// SELECT 1, START TRANSACTION, SELECT ?, SELECT COUNT(*), COMMIT.
	if got := c.Load(); got != 5 {
		t.Errorf("counted %d statements, want 5", got)
	}
}

// TestThroughputAndLatencySmoke runs each runner briefly on a small backlog
// and one short open-model run: the harness's measurements must see every
// job.
func TestThroughputAndLatencySmoke(t *testing.T) {
	h := newTestHarness(t, Options{Backlog: 600, Window: 400 * time.Millisecond, Warmup: 100 * time.Millisecond})
	ctx := context.Background()
	for _, strat := range []string{StrategyCeiling, StrategyClassic, StrategyCAS, StrategySkip} {
		spec := h.headline(strat, 0)
		spec.Replicas = 2
		if strat == StrategyClassic {
			spec.PollInterval = 100 * time.Millisecond // its first tick comes within 0.1 s
		}
		p, err := h.measureThroughput(ctx, spec)
		if err != nil {
			t.Fatalf("%s: %v", strat, err)
		}
		if p.Throughput <= 0 || p.Completed == 0 || p.Counters.Statements == 0 {
			t.Errorf("%s: throughput %v completed %d statements %d, want all > 0", strat, p.Throughput, p.Completed, p.Counters.Statements)
		}
	}
	spec := h.headline(StrategySkip, 0)
	spec.Replicas = 1
	lp, err := h.measureLatency(ctx, spec, 40, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if lp.Sent != 40 || lp.Accepted != 40 || lp.Pickup.Count != 40 {
		t.Errorf("latency: sent %d accepted %d pickups %d, want 40 each", lp.Sent, lp.Accepted, lp.Pickup.Count)
	}
}

func TestPairedRatio(t *testing.T) {
	for _, c := range []struct {
		xs, bases []float64
		want      float64
		ok        bool
	}{
		{[]float64{900, 200, 1000}, []float64{1000, 500, 1000}, 0.9, true}, // ratios 0.9, 0.4, 1.0
		{[]float64{100, 300}, []float64{100, 100}, 2, true},
		{[]float64{100}, []float64{100}, 0, false},
		{[]float64{100, 200}, []float64{100, 100, 100}, 0, false},
	} {
		got, ok := PairedRatio(c.xs, c.bases)
		if ok != c.ok || math.Abs(got-c.want) > 1e-9 {
			t.Errorf("PairedRatio(%v, %v) = %v, %v; want %v, %v", c.xs, c.bases, got, ok, c.want, c.ok)
		}
	}
	res := &Result{Points: []Point{pt("headline", StrategyCeiling, 0, 50, 50, 1000), pt("headline", StrategySkip, 0, 200, 50, 900)}}
	res.Points[0].Rounds = []float64{1000, 400, 1200}
	res.Points[1].Rounds = []float64{900, 380, 600}
	ApplyRatios(res)
	if got := res.Points[1].VsCeiling; math.Abs(got-0.9) > 1e-9 {
		t.Errorf("paired VsCeiling = %v, want the median of 0.9, 0.95, 0.5 = 0.9", got)
	}
}

func TestBatchSeriesOnePointPerBatch(t *testing.T) {
	res := &Result{Points: []Point{
		pt("headline", StrategyCeiling, 0, 50, 50, 1000),
		pt("headline", StrategySkip, 0, 200, 50, 900),
		pt("batch", StrategyCeiling, 0, 200, 200, 2000),
		pt("batch", StrategySkip, 0, 50, 50, 800),
		pt("batch", StrategySkip, 0, 200, 200, 1500),
		pt("headline", StrategySkip, 1000000, 200, 50, 700),
	}}
	s := BatchSeries(res)
	if got := s[StrategySkip]; len(got) != 2 || got[0].X != 50 || got[1].Y != 1500 {
		t.Errorf("skiplocked series %v, want (50, 800) (200, 1500)", got)
	}
	if got := s[StrategyCeiling]; len(got) != 2 || got[0].Y != 1000 || got[1].Y != 2000 {
		t.Errorf("ceiling series %v, want (50, 1000) (200, 2000)", got)
	}
}

// A missed target says by how much and why, from the run's own numbers.
func TestMissedTargetSaysByHowMuchAndWhy(t *testing.T) {
	sk := pt("headline", StrategySkip, 0, 200, 50, 700)
	sk.StatementsPerJob = 0.25
	sk.Rounds = []float64{650, 700, 760}
	sk.Diagnosis = Diagnosis{BenchCPUCores: 0.2, ServerCPUCores: 1.9, JobsPerClaim: 27.3, RowLockMsPer1000: 110}
	ceil := pt("headline", StrategyCeiling, 0, 50, 50, 1000)
	ceil.ClaimSize = 27 // measured at the claim size jobq used: a comparison
	ceil.StatementsPerJob = 0.18
	ceil.Diagnosis = Diagnosis{BenchCPUCores: 0.05, ServerCPUCores: 1.5, RowLockMsPer1000: 15}
	res := &Result{CPUs: 2, Points: []Point{ceil, sk, pt("headline", StrategyClassic, 0, 200, 50, 100)}}
	ApplyRatios(res)
	res.Targets = EvaluateTargets(res)
	tg := res.Targets[0]
	if tg.Name != "3 replicas skiplocked vs ceiling" || tg.Met || !tg.Measured {
		t.Fatalf("target = %+v, want the ceiling target measured and missed", tg)
	}
	if tg.Shortfall != "0.10× (13%)" {
		t.Errorf("shortfall = %q, want %q", tg.Shortfall, "0.10× (13%)")
	}
	for _, want := range []string{"1.90 of 2 cores: it is CPU-bound", "0.25 statements per job against the ceiling's 0.18",
		"27.3 jobs per claim (at most min(workers, batch limit) = 50)", "row-lock waits of 110 ms per 1000 jobs against the ceiling's 15",
		"rounds measured 650 / 700 / 760 jobs/s"} {
		if !strings.Contains(tg.Why, want) {
			t.Errorf("why = %q\nmissing %q", tg.Why, want)
		}
	}
	if res.Targets[1].Why != "" || !res.Targets[1].Met {
		t.Errorf("met target %+v carries a why", res.Targets[1])
	}
	var b strings.Builder
	WriteTargets(&b, res)
	for _, want := range []string{"| 0.70× | **no** (short by 0.10× (13%)) |", "- **Missed: 3 replicas skiplocked vs ceiling** (≥ 0.80×, measured 0.70×, short by 0.10× (13%)): the database server used 1.90"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("targets section lacks %q:\n%s", want, b.String())
		}
	}
}

// The CPU accounting reads this process from /proc like the database server.
func TestProcCPUSecondsReadsALiveProcess(t *testing.T) {
	burn := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(burn) {
	}
	v, ok := procCPUSeconds(os.Getpid())
	if !ok || v <= 0 {
		t.Fatalf("procCPUSeconds(self) = %v, %v; want > 0", v, ok)
	}
	if _, ok := procCPUSeconds(-1); ok {
		t.Fatal("procCPUSeconds(-1) succeeded")
	}
	s0 := takeCPU(0)
	s1 := takeCPU(s0.serverPID)
	d := diagnose(s0, s1, GlobalStatus{"Innodb_row_lock_waits": 30, "Innodb_row_lock_time": 12}, 1500)
	if d.RowLockWaitsPer1000 != 20 || d.RowLockMsPer1000 != 8 {
		t.Fatalf("lock waits per 1000 = %v, %v; want 20, 8", d.RowLockWaitsPer1000, d.RowLockMsPer1000)
	}
}
