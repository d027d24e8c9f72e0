package bench

import (
	"cmp"
	"context"
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
	"github.com/jobq/jobq/testbed/chaos/checker"
)

// The rate-limit bench (`jobq bench --rate-limit`) measures in one run, on
// RateReplicas in-process replicas at their defaults, against a fresh
// database, in interleaved rounds:
//
//   - alone: a backlog of UnlimitedJobs no-op jobs of a type with no
//     limit, drained (jobs / (last finished_at − first started_at));
//   - limited: the same backlog next to LimitedJobs no-op jobs of a type
//     limited to RateStarts per RatePeriod, both submitted before the
//     replicas start. For the limited type: the most starts
//     (job_execution.started_at, every attempt) in any window of the
//     period, against the limit, and the achieved rate (starts − 1 over
//     the span from the first to the last start); for the unlimited type
//     its drain rate, against the round's rate alone.

// RateLimitOptions configure RunRateLimit.
type RateLimitOptions struct {
	DSN string // "" : dbprovider's default (JOBQ_DSN, Docker, a local mariadbd)
	Out string // directory for ratelimit.json and ratelimit.md
	// Replicas is how many in-process replicas drain. Defaults to 3.
	Replicas int
	// RateStarts per RatePeriod is the limit. Defaults to 100 per 1s.
	RateStarts int
	RatePeriod time.Duration
	// LimitedJobs is the limited type's backlog. Defaults to 2,000.
	LimitedJobs int
	// UnlimitedJobs is the unlimited type's backlog. Defaults to 20,000.
	UnlimitedJobs int
	// Rounds is how many interleaved rounds run. Defaults to 2.
	Rounds int
	Log    io.Writer // progress lines; nil for none
}

// RateLimitResult is what RunRateLimit measured.
type RateLimitResult struct {
	Server        string        `json:"server"`
	Replicas      int           `json:"replicas"`
	RateStarts    int           `json:"rate_starts"`
	RatePeriod    time.Duration `json:"rate_period_ns"`
	LimitedJobs   int           `json:"limited_jobs"`
	UnlimitedJobs int           `json:"unlimited_jobs"`
	Rounds        []RateLimitRound
	// MaxInWindow is the most limited starts in any window over every
	// round; AchievedRate the median of the rounds' rates (starts/s).
	MaxInWindow  int     `json:"max_in_window"`
	AchievedRate float64 `json:"achieved_starts_per_s"`
	// UnlimitedRatio is the median of the per-round ratios of the
	// unlimited type's drain next to the limited backlog over alone.
	UnlimitedRatio float64 `json:"unlimited_ratio"`
}

// RateLimitRound is one round's figures.
type RateLimitRound struct {
	AloneRate     float64 `json:"alone_jobs_per_s"`
	NextToRate    float64 `json:"next_to_limited_jobs_per_s"`
	MaxInWindow   int     `json:"max_in_window"`
	AchievedRate  float64 `json:"achieved_starts_per_s"`
	LimitedStarts int     `json:"limited_starts"`
}

// The bench's job types: both no-ops.
const (
	rateLimitedType   = "noop-limited"
	rateUnlimitedType = "noop"
)

// RunRateLimit runs the rate-limit bench and writes ratelimit.json and
// ratelimit.md into opts.Out.
func RunRateLimit(ctx context.Context, opts RateLimitOptions) (*RateLimitResult, error) {
	opts.Replicas = cmp.Or(opts.Replicas, 3)
	opts.RateStarts = cmp.Or(opts.RateStarts, 100)
	opts.RatePeriod = cmp.Or(opts.RatePeriod, time.Second)
	opts.LimitedJobs = cmp.Or(opts.LimitedJobs, 2000)
	opts.UnlimitedJobs = cmp.Or(opts.UnlimitedJobs, 20000)
	opts.Rounds = cmp.Or(opts.Rounds, 2)
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
	res := &RateLimitResult{Server: st.Server.Description, Replicas: opts.Replicas, RateStarts: opts.RateStarts,
		RatePeriod: opts.RatePeriod, LimitedJobs: opts.LimitedJobs, UnlimitedJobs: opts.UnlimitedJobs}
	reset := func() error {
		if err := env.Reset(ctx); err != nil {
			return err
		}
		for _, q := range []string{"DELETE FROM job_type_control", "DELETE FROM rate_start"} {
			if _, err := st.DB().ExecContext(ctx, q); err != nil {
				return fmt.Errorf("reset: %w", err)
			}
		}
		return nil
	}
	for round := range opts.Rounds {
		var r RateLimitRound
		// Alone.
		if err := reset(); err != nil {
			return nil, err
		}
		if err := submitNoops(ctx, st, fmt.Sprintf("a%d", round), rateUnlimitedType, opts.UnlimitedJobs); err != nil {
			return nil, err
		}
		if err := drainReplicas(ctx, st, env.DSN, opts.Replicas, opts.UnlimitedJobs); err != nil {
			return nil, err
		}
		if r.AloneRate, err = typeDrainRate(ctx, st, rateUnlimitedType, opts.UnlimitedJobs); err != nil {
			return nil, err
		}
		// Next to the limited backlog.
		if err := reset(); err != nil {
			return nil, err
		}
		if _, err := st.TypeSetRateLimit(ctx, rateLimitedType, jobq.RateLimit{Starts: opts.RateStarts, Period: opts.RatePeriod}); err != nil {
			return nil, err
		}
		if err := submitNoops(ctx, st, fmt.Sprintf("l%d", round), rateLimitedType, opts.LimitedJobs); err != nil {
			return nil, err
		}
		if err := submitNoops(ctx, st, fmt.Sprintf("u%d", round), rateUnlimitedType, opts.UnlimitedJobs); err != nil {
			return nil, err
		}
		if err := drainReplicas(ctx, st, env.DSN, opts.Replicas, opts.LimitedJobs+opts.UnlimitedJobs); err != nil {
			return nil, err
		}
		if r.NextToRate, err = typeDrainRate(ctx, st, rateUnlimitedType, opts.UnlimitedJobs); err != nil {
			return nil, err
		}
		starts, err := typeStarts(ctx, st, rateLimitedType)
		if err != nil {
			return nil, err
		}
		r.LimitedStarts, r.MaxInWindow = len(starts), checker.MostInWindow(starts, opts.RatePeriod)
		if len(starts) > 1 {
			r.AchievedRate = float64(len(starts)-1) / starts[len(starts)-1].Sub(starts[0]).Seconds()
		}
		logf("round %d: unlimited alone %.0f jobs/s, next to the limited backlog %.0f jobs/s; limited: %d starts, most in a %s window %d (limit %d), %.1f starts/s",
			round+1, r.AloneRate, r.NextToRate, r.LimitedStarts, opts.RatePeriod, r.MaxInWindow, opts.RateStarts, r.AchievedRate)
		res.Rounds = append(res.Rounds, r)
	}
	var alone, next, rates []float64
	for _, r := range res.Rounds {
		res.MaxInWindow = max(res.MaxInWindow, r.MaxInWindow)
		alone, next, rates = append(alone, r.AloneRate), append(next, r.NextToRate), append(rates, r.AchievedRate)
	}
	slices.Sort(rates)
	res.AchievedRate = rates[(len(rates)-1)/2]
	res.UnlimitedRatio = medianRatio(next, alone)
	if opts.Out != "" {
		if err := writeRateLimitReport(opts.Out, res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// submitNoops submits n no-op jobs of typ in batches of 1,000.
func submitNoops(ctx context.Context, st *store.Store, prefix, typ string, n int) error {
	ps := make([]jobq.SubmitParams, 0, 1000)
	for k := range n {
		ps = append(ps, jobq.SubmitParams{JobKey: fmt.Sprintf("rl-%s-%d", prefix, k), JobType: typ, Params: "{}", RequestHash: "h"})
		if len(ps) == cap(ps) || k == n-1 {
			if _, err := st.JobSubmitMany(ctx, ps); err != nil {
				return err
			}
			ps = ps[:0]
		}
	}
	return nil
}

// drainReplicas starts n in-process replicas at their defaults (both job
// types registered), waits until total jobs succeeded and stops them.
func drainReplicas(ctx context.Context, admin *store.Store, dsn string, n, total int) error {
	for i := range n {
		st, err := store.Open(ctx, dsn, store.PoolConfig{MaxOpen: 40})
		if err != nil {
			return err
		}
		defer st.Close()
		reg := scheduler.NewRegistry()
		jobtypes.Register(reg)
		reg.Register(rateLimitedType, scheduler.HandlerFunc(func(context.Context, *scheduler.Job) error { return nil }))
		s, err := scheduler.New(st, reg, scheduler.Config{Owner: fmt.Sprintf("bench-rl-%d", i+1), Logger: quietLogger()}, st.Server.SkipLocked)
		if err != nil {
			return err
		}
		if err := s.Start(context.WithoutCancel(ctx)); err != nil {
			return err
		}
		defer s.Stop()
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		var done int
		if err := admin.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM job_queue WHERE status = 'SUCCESS'").Scan(&done); err != nil {
			return err
		}
		if done >= total {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("drain: %d of %d jobs done after 10 minutes", done, total)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// typeDrainRate is n / (last finished_at − first started_at) of typ's
// jobs, on the database clock.
func typeDrainRate(ctx context.Context, st *store.Store, typ string, n int) (float64, error) {
	var us int64
	if err := st.DB().QueryRowContext(ctx, `SELECT TIMESTAMPDIFF(MICROSECOND, MIN(started_at), MAX(finished_at))
		FROM job_queue WHERE job_type = ? AND status = 'SUCCESS'`, typ).Scan(&us); err != nil {
		return 0, err
	}
	return float64(n) / (float64(us) / 1e6), nil
}

// typeStarts returns every attempt's started_at of typ's jobs, sorted.
func typeStarts(ctx context.Context, st *store.Store, typ string) ([]time.Time, error) {
	rows, err := st.DB().QueryContext(ctx, `SELECT e.started_at FROM job_execution e JOIN job_queue q ON q.id = e.job_id
		WHERE q.job_type = ? ORDER BY e.started_at`, typ)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []time.Time
	for rows.Next() {
		var t time.Time
		if err := rows.Scan(&t); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

func writeRateLimitReport(dir string, r *RateLimitResult) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "ratelimit.json"), b, 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "ratelimit.md"))
	if err != nil {
		return err
	}
	defer f.Close()
	WriteRateLimitTable(f, r)
	return nil
}

// WriteRateLimitTable prints the rate-limit bench's results as Markdown.
func WriteRateLimitTable(w io.Writer, r *RateLimitResult) {
	fmt.Fprintf(w, "Rate limit %d per %s on %s, %d in-process replicas at their defaults; %d limited and %d unlimited no-op jobs due at once.\n\n",
		r.RateStarts, r.RatePeriod, r.Server, r.Replicas, r.LimitedJobs, r.UnlimitedJobs)
	fmt.Fprintf(w, "| round | limited starts | most in any %s window | achieved starts/s | unlimited alone jobs/s | unlimited next to the limited backlog jobs/s | ratio |\n|---|---|---|---|---|---|---|\n", r.RatePeriod)
	for i, x := range r.Rounds {
		fmt.Fprintf(w, "| %d | %d | %d | %.1f | %.0f | %.0f | %.2f× |\n", i+1, x.LimitedStarts, x.MaxInWindow, x.AchievedRate, x.AloneRate, x.NextToRate, x.NextToRate/x.AloneRate)
	}
	held := "held"
	if r.MaxInWindow > r.RateStarts {
		held = "EXCEEDED"
	}
	fmt.Fprintf(w, "\nMost starts in any window: %d, limit %d (%s); achieved %.1f starts/s (median); unlimited type next to the limited backlog: %.2f× its rate alone (median of per-round ratios).\n",
		r.MaxInWindow, r.RateStarts, held, r.AchievedRate, r.UnlimitedRatio)
}
