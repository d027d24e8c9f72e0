package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

func numCPU() int { return runtime.NumCPU() }

// baselines finds the points a point is compared with: the ceiling at the
// same table size claiming the same batch (jobq claims min(BatchLimit,
// Workers) at most; without a ceiling of that batch and replica count, the
// headline ceiling), and the headline classic design at the same table size.
func baselines(res *Result, p Point) (ceiling, classic Point) {
	batch := p.BatchLimit
	if isJobq(p.Strategy) {
		batch = min(p.BatchLimit, p.Workers)
	}
	for _, q := range res.Points {
		if q.TableRows != p.TableRows || q.Group != "headline" {
			continue
		}
		switch q.Strategy {
		case StrategyCeiling:
			ceiling = q
		case StrategyClassic:
			classic = q
		}
	}
	for _, q := range res.Points {
		if q.TableRows == p.TableRows && q.Strategy == StrategyCeiling && q.BatchLimit == batch && q.Replicas == p.Replicas {
			ceiling = q
		}
	}
	return ceiling, classic
}

// PairedRatio is the median of xs[i]/bases[i] over rounds measured side by
// side (Options.Rounds): each round's figure against the baseline measured
// moments before it, so a burst of load from other clients affects both
// sides of a pair. ok is false unless both have the same number (> 1) of
// rounds.
func PairedRatio(xs, bases []float64) (float64, bool) {
	if len(xs) < 2 || len(xs) != len(bases) {
		return 0, false
	}
	rs := make([]float64, len(xs))
	for i := range xs {
		rs[i] = Ratio(xs[i], bases[i])
	}
	slices.Sort(rs)
	if len(rs)%2 == 1 {
		return rs[len(rs)/2], true
	}
	return (rs[len(rs)/2-1] + rs[len(rs)/2]) / 2, true
}

// ApplyRatios sets every point's ratio to the ceiling and to the classic
// baseline at the same table size, and every latency point's classic/jobq
// ratio at the same rate.
func ApplyRatios(res *Result) {
	for i := range res.Points {
		p := &res.Points[i]
		ceil, cl := baselines(res, *p)
		p.VsCeiling, p.VsClassic = Ratio(p.Throughput, ceil.Throughput), Ratio(p.Throughput, cl.Throughput)
		if r, ok := PairedRatio(p.Rounds, ceil.Rounds); ok {
			p.VsCeiling = r
		}
		if r, ok := PairedRatio(p.Rounds, cl.Rounds); ok {
			p.VsClassic = r
		}
	}
	for i := range res.Latency {
		l := &res.Latency[i]
		for _, c := range res.Latency {
			if c.Strategy == StrategyClassic && c.Rate == l.Rate {
				l.ClassicOverP50, l.ClassicOverP99 = Ratio(c.Pickup.P50, l.Pickup.P50), Ratio(c.Pickup.P99, l.Pickup.P99)
			}
		}
	}
}

// Target is one of the targets, evaluated on this run.
type Target struct {
	Name  string  `json:"name"`
	Goal  string  `json:"goal"`
	Value float64 `json:"value"`
	Shown string  `json:"shown"`
	Met   bool    `json:"met"`
	// Measured is false when the run did not include what the target needs.
	Measured bool `json:"measured"`
	// Shortfall is how far a missed target is from its goal ("0.03× (4%)").
	Shortfall string `json:"shortfall,omitempty"`
	// Why explains a missed target from the run's own measurements (CPU,
	// statements and rows per job, row-lock waits, claim sizes, rounds).
	Why string `json:"why,omitempty"`
}

// shortfall formats how far v is from goal in unit, with the relative gap.
func shortfall(v, goal float64, unit string) string {
	gap := goal - v
	if gap < 0 {
		gap = -gap
	}
	return fmt.Sprintf("%.2f%s (%.0f%%)", gap, unit, 100*gap/goal)
}

// ceilingClaim is the jobs per claim a ceiling point ran at.
func ceilingClaim(c Point) int {
	if c.ClaimSize > 0 {
		return c.ClaimSize
	}
	return c.BatchLimit
}

// SameClaimSize reports whether ceiling ran at the claim size jobq point p
// used (its measured jobs per claim, within 10 %): only then is p's ratio
// to it a comparison. A point without a measured claim size is compared
// as before (same spec).
func SameClaimSize(p, ceiling Point) bool {
	if ceiling.ClaimSize > 0 && p.Group == "headline" && p.Strategy == StrategySkip {
		return true // the ceiling ran at this point's claim size, round by round
	}
	if p.Diagnosis.JobsPerClaim <= 0 {
		return true
	}
	c := float64(ceilingClaim(ceiling))
	return math.Abs(p.Diagnosis.JobsPerClaim-c) <= 0.1*c+0.5
}

func findPoint(res *Result, group, strat string, rows, replicas int) (Point, bool) {
	for _, p := range res.Points {
		if p.Group == group && p.Strategy == strat && p.TableRows == rows && p.Replicas == replicas {
			return p, true
		}
	}
	return Point{}, false
}

// EvaluateTargets checks the targets (3 replicas skiplocked ≥ 0.8× ceiling
// and ≥ 5× classic; pickup at 200 jobs/s p50 ≤ 5 ms and p99 ≤ 50 ms; idle ≤
// 1.2 queries/s; 1M rows within 20% of the empty table; scan and claim use
// an index).
func EvaluateTargets(res *Result) []Target {
	var ts []Target
	add := func(name, goal string, v float64, shown string, met, measured bool) {
		ts = append(ts, Target{Name: name, Goal: goal, Value: v, Shown: shown, Met: met && measured, Measured: measured})
	}
	small, large := 0, 0
	for i, p := range res.Points {
		if i == 0 || p.TableRows < small {
			small = p.TableRows
		}
		large = max(large, p.TableRows)
	}
	// miss records, on the target just added, how far it is from goal and why.
	miss := func(goal float64, unit, why string) {
		t := &ts[len(ts)-1]
		if t.Measured && !t.Met {
			t.Shortfall, t.Why = shortfall(t.Value, goal, unit), why
		}
	}
	sk, ok := findPoint(res, "headline", StrategySkip, small, 3)
	ceil, _ := findPoint(res, "headline", StrategyCeiling, small, 3)
	classic, _ := findPoint(res, "headline", StrategyClassic, small, 3)
	// The ceiling counts only at the claim size jobq used (within 10 %).
	same := SameClaimSize(sk, ceil)
	shownCeil := fmt.Sprintf("%.2f×", sk.VsCeiling)
	if ok && !same {
		shownCeil = fmt.Sprintf("ceiling at %d jobs/claim, jobq at %.0f: not comparable", ceilingClaim(ceil), sk.Diagnosis.JobsPerClaim)
	}
	add("3 replicas skiplocked vs ceiling", "≥ 0.80×", sk.VsCeiling, shownCeil, sk.VsCeiling >= 0.8, ok && same)
	miss(0.8, "×", explainMiss(sk, ceil, "the ceiling", res.CPUs))
	add("3 replicas skiplocked vs classic", "≥ 5×", sk.VsClassic, fmt.Sprintf("%.1f×", sk.VsClassic), sk.VsClassic >= 5, ok)
	miss(5, "×", explainMiss(sk, classic, "the classic design", res.CPUs))
	ts = append(ts, pickupIdleTargets(res)...)
	if large > small {
		big, ok2 := findPoint(res, "headline", StrategySkip, large, 3)
		r := Ratio(big.Throughput, sk.Throughput)
		add(fmt.Sprintf("%d terminal rows vs empty table (skiplocked)", large), "≥ 0.80×", r, fmt.Sprintf("%.2f×", r), r >= 0.8, ok && ok2)
		miss(0.8, "×", fmt.Sprintf("rows examined per job %.1f at %d rows against %.1f at %d; %s", big.ServerRowsExaminedPerJob, large,
			sk.ServerRowsExaminedPerJob, small, explainMiss(big, sk, "the empty table", res.CPUs)))
	}
	viol := 0
	enforced := false
	for _, p := range res.Plans {
		if p.Enforced {
			enforced = true
			viol += len(p.Violations)
		}
	}
	add(fmt.Sprintf("scan and claim use an index (largest table, ≥ %d rows)", PlanJudgeMinRows), "0 violations", float64(viol), fmt.Sprintf("%d violations", viol), viol == 0, enforced)
	if t := &ts[len(ts)-1]; t.Measured && !t.Met {
		t.Shortfall, t.Why = fmt.Sprintf("%d violations", viol), "see the EXPLAIN section: each violation names the statement and the plan"
	}
	return ts
}

// pickupIdleTargets are the pickup targets at 200 jobs/s (p50 ≤ 5 ms, p99
// ≤ 50 ms, skiplocked through the API) and the idle cost of a skiplocked
// replica (≤ 1.2 queries/s); "not run" when the run did not measure them.
func pickupIdleTargets(res *Result) []Target {
	var ts []Target
	add := func(name, goal string, v float64, shown string, met, measured bool) {
		ts = append(ts, Target{Name: name, Goal: goal, Value: v, Shown: shown, Met: met && measured, Measured: measured})
	}
	miss := func(goal float64, unit, why string) {
		t := &ts[len(ts)-1]
		if t.Measured && !t.Met {
			t.Shortfall, t.Why = shortfall(t.Value, goal, unit), why
		}
	}
	var lp *LatencyPoint
	for i := range res.Latency {
		if res.Latency[i].Strategy == StrategySkip && res.Latency[i].Rate == 200 {
			lp = &res.Latency[i]
		}
	}
	if lp != nil {
		lat := fmt.Sprintf("p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms over %d jobs (%d submit errors; submit p99 %.2f ms): pickup is started_at − run_at on the database clock, so a long tail with a short submit time is queueing for a scan — poll interval and wake-up — or for a free worker",
			lp.Pickup.P50, lp.Pickup.P90, lp.Pickup.P99, lp.Pickup.Max, lp.Sent, lp.Errors, lp.Submit.P99)
		add("pickup p50 at 200 jobs/s (API)", "≤ 5 ms", lp.Pickup.P50, fmt.Sprintf("%.2f ms", lp.Pickup.P50), lp.Pickup.P50 <= 5, true)
		miss(5, " ms", lat)
		add("pickup p99 at 200 jobs/s (API)", "≤ 50 ms", lp.Pickup.P99, fmt.Sprintf("%.2f ms", lp.Pickup.P99), lp.Pickup.P99 <= 50, true)
		miss(50, " ms", lat)
	} else {
		add("pickup p50 at 200 jobs/s (API)", "≤ 5 ms", 0, "not run", false, false)
		add("pickup p99 at 200 jobs/s (API)", "≤ 50 ms", 0, "not run", false, false)
	}
	idle := -1.0
	for _, ip := range res.Idle {
		if ip.Strategy == StrategySkip {
			idle = ip.QueriesPerSecond
		}
	}
	idleShown := "not run"
	if idle >= 0 {
		idleShown = fmt.Sprintf("%.2f q/s", idle)
	}
	add("idle replica (skiplocked)", "≤ 1.2 queries/s", idle, idleShown, idle <= 1.2, idle >= 0)
	miss(1.2, " q/s", "an idle replica sends one probe per poll interval plus a rescuer pass per rescue interval; more means scans came faster than the poll interval (wake-ups) or other statements ran")
	return ts
}

// ReadResult reads a bench.json written by WriteReport.
func ReadResult(path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var res Result
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &res, nil
}

// WriteReport writes report.md, bench.json and the PNG plots into dir.
func WriteReport(dir string, res *Result) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(outPath(dir, "bench.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	f, err := os.Create(outPath(dir, "report.md"))
	if err != nil {
		return err
	}
	WriteMarkdown(f, res)
	if res.Capacity != nil {
		WriteCapacity(f, res.Capacity)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if res.Capacity != nil {
		if err := WriteCapacityFiles(dir, res.Capacity); err != nil {
			return err
		}
	}
	return WritePlots(dir, res)
}

func fmtRatio(r float64) string {
	if r <= 0 {
		return "–"
	}
	if r >= 10 {
		return fmt.Sprintf("%.0f×", r)
	}
	return fmt.Sprintf("%.2f×", r)
}

func fmtCount(n int64) string {
	if n < 0 {
		return "n/a"
	}
	return fmt.Sprint(n)
}

func fmtPerJob(v float64) string {
	if v < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", v)
}

func fmtDur(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	return d.String()
}

// WriteMarkdown renders the report.
func WriteMarkdown(w io.Writer, res *Result) {
	fmt.Fprintf(w, "# jobq bench\n\n%s · %s · %d CPUs · %s · %.0f s\n\n", res.Server, res.Durable, res.CPUs,
		res.Started.Format(time.RFC3339), res.Duration)
	fmt.Fprintf(w, "No-op jobs; every ratio is against the ceiling (raw SQL: SKIP LOCKED batch claim + one batched completion, no scheduler) and the classic design (fixed 1 s poll, LIMIT 200, per-row CAS on status, no drain, no wake-up), both measured in this run at the same table size.\n\n")
	if len(res.Targets) > 0 {
		WriteTargets(w, res)
	}
	if len(res.Points) > 0 {
		fmt.Fprintf(w, "## Throughput\n\n")
		fmt.Fprintf(w, "| group | strategy | replicas | workers | batch | poll | jitter | table rows | jobs/s | × ceiling | × classic | claim conflicts | 1213 | 1205 | stmts/job | server q/job | rows examined/job |\n")
		fmt.Fprintf(w, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, p := range res.Points {
			fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %s | %s | %d | %.0f | %s | %s | %s | %s | %s | %s | %.2f | %.1f |\n",
				p.Group, p.Strategy, p.Replicas, p.Workers, p.BatchLimit, fmtDur(p.PollInterval), fmtDur(p.PollJitter),
				p.TableRows, p.Throughput, fmtRatio(p.VsCeiling), fmtRatio(p.VsClassic), fmtCount(p.Counters.ClaimConflicts),
				fmtCount(p.Counters.Deadlocks), fmtCount(p.Counters.LockWaits), fmtPerJob(p.StatementsPerJob), p.ServerQuestionsPerJob,
				p.ServerRowsExaminedPerJob)
		}
		fmt.Fprintf(w, "\nstmts/job: the runner's own statements per completed job (exact). server q/job and rows examined/job: SHOW GLOBAL STATUS deltas (Questions; Handler_read_*) per completed job — server-wide, so other clients of a shared server inflate them. The ceiling uses %s loops; the classic design's `batch` is its scan LIMIT.\n\n", "3")
	}
	writeDiagnosis(w, res)
	if len(res.Latency) > 0 {
		fmt.Fprintf(w, "## Pickup latency under open-model load (HTTP API)\n\n")
		fmt.Fprintf(w, "| strategy | replicas | rate (jobs/s) | sent | errors | pickup p50 | p90 | p99 | p99.9 | max | classic p50 ÷ | classic p99 ÷ | submit p50 | submit p99 |\n")
		fmt.Fprintf(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, l := range res.Latency {
			fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %.2f ms | %.2f ms | %.2f ms | %.2f ms | %.2f ms | %s | %s | %.2f ms | %.2f ms |\n",
				l.Strategy, l.Replicas, l.Rate, l.Sent, l.Errors, l.Pickup.P50, l.Pickup.P90, l.Pickup.P99, l.Pickup.P999,
				l.Pickup.Max, fmtRatio(l.ClassicOverP50), fmtRatio(l.ClassicOverP99), l.Submit.P50, l.Submit.P99)
		}
		fmt.Fprintf(w, "\nPickup = started_at − run_at (both the database clock). Submit = HTTP round trip from each request's intended send time (HdrHistogram, no coordinated omission).\n\n")
	}
	if len(res.Idle) > 0 {
		fmt.Fprintf(w, "## Idle cost (one replica, empty queue)\n\n| strategy | window | queries/s (replica) | server Questions/s (everyone) |\n|---|--:|--:|--:|\n")
		for _, ip := range res.Idle {
			fmt.Fprintf(w, "| %s | %.0f s | %.2f | %.1f |\n", ip.Strategy, ip.Seconds, ip.QueriesPerSecond, ip.ServerQuestionsPerSecond)
		}
		fmt.Fprintln(w)
	}
	WriteFuture(w, res)
	if res.Throughput != nil {
		WriteThroughput(w, res.Throughput)
	}
	if res.Tune != nil {
		WriteTune(w, res.Tune)
	}
	if res.CI != nil {
		WriteCI(w, res.CI)
	}
	if len(res.Plans) > 0 {
		fmt.Fprintf(w, "## EXPLAIN of every steady-state statement\n\nFail rule (largest table, scan and claim): no full table scan (type ALL), no full index scan (type index), no filesort on job_queue.\n\n")
		fmt.Fprintf(w, "| table rows | statement | role | table | type | key | rows | extra | verdict |\n|--:|---|---|---|---|---|--:|---|---|\n")
		for _, p := range res.Plans {
			verdict := "ok"
			if len(p.Violations) > 0 {
				verdict = strings.Join(p.Violations, "; ")
				if p.Enforced {
					verdict = "**FAIL**: " + verdict
				} else {
					verdict = fmt.Sprintf("reported, not enforced (not the largest table, or below %d rows): ", PlanJudgeMinRows) + verdict
				}
			}
			for i, r := range p.Rows {
				name, v := p.Query, verdict
				if i > 0 {
					name, v = "″", ""
				}
				fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %d | %s | %s |\n", p.TableRows, name, p.Role, r.Table, r.Type,
					r.Key, r.Rows, r.Extra, v)
			}
		}
		fmt.Fprintln(w)
	}
}

// WriteTargets renders the targets table (also pasted into docs/bench.md).
func WriteTargets(w io.Writer, res *Result) {
	fmt.Fprintf(w, "## Targets\n\n| target | goal | measured | met |\n|---|---|--:|---|\n")
	for _, t := range res.Targets {
		met := "yes"
		switch {
		case !t.Measured:
			met = "not measured"
		case !t.Met:
			met = "**no**"
			if t.Shortfall != "" {
				met += " (short by " + t.Shortfall + ")"
			}
		}
		shown := t.Shown
		if !t.Measured {
			shown = "—" // never a placeholder printed as a number
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", t.Name, t.Goal, shown, met)
	}
	fmt.Fprintln(w)
	for _, t := range res.Targets {
		if t.Why != "" {
			fmt.Fprintf(w, "- **Missed: %s** (%s, measured %s, short by %s): %s.\n", t.Name, t.Goal, t.Shown, t.Shortfall, t.Why)
		}
	}
	for _, t := range res.Targets {
		if t.Why != "" {
			fmt.Fprintln(w)
			break
		}
	}
	var head []Point
	for _, p := range res.Points {
		if p.Group == "headline" {
			head = append(head, p)
		}
	}
	slices.SortStableFunc(head, func(a, b Point) int { return a.TableRows - b.TableRows })
	if len(head) > 0 {
		fmt.Fprintf(w, "| table rows | strategy (3 replicas) | jobs/s (min–max) | jobs/claim | × ceiling | × classic | stmts/job |\n|--:|---|--:|--:|--:|--:|--:|\n")
		for _, p := range head {
			claim, vsCeil := "—", fmtRatio(p.VsCeiling)
			switch {
			case p.Strategy == StrategyCeiling && p.ClaimSize > 0:
				claim = "skiplocked's, per round"
			case p.Strategy == StrategyCeiling:
				claim = fmt.Sprint(ceilingClaim(p))
			case p.Diagnosis.JobsPerClaim > 0:
				claim = fmt.Sprintf("%.0f", p.Diagnosis.JobsPerClaim)
			}
			if ceil, ok := findPoint(res, "headline", StrategyCeiling, p.TableRows, p.Replicas); ok && isJobq(p.Strategy) && !SameClaimSize(p, ceil) {
				vsCeil = "— (other claim size)"
			}
			fmt.Fprintf(w, "| %d | %s | %.0f%s | %s | %s | %s | %s |\n", p.TableRows, p.Strategy, p.Throughput, fmtSpread(p.Rounds),
				claim, vsCeil, fmtRatio(p.VsClassic), fmtPerJob(p.StatementsPerJob))
		}
		fmt.Fprintf(w, "\njobs/s is each point's median round (the lower middle for an even count); × ceiling and × classic are the medians of the per-round ratios, so they need not equal the quotient of the jobs/s shown. Every round's jobs/s is in bench.json (`rounds`).\n\n")
	}
}

// fmtSpread is " (min–max)" of rounds measured more than once, else "".
func fmtSpread(rounds []float64) string {
	if len(rounds) < 2 {
		return ""
	}
	return fmt.Sprintf(" (%.0f–%.0f)", slices.Min(rounds), slices.Max(rounds))
}
