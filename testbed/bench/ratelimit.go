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
//     its drain rate, against the round's rate alone;
//   - per key: HotJobs no-op jobs on one rate key and ColdJobs on each of
//     RateKeys−1 others, of a type limited to RateStarts per RatePeriod for
//     each key, all due at once (the hot key's backlog ahead in priority).
//     For each key: the most starts in any window of the period, against
//     the limit, its achieved rate and when its last job started (from the
//     phase's first start): the cold keys' last start against the hot
//     key's shows whether a full key held the others up.

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
	// RateKeys is how many rate keys the per-key phase spreads its jobs
	// over (defaults to 4): HotJobs on the first (defaults to 800),
	// ColdJobs on each other (defaults to 200).
	RateKeys int
	HotJobs  int
	ColdJobs int
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
	// RateKeys, HotJobs and ColdJobs shape the per-key phase;
	// KeyMaxInWindow is the most starts of one key in any window over
	// every key and round.
	RateKeys       int `json:"rate_keys"`
	HotJobs        int `json:"hot_jobs"`
	ColdJobs       int `json:"cold_jobs"`
	KeyMaxInWindow int `json:"key_max_in_window"`
}

// KeyFigures is one rate key's figures in a round's per-key phase.
type KeyFigures struct {
	Key          string  `json:"key"`
	Starts       int     `json:"starts"`
	MaxInWindow  int     `json:"max_in_window"`
	AchievedRate float64 `json:"achieved_starts_per_s"`
	// LastStart is when the key's last job started, in seconds from the
	// phase's first start.
	LastStart float64 `json:"last_start_s"`
}

// RateLimitRound is one round's figures.
type RateLimitRound struct {
	AloneRate     float64 `json:"alone_jobs_per_s"`
	NextToRate    float64 `json:"next_to_limited_jobs_per_s"`
	MaxInWindow   int     `json:"max_in_window"`
	AchievedRate  float64 `json:"achieved_starts_per_s"`
	LimitedStarts int     `json:"limited_starts"`
	// Keys are the per-key phase's figures, the hot key first.
	Keys []KeyFigures `json:"keys"`
}

// The bench's job types: all no-ops.
const (
	rateLimitedType   = "noop-limited"
	rateUnlimitedType = "noop"
	rateKeyedType     = "noop-keyed"
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
	opts.RateKeys = cmp.Or(opts.RateKeys, 4)
	opts.HotJobs = cmp.Or(opts.HotJobs, 800)
	opts.ColdJobs = cmp.Or(opts.ColdJobs, 200)
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
		RatePeriod: opts.RatePeriod, LimitedJobs: opts.LimitedJobs, UnlimitedJobs: opts.UnlimitedJobs,
		RateKeys: opts.RateKeys, HotJobs: opts.HotJobs, ColdJobs: opts.ColdJobs}
	reset := func() error {
		if err := env.Reset(ctx); err != nil {
			return err
		}
		for _, q := range []string{"DELETE FROM job_type_control", "DELETE FROM rate_start", "DELETE FROM rate_hold"} {
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
		starts, err := typeStarts(ctx, st, rateLimitedType, "")
		if err != nil {
			return nil, err
		}
		r.LimitedStarts, r.MaxInWindow = len(starts), checker.MostInWindow(starts, opts.RatePeriod)
		r.AchievedRate = achievedRate(starts)
		logf("round %d: unlimited alone %.0f jobs/s, next to the limited backlog %.0f jobs/s; limited: %d starts, most in a %s window %d (limit %d), %.1f starts/s",
			round+1, r.AloneRate, r.NextToRate, r.LimitedStarts, opts.RatePeriod, r.MaxInWindow, opts.RateStarts, r.AchievedRate)
		// Per key.
		if err := reset(); err != nil {
			return nil, err
		}
		if r.Keys, err = runPerKey(ctx, st, env.DSN, opts, round); err != nil {
			return nil, err
		}
		for _, k := range r.Keys {
			res.KeyMaxInWindow = max(res.KeyMaxInWindow, k.MaxInWindow)
			logf("round %d: per key %s: %d starts, most in a %s window %d (limit %d), %.1f starts/s, last start at %.2f s",
				round+1, k.Key, k.Starts, opts.RatePeriod, k.MaxInWindow, opts.RateStarts, k.AchievedRate, k.LastStart)
		}
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

// runPerKey is one round's per-key phase: the keyed backlog submitted
// (the hot key's at a higher priority, so it is ahead of the others in
// every claim), drained by the replicas, and each key's figures.
func runPerKey(ctx context.Context, st *store.Store, dsn string, opts RateLimitOptions, round int) ([]KeyFigures, error) {
	if _, err := st.TypeSetRateLimit(ctx, rateKeyedType, jobq.RateLimit{Starts: opts.RateStarts, Period: opts.RatePeriod, PerKey: true}); err != nil {
		return nil, err
	}
	keys := make([]string, opts.RateKeys)
	total := 0
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%d", i)
		n, priority := opts.ColdJobs, 0
		if i == 0 {
			keys[i], n, priority = "hot", opts.HotJobs, 10
		}
		if err := submitJobs(ctx, st, fmt.Sprintf("k%d-%s", round, keys[i]), rateKeyedType, n, func(p *jobq.SubmitParams) {
			p.RateKey, p.Priority = keys[i], priority
		}); err != nil {
			return nil, err
		}
		total += n
	}
	if err := drainReplicas(ctx, st, dsn, opts.Replicas, total); err != nil {
		return nil, err
	}
	all, err := typeStarts(ctx, st, rateKeyedType, "")
	if err != nil || len(all) == 0 {
		return nil, err
	}
	out := make([]KeyFigures, len(keys))
	for i, k := range keys {
		starts, err := typeStarts(ctx, st, rateKeyedType, k)
		if err != nil {
			return nil, err
		}
		out[i] = KeyFigures{Key: k, Starts: len(starts), MaxInWindow: checker.MostInWindow(starts, opts.RatePeriod)}
		out[i].AchievedRate = achievedRate(starts)
		if len(starts) > 0 {
			out[i].LastStart = starts[len(starts)-1].Sub(all[0]).Seconds()
		}
	}
	return out, nil
}

// submitNoops submits n no-op jobs of typ in batches of 1,000.
func submitNoops(ctx context.Context, st *store.Store, prefix, typ string, n int) error {
	return submitJobs(ctx, st, prefix, typ, n, nil)
}

// submitJobs submits n no-op jobs of typ in batches of 1,000, each shaped
// by shapeFunc (nil: as is).
func submitJobs(ctx context.Context, st *store.Store, prefix, typ string, n int, shapeFunc func(*jobq.SubmitParams)) error {
	ps := make([]jobq.SubmitParams, 0, 1000)
	for k := range n {
		p := jobq.SubmitParams{JobKey: fmt.Sprintf("rl-%s-%d", prefix, k), JobType: typ, Params: "{}", RequestHash: "h"}
		if shapeFunc != nil {
			shapeFunc(&p)
		}
		ps = append(ps, p)
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
		for _, typ := range []string{rateLimitedType, rateKeyedType} {
			reg.Register(typ, scheduler.HandlerFunc(func(context.Context, *scheduler.Job) error { return nil }))
		}
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

// typeStarts returns every attempt's started_at of typ's jobs (of those
// with rate key rateKey, unless it is ""), sorted.
func typeStarts(ctx context.Context, st *store.Store, typ, rateKey string) ([]time.Time, error) {
	rows, err := st.DB().QueryContext(ctx, `SELECT e.started_at FROM job_attempt e JOIN job_queue q ON q.id = e.job_id
		WHERE q.job_type = ? AND (? = '' OR q.rate_key = ?) ORDER BY e.started_at`, typ, rateKey, rateKey)
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
	fmt.Fprintf(w, "\nPer key: the same limit for each of %d rate keys of one type; %d jobs on key hot (ahead in priority), %d on each other key, due at once.\n\n",
		r.RateKeys, r.HotJobs, r.ColdJobs)
	fmt.Fprintf(w, "| round | key | starts | most in any %s window | achieved starts/s | last start (s from the first) |\n|---|---|---|---|---|---|\n", r.RatePeriod)
	for i, x := range r.Rounds {
		for _, k := range x.Keys {
			fmt.Fprintf(w, "| %d | %s | %d | %d | %.1f | %.2f |\n", i+1, k.Key, k.Starts, k.MaxInWindow, k.AchievedRate, k.LastStart)
		}
	}
	held = "held"
	if r.KeyMaxInWindow > r.RateStarts {
		held = "EXCEEDED"
	}
	fmt.Fprintf(w, "\nMost starts of one key in any window: %d, limit %d per key (%s).\n", r.KeyMaxInWindow, r.RateStarts, held)
}

// achievedRate is starts/s over starts (sorted): starts − 1 over the span
// from the first to the last; 0 for fewer than two starts or a span of 0
// (all in one microsecond), which has no rate to report.
func achievedRate(starts []time.Time) float64 {
	if len(starts) < 2 {
		return 0
	}
	span := starts[len(starts)-1].Sub(starts[0]).Seconds()
	if span <= 0 {
		return 0
	}
	return float64(len(starts)-1) / span
}
