package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/jobtypes"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/store"
	"github.com/jobq/jobq/testbed/dbprovider"
)

// The workflow bench (`jobq bench --workflows`) measures in one run, on one
// in-process replica at its defaults, against a fresh database:
//
//   - unblock latency: on an idle replica, workflows of three parents and
//     one child submitted one at a time; the latency of each is the
//     child's claim (started_at) minus the last parent's completion
//     (finished_at), both on the database clock;
//   - drain rates, each a backlog submitted while the replica is stopped
//     and then drained (jobs / (last finished_at − first started_at)):
//     10,000 independent no-op jobs; 10 workflows of 1 → 1,000 → 1
//     (10,020 jobs); 100 chains of 100 jobs (10,000 jobs). Rounds are
//     interleaved; each rate is the median of its rounds, each ratio the
//     median of the per-round ratios.

// WorkflowOptions configure RunWorkflows.
type WorkflowOptions struct {
	DSN string // "" : dbprovider's default (JOBQ_DSN, Docker, a local mariadbd)
	Out string // directory for workflows.json and workflows.md
	// UnblockSamples is how many fan-in workflows the latency is measured
	// over. Defaults to 200.
	UnblockSamples int
	// Rounds is how many interleaved rounds of the drains run. Defaults to 3.
	Rounds int
	Log    io.Writer // progress lines; nil for none
}

// WorkflowResult is what RunWorkflows measured.
type WorkflowResult struct {
	Server         string        `json:"server"`
	UnblockSamples int           `json:"unblock_samples"`
	UnblockP50     time.Duration `json:"unblock_p50_ns"`
	UnblockP99     time.Duration `json:"unblock_p99_ns"`
	UnblockMax     time.Duration `json:"unblock_max_ns"`
	Drains         []WorkflowDrain
	// FanVsIndependent is the 1 → 1,000 → 1 rate over the independent
	// rate (target ≥ 0.7); ChainVsIndependent the chains'.
	FanVsIndependent   float64 `json:"fan_vs_independent"`
	ChainVsIndependent float64 `json:"chain_vs_independent"`
	// FanPhases is where each round's 1 → 1,000 → 1 drain spent its time.
	FanPhases []FanPhases `json:"fan_phases"`
}

// FanPhases are the moments of one 1 → 1,000 → 1 drain, in milliseconds
// from its first claim (the first root's started_at), on the database
// clock: the last root's success (every middle job unblocked), the first
// middle job's start, the last middle job's success, the last sink's
// start and its success (the end of the drain).
type FanPhases struct {
	RootsDone     float64 `json:"roots_done_ms"`
	FirstMidStart float64 `json:"first_mid_start_ms"`
	LastMidDone   float64 `json:"last_mid_done_ms"`
	LastSinkStart float64 `json:"last_sink_start_ms"`
	End           float64 `json:"end_ms"`
}

// WorkflowDrain is one drain shape's rates over the rounds.
type WorkflowDrain struct {
	Name   string    `json:"name"`
	Jobs   int       `json:"jobs"`
	Rounds []float64 `json:"rounds_jobs_per_s"`
	Rate   float64   `json:"jobs_per_s"` // median of Rounds
}

// RunWorkflows runs the workflow bench and writes workflows.json and
// workflows.md into opts.Out.
func RunWorkflows(ctx context.Context, opts WorkflowOptions) (*WorkflowResult, error) {
	opts.UnblockSamples = max(opts.UnblockSamples, 0)
	if opts.UnblockSamples == 0 {
		opts.UnblockSamples = 200
	}
	if opts.Rounds <= 0 {
		opts.Rounds = 3
	}
	logf := func(format string, args ...any) {
		if opts.Log != nil {
			fmt.Fprintf(opts.Log, format+"\n", args...)
		}
	}
	env, st, done, err := openFreshStore(ctx, opts.DSN)
	if err != nil {
		return nil, err
	}
	defer done()
	res := &WorkflowResult{Server: st.Server.Description, UnblockSamples: opts.UnblockSamples}

	// Unblock latency on an idle replica.
	lat, err := unblockLatency(ctx, st, env.DSN, opts.UnblockSamples)
	if err != nil {
		return nil, fmt.Errorf("unblock latency: %w", err)
	}
	slices.Sort(lat)
	res.UnblockP50, res.UnblockP99, res.UnblockMax = pct(lat, 0.50), pct(lat, 0.99), lat[len(lat)-1]
	logf("unblock latency over %d workflows: p50 %s p99 %s max %s", len(lat), res.UnblockP50, res.UnblockP99, res.UnblockMax)

	shapes := []struct {
		name string
		jobs func(round int) []jobq.WorkflowSubmitParams
	}{
		{"independent 10,000", func(r int) []jobq.WorkflowSubmitParams { return nil }},
		{"10 × (1 → 1,000 → 1)", func(r int) []jobq.WorkflowSubmitParams { return fanWorkflows(r, 10, 1000) }},
		{"100 chains of 100", func(r int) []jobq.WorkflowSubmitParams { return chainWorkflows(r, 100, 100) }},
	}
	res.Drains = make([]WorkflowDrain, len(shapes))
	for round := range opts.Rounds {
		for i, sh := range shapes {
			if err := env.Reset(ctx); err != nil {
				return nil, err
			}
			wfs := sh.jobs(round)
			n := 0
			if wfs == nil {
				ps := make([]jobq.SubmitParams, 10000)
				for k := range ps {
					ps[k] = jobq.SubmitParams{JobKey: fmt.Sprintf("ind-%d-%d", round, k), JobType: "noop", Params: "{}", RequestHash: "h"}
				}
				for k := 0; k < len(ps); k += 1000 {
					if _, err := st.JobSubmitMany(ctx, ps[k:k+1000]); err != nil {
						return nil, err
					}
				}
				n = len(ps)
			}
			for _, w := range wfs {
				if _, _, err := st.WorkflowSubmit(ctx, w); err != nil {
					return nil, err
				}
				n += len(w.Jobs)
			}
			rate, err := drainRate(ctx, st, env.DSN, n, 1)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", sh.name, err)
			}
			res.Drains[i].Name, res.Drains[i].Jobs = sh.name, n
			res.Drains[i].Rounds = append(res.Drains[i].Rounds, rate)
			logf("round %d: %s: %d jobs at %.0f jobs/s", round+1, sh.name, n, rate)
			if i == 1 {
				ph, err := fanPhases(ctx, st)
				if err != nil {
					return nil, fmt.Errorf("%s: phases: %w", sh.name, err)
				}
				res.FanPhases = append(res.FanPhases, ph)
				logf("round %d: %s: roots done %.0f ms, first middle start %.0f ms, last middle done %.0f ms, last sink start %.0f ms, end %.0f ms",
					round+1, sh.name, ph.RootsDone, ph.FirstMidStart, ph.LastMidDone, ph.LastSinkStart, ph.End)
			}
		}
	}
	for i := range res.Drains {
		r := slices.Clone(res.Drains[i].Rounds)
		slices.Sort(r)
		res.Drains[i].Rate = r[(len(r)-1)/2]
	}
	res.FanVsIndependent = medianRatio(res.Drains[1].Rounds, res.Drains[0].Rounds)
	res.ChainVsIndependent = medianRatio(res.Drains[2].Rounds, res.Drains[0].Rounds)
	if opts.Out != "" {
		if err := writeWorkflowReport(opts.Out, res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// openFreshStore provides a database server (dsn, or dbprovider's
// default), a fresh bench database on it (NewEnv) and a store on that
// database; done closes all three.
func openFreshStore(ctx context.Context, dsn string) (env *Env, st *store.Store, done func(), err error) {
	srv, err := dbprovider.Provide(ctx, dbprovider.Options{DSN: dsn})
	if err != nil {
		return nil, nil, nil, err
	}
	if env, err = NewEnv(ctx, srv); err != nil {
		srv.Close()
		return nil, nil, nil, err
	}
	if st, err = store.Open(ctx, env.DSN, store.PoolConfig{MaxOpen: 40}); err != nil {
		env.Close()
		srv.Close()
		return nil, nil, nil, err
	}
	return env, st, func() { st.Close(); env.Close(); srv.Close() }, nil
}

// fanPhases reads the moments of the 1 → 1,000 → 1 drain that just ended
// (fanWorkflows' job keys: …root, …m<k>, …sink).
func fanPhases(ctx context.Context, st *store.Store) (FanPhases, error) {
	var us [5]sql.NullInt64
	err := st.DB().QueryRowContext(ctx, `SELECT
	    TIMESTAMPDIFF(MICROSECOND, t0, MAX(IF(job_key LIKE '%root', finished_at, NULL))),
	    TIMESTAMPDIFF(MICROSECOND, t0, MIN(IF(job_key LIKE '%-m%', started_at, NULL))),
	    TIMESTAMPDIFF(MICROSECOND, t0, MAX(IF(job_key LIKE '%-m%', finished_at, NULL))),
	    TIMESTAMPDIFF(MICROSECOND, t0, MAX(IF(job_key LIKE '%sink', started_at, NULL))),
	    TIMESTAMPDIFF(MICROSECOND, t0, MAX(finished_at))
	  FROM job_queue, (SELECT MIN(started_at) AS t0 FROM job_queue WHERE status = 'SUCCESS') AS first
	  WHERE status = 'SUCCESS' AND job_key LIKE 'fan-%'`).Scan(&us[0], &us[1], &us[2], &us[3], &us[4])
	if err != nil {
		return FanPhases{}, err
	}
	toMS := func(v sql.NullInt64) float64 { return float64(v.Int64) / 1e3 }
	return FanPhases{RootsDone: toMS(us[0]), FirstMidStart: toMS(us[1]), LastMidDone: toMS(us[2]), LastSinkStart: toMS(us[3]), End: toMS(us[4])}, nil
}

// ratioSpread is the lowest and the highest of the per-round ratios
// a[i]/b[i].
func ratioSpread(a, b []float64) (lo, hi float64) {
	for i := range a {
		r := a[i] / b[i]
		if i == 0 || r < lo {
			lo = r
		}
		if i == 0 || r > hi {
			hi = r
		}
	}
	return lo, hi
}

// medianRatio is the median (the lower middle for an even count) of the
// per-round ratios a[i]/b[i]: each round's drains ran back to back, on the
// same machine load.
func medianRatio(a, b []float64) float64 {
	r := make([]float64, len(a))
	for i := range a {
		r[i] = a[i] / b[i]
	}
	slices.Sort(r)
	return r[(len(r)-1)/2]
}

func pct(sorted []time.Duration, p float64) time.Duration {
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
}

func wfNoop(key string, deps ...string) jobq.WorkflowJobParams {
	j := jobq.WorkflowJobParams{SubmitParams: jobq.SubmitParams{JobKey: key, JobType: "noop", Params: "{}", RequestHash: "h"}}
	for _, d := range deps {
		j.DependsOn = append(j.DependsOn, jobq.Dependency{JobKey: d, OnParentFailure: jobq.OnParentFailureCancel})
	}
	return j
}

// fanWorkflows is n workflows of 1 → width → 1.
func fanWorkflows(round, n, width int) []jobq.WorkflowSubmitParams {
	var out []jobq.WorkflowSubmitParams
	for w := range n {
		p := fmt.Sprintf("fan-%d-%d-", round, w)
		jobs := []jobq.WorkflowJobParams{wfNoop(p + "root")}
		var mids []string
		for k := range width {
			jobs = append(jobs, wfNoop(fmt.Sprintf("%sm%d", p, k), p+"root"))
			mids = append(mids, fmt.Sprintf("%sm%d", p, k))
		}
		jobs = append(jobs, wfNoop(p+"sink", mids...))
		out = append(out, jobq.WorkflowSubmitParams{WorkflowKey: p, RequestHash: "h", Jobs: jobs})
	}
	return out
}

// chainWorkflows is n chains of length jobs each.
func chainWorkflows(round, n, length int) []jobq.WorkflowSubmitParams {
	var out []jobq.WorkflowSubmitParams
	for w := range n {
		p := fmt.Sprintf("chain-%d-%d-", round, w)
		jobs := []jobq.WorkflowJobParams{wfNoop(p + "0")}
		for k := 1; k < length; k++ {
			jobs = append(jobs, wfNoop(fmt.Sprintf("%s%d", p, k), fmt.Sprintf("%s%d", p, k-1)))
		}
		out = append(out, jobq.WorkflowSubmitParams{WorkflowKey: p, RequestHash: "h", Jobs: jobs})
	}
	return out
}

// startWorkflowReplica starts one in-process scheduler at its defaults.
func startWorkflowReplica(ctx context.Context, dsn, owner string) (*scheduler.Scheduler, *store.Store, error) {
	st, err := store.Open(ctx, dsn, store.PoolConfig{MaxOpen: 40})
	if err != nil {
		return nil, nil, err
	}
	reg := scheduler.NewRegistry()
	jobtypes.Register(reg)
	s, err := scheduler.New(st, reg, scheduler.Config{Owner: owner, Logger: quietLogger()}, st.Server.SkipLocked)
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	if err := s.Start(context.WithoutCancel(ctx)); err != nil {
		st.Close()
		return nil, nil, err
	}
	return s, st, nil
}

// drainRate starts replicas in-process replicas (1 when < 1), waits until
// n jobs succeeded and returns n / (last finished_at − first started_at) on
// the database clock.
func drainRate(ctx context.Context, admin *store.Store, dsn string, n, replicas int) (float64, error) {
	for r := range max(replicas, 1) {
		s, st, err := startWorkflowReplica(ctx, dsn, fmt.Sprintf("bench-wf-%d", r+1))
		if err != nil {
			return 0, err
		}
		defer st.Close()
		defer s.Stop()
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		var done int
		if err := admin.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM job_queue WHERE status = 'SUCCESS'").Scan(&done); err != nil {
			return 0, err
		}
		if done >= n {
			break
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("drain: %d of %d jobs done after 10 minutes", done, n)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	var us int64
	if err := admin.DB().QueryRowContext(ctx,
		"SELECT TIMESTAMPDIFF(MICROSECOND, MIN(started_at), MAX(finished_at)) FROM job_queue WHERE status = 'SUCCESS'").Scan(&us); err != nil {
		return 0, err
	}
	return float64(n) / (float64(us) / 1e6), nil
}

// unblockLatency submits samples fan-in workflows (three parents, one
// child) one at a time to an idle replica (poll interval at its default,
// 1 s) and returns each child's claim minus its last parent's completion.
func unblockLatency(ctx context.Context, admin *store.Store, dsn string, samples int) ([]time.Duration, error) {
	s, st, err := startWorkflowReplica(ctx, dsn, "bench-unblock")
	if err != nil {
		return nil, err
	}
	defer st.Close()
	defer s.Stop()
	out := make([]time.Duration, 0, samples)
	for i := range samples {
		p := fmt.Sprintf("lat-%d-", i)
		w, _, err := admin.WorkflowSubmit(ctx, jobq.WorkflowSubmitParams{WorkflowKey: p, RequestHash: "h", Jobs: []jobq.WorkflowJobParams{
			wfNoop(p + "a"), wfNoop(p + "b"), wfNoop(p + "c"), wfNoop(p+"child", p+"a", p+"b", p+"c"),
		}})
		if err != nil {
			return nil, err
		}
		s.Wake() // the submit's local wake-up, as the API gives it
		child := w.Jobs[3].ID
		for {
			var us sql.NullInt64
			err := admin.DB().QueryRowContext(ctx, `SELECT TIMESTAMPDIFF(MICROSECOND,
			    (SELECT MAX(p.finished_at) FROM job_dependency d JOIN job_queue p ON p.id = d.parent_id WHERE d.child_id = c.id),
			    c.started_at) FROM job_queue c WHERE c.id = ? AND c.status = 'SUCCESS'`, child).Scan(&us)
			if err != nil && err != sql.ErrNoRows {
				return nil, err
			}
			if us.Valid {
				out = append(out, time.Duration(us.Int64)*time.Microsecond)
				break
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	return out, nil
}

func writeWorkflowReport(dir string, r *WorkflowResult) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "workflows.json"), b, 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "workflows.md"))
	if err != nil {
		return err
	}
	defer f.Close()
	WriteWorkflowTable(f, r)
	return nil
}

// WriteWorkflowTable prints the workflow bench's results as Markdown.
func WriteWorkflowTable(w io.Writer, r *WorkflowResult) {
	fmt.Fprintf(w, "Workflows on %s, one in-process replica at its defaults.\n\n", r.Server)
	fmt.Fprintf(w, "| unblock latency (last parent's completion → child's claim), %d samples, idle replica | p50 | p99 | max | target |\n|---|---|---|---|---|\n", r.UnblockSamples)
	ok := "met"
	if r.UnblockP99 > 100*time.Millisecond {
		ok = "MISSED"
	}
	fmt.Fprintf(w, "| | %.1f ms | %.1f ms | %.1f ms | p99 ≤ 100 ms: %s |\n\n", ms(r.UnblockP50), ms(r.UnblockP99), ms(r.UnblockMax), ok)
	fmt.Fprintf(w, "| drain | jobs | rounds (jobs/s) | median jobs/s | per-round ratios | vs independent (median of per-round ratios, spread) |\n|---|---|---|---|---|---|\n")
	for i, d := range r.Drains {
		ratio := medianRatio(d.Rounds, r.Drains[0].Rounds)
		lo, hi := ratioSpread(d.Rounds, r.Drains[0].Rounds)
		note := ""
		if i == 1 {
			note = " (target ≥ 0.7)"
		}
		rounds, ratios := "", ""
		for k, x := range d.Rounds {
			if k > 0 {
				rounds += ", "
				ratios += ", "
			}
			rounds += fmt.Sprintf("%.0f", x)
			ratios += fmt.Sprintf("%.2f", x/r.Drains[0].Rounds[k])
		}
		fmt.Fprintf(w, "| %s | %d | %s | %.0f | %s | %.2f× (%.2f–%.2f)%s |\n", d.Name, d.Jobs, rounds, d.Rate, ratios, ratio, lo, hi, note)
	}
	if len(r.FanPhases) == 0 {
		return
	}
	fmt.Fprintf(w, "\n| 1 → 1,000 → 1, round | roots done | first middle start | last middle done | last sink start | end (ms from the first claim) |\n|---|---|---|---|---|---|\n")
	for k, ph := range r.FanPhases {
		fmt.Fprintf(w, "| %d | %.0f | %.0f | %.0f | %.0f | %.0f |\n", k+1, ph.RootsDone, ph.FirstMidStart, ph.LastMidDone, ph.LastSinkStart, ph.End)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
