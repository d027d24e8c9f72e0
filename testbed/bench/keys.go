package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/jobq/jobq"
)

// The concurrency-key bench (`jobq bench --keys`) measures in one run, on
// KeyOptions.Replicas in-process replicas at their defaults against a fresh
// database, two drains of KeyOptions.Jobs no-op jobs submitted while the
// replicas are stopped: without keys, and spread over KeyOptions.Keys
// concurrency keys of limit 1 (job i on key i mod Keys: with 60,000 jobs on
// 10,000 keys each key holds 6 jobs, one admitted at a time). Each rate is
// jobs / (last finished_at − first started_at) on the database clock;
// rounds are interleaved and the ratio is the median of the per-round
// ratios (target ≥ 0.7).

// KeyOptions configure RunKeys.
type KeyOptions struct {
	DSN string // "" : dbprovider's default (JOBQ_DSN, Docker, a local mariadbd)
	Out string // directory for keys.json and keys.md
	// Jobs per drain. Defaults to 60,000.
	Jobs int
	// Keys is the number of distinct concurrency keys (limit 1). Defaults
	// to 10,000.
	Keys int
	// Replicas is how many in-process replicas drain. Defaults to 3.
	Replicas int
	// Rounds is how many interleaved rounds run. Defaults to 3.
	Rounds int
	Log    io.Writer // progress lines; nil for none
}

// KeyResult is what RunKeys measured.
type KeyResult struct {
	Server   string    `json:"server"`
	Jobs     int       `json:"jobs"`
	Keys     int       `json:"keys"`
	Replicas int       `json:"replicas"`
	Plain    []float64 `json:"plain_rounds_jobs_per_s"`
	Keyed    []float64 `json:"keyed_rounds_jobs_per_s"`
	// PlainRate and KeyedRate are the medians of the rounds; Ratio the
	// median of the per-round keyed/plain ratios.
	PlainRate float64 `json:"plain_jobs_per_s"`
	KeyedRate float64 `json:"keyed_jobs_per_s"`
	Ratio     float64 `json:"keyed_vs_plain"`
	// Drains are every drain's profile, in the order they ran.
	Drains []*KeyDrain `json:"drains"`
}

// RunKeys runs the concurrency-key bench and writes keys.json and keys.md
// into opts.Out.
func RunKeys(ctx context.Context, opts KeyOptions) (*KeyResult, error) {
	opts.Jobs = cmpOr(opts.Jobs, 60000)
	opts.Keys = cmpOr(opts.Keys, 10000)
	opts.Replicas = cmpOr(opts.Replicas, 3)
	opts.Rounds = cmpOr(opts.Rounds, 3)
	logf := func(format string, args ...any) {
		if opts.Log != nil {
			fmt.Fprintf(opts.Log, format+"\n", args...)
		}
	}
	env, st, closeFunc, err := openFreshStore(ctx, opts.DSN)
	if err != nil {
		return nil, err
	}
	defer closeFunc()
	res := &KeyResult{Server: st.Server.Description, Jobs: opts.Jobs, Keys: opts.Keys, Replicas: opts.Replicas}
	for round := range opts.Rounds {
		for _, keyed := range []bool{false, true} {
			if err := env.Reset(ctx); err != nil {
				return nil, err
			}
			if _, err := env.Admin.ExecContext(ctx, "DELETE FROM concurrency_key"); err != nil {
				return nil, err
			}
			ps := make([]jobq.SubmitParams, opts.Jobs)
			for k := range ps {
				ps[k] = jobq.SubmitParams{JobKey: fmt.Sprintf("keys-%d-%t-%d", round, keyed, k), JobType: "noop", Params: "{}", RequestHash: "h"}
				if keyed {
					ps[k].ConcurrencyKey, ps[k].ConcurrencyLimit = fmt.Sprintf("key-%05d", k%opts.Keys), 1
				}
			}
			for k := 0; k < len(ps); k += 1000 {
				if _, err := st.JobSubmitMany(ctx, ps[k:min(k+1000, len(ps))]); err != nil {
					return nil, err
				}
			}
			d, err := keyDrainRun(ctx, st, env.DSN, len(ps), opts.Replicas, keyed)
			if err != nil {
				return nil, fmt.Errorf("keyed=%t: %w", keyed, err)
			}
			res.Drains = append(res.Drains, d)
			rate := d.Rate
			if keyed {
				res.Keyed = append(res.Keyed, rate)
			} else {
				res.Plain = append(res.Plain, rate)
			}
			logf("round %d: %d jobs, keys %t, %d replicas: %.0f jobs/s", round+1, len(ps), keyed, opts.Replicas, rate)
			if opts.Log != nil {
				writeKeyDrain(opts.Log, fmt.Sprintf("round %d keys %t", round+1, keyed), d, len(ps), 8)
			}
		}
	}
	res.PlainRate, res.KeyedRate = median(res.Plain), median(res.Keyed)
	res.Ratio = medianRatio(res.Keyed, res.Plain)
	if opts.Out != "" {
		if err := writeKeyReport(opts.Out, res); err != nil {
			return res, err
		}
	}
	return res, nil
}

func cmpOr(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

func writeKeyReport(dir string, r *KeyResult) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "keys.json"), b, 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "keys.md"))
	if err != nil {
		return err
	}
	defer f.Close()
	WriteKeyTable(f, r)
	return nil
}

// WriteKeyTable prints the concurrency-key bench's results as Markdown.
func WriteKeyTable(w io.Writer, r *KeyResult) {
	fmt.Fprintf(w, "Concurrency keys on %s, %d in-process replicas at their defaults, %d no-op jobs per drain.\n\n", r.Server, r.Replicas, r.Jobs)
	fmt.Fprintf(w, "| drain | rounds (jobs/s) | median jobs/s |\n|---|---|---|\n")
	fmt.Fprintf(w, "| no keys | %s | %.0f |\n", roundList(r.Plain), r.PlainRate)
	fmt.Fprintf(w, "| %d keys, limit 1 | %s | %.0f |\n\n", r.Keys, roundList(r.Keyed), r.KeyedRate)
	ok := "met"
	if r.Ratio < 0.7 {
		ok = "MISSED"
	}
	fmt.Fprintf(w, "keyed / no keys (median of per-round ratios): %.2f (target ≥ 0.7: %s)\n\n", r.Ratio, ok)
	for i, d := range r.Drains {
		writeKeyDrain(w, fmt.Sprintf("Round %d, keys %t", i/2+1, d.Keyed), d, r.Jobs, 0)
	}
}

func roundList(xs []float64) string {
	out := ""
	for i, x := range xs {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%.0f", x)
	}
	return out
}
