package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The River peer (issue 34): River (github.com/riverqueue/river) drains the
// same no-op backlog on the local PostgreSQL in the same interleaved rounds
// as jobq's throughput points, so `jobq bench --throughput` compares the two
// in one command. River and pgx live in their own module,
// testbed/bench/riverpeer, which the bench builds with `go build` in that
// directory and runs once per round; this module imports neither.

// Defaults of the River peer's options.
const (
	RiverDirDefault = "testbed/bench/riverpeer"
	RiverURLDefault = "postgres://postgres@127.0.0.1:5432/jobq_river_bench"
)

// riverPeerExitNoPostgres is the peer's exit status when PostgreSQL does
// not answer (riverpeer.ExitNoPostgres).
const riverPeerExitNoPostgres = 3

// riverSkipPrefix starts the one line printed when the peer cannot run.
const riverSkipPrefix = "river peer skipped: "

// RiverPeerRun is the JSON line one peer run prints (riverpeer.Result).
type RiverPeerRun struct {
	Peer         string  `json:"peer"`
	RiverVersion string  `json:"river_version"`
	Driver       string  `json:"driver"`
	Postgres     string  `json:"postgres"`
	Jobs         int     `json:"jobs"`
	Workers      int     `json:"workers"`
	InsertBatch  int     `json:"insert_batch"`
	InsertPerS   float64 `json:"insert_jobs_per_s"`
	// Seconds and JobsPerS are River's own figure: client start to last
	// completion. WindowJobsPerS is jobq's window (Options.Warmup after the
	// first completion, for Options.Window or until 90 % of the backlog).
	Seconds        float64 `json:"seconds"`
	JobsPerS       float64 `json:"jobs_per_s"`
	WindowJobsPerS float64 `json:"window_jobs_per_s"`
	WindowSeconds  float64 `json:"window_seconds"`
	WindowJobs     int     `json:"window_jobs"`
}

// RiverPoint is the River peer over the rounds.
type RiverPoint struct {
	Name     string `json:"name"`
	Version  string `json:"river_version,omitempty"`
	Postgres string `json:"postgres,omitempty"`
	Workers  int    `json:"workers,omitempty"`
	// Rounds are each round's WindowJobsPerS (jobq's method: what the
	// ratios use), DrainRounds River's own start-to-last-completion jobs/s,
	// InsertRounds the InsertMany jobs/s. Throughput and DrainThroughput
	// are the medians.
	Rounds          []float64 `json:"rounds_jobs_per_s,omitempty"`
	DrainRounds     []float64 `json:"rounds_drain_jobs_per_s,omitempty"`
	InsertRounds    []float64 `json:"rounds_insert_jobs_per_s,omitempty"`
	Throughput      float64   `json:"jobs_per_s"`
	DrainThroughput float64   `json:"drain_jobs_per_s"`
	// Skipped says why the peer was not measured (empty when it was).
	Skipped string `json:"skipped,omitempty"`
}

// riverPeer runs the built peer binary.
type riverPeer struct {
	bin, url string
}

// redactURL is a database URL without its password.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// prepareRiverPeer builds the peer in dir into outDir and checks that
// PostgreSQL answers at dbURL. When the peer cannot run it returns nil and
// the one line to print, starting "river peer skipped: ".
func prepareRiverPeer(ctx context.Context, dir, dbURL, outDir string) (*riverPeer, string) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, riverSkipPrefix + "no go toolchain on PATH to build " + dir
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return nil, riverSkipPrefix + filepath.Join(dir, "go.mod") + " not found (run from the repository root or pass --river-dir)"
	}
	out, err := filepath.Abs(filepath.Join(outDir, "jobq-riverpeer"))
	if err != nil {
		return nil, riverSkipPrefix + err.Error()
	}
	build := exec.CommandContext(ctx, goBin, "build", "-o", out, ".")
	build.Dir = dir
	if b, err := build.CombinedOutput(); err != nil {
		return nil, riverSkipPrefix + "go build in " + dir + " failed: " + lastLine(b, err)
	}
	p := &riverPeer{bin: out, url: dbURL}
	if skip := p.check(ctx); skip != "" {
		return nil, skip
	}
	return p, ""
}

// check runs the peer's -check; a peer that cannot reach PostgreSQL (or
// fails otherwise) gives the skip line.
func (p *riverPeer) check(ctx context.Context) string {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(cctx, p.bin, "-check")
	cmd.Env = p.env()
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == riverPeerExitNoPostgres {
			return riverSkipPrefix + strings.TrimPrefix(lastLine(stderr.Bytes(), err), "riverpeer: ")
		}
		return riverSkipPrefix + "the peer's check at " + redactURL(p.url) + " failed: " + strings.TrimPrefix(lastLine(stderr.Bytes(), err), "riverpeer: ")
	}
	return ""
}

// env is the peer's environment: this process's, with the database URL in
// JOBQ_RIVER_URL rather than on the command line, where ps and
// /proc/*/cmdline would show its password.
func (p *riverPeer) env() []string {
	return append(os.Environ(), "JOBQ_RIVER_URL="+p.url)
}

// run drains jobs no-op River jobs and returns the peer's line.
func (p *riverPeer) run(ctx context.Context, jobs int, warmup, window time.Duration) (RiverPeerRun, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, p.bin, "-jobs", fmt.Sprint(jobs),
		"-warmup", warmup.String(), "-window", window.String())
	cmd.Env = p.env()
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return RiverPeerRun{}, fmt.Errorf("river peer: %s", lastLine(stderr.Bytes(), err))
	}
	return ParseRiverPeerLine(stdout.Bytes())
}

// ParseRiverPeerLine reads the peer's result: the last line of out that is
// a JSON object. It is an error when there is none, when it is not the
// River peer's or when it completed no job.
func ParseRiverPeerLine(out []byte) (RiverPeerRun, error) {
	var line []byte
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if l := bytes.TrimSpace(sc.Bytes()); len(l) > 0 && l[0] == '{' {
			line = append(line[:0], l...)
		}
	}
	var r RiverPeerRun
	if line == nil {
		return r, fmt.Errorf("river peer: no result line in its output %q", truncate(string(out), 200))
	}
	if err := json.Unmarshal(line, &r); err != nil {
		return r, fmt.Errorf("river peer: result line %q: %w", truncate(string(line), 200), err)
	}
	if r.Peer != "river" || r.Jobs <= 0 || r.JobsPerS <= 0 {
		return r, fmt.Errorf("river peer: result line %q: want peer \"river\" with jobs and jobs_per_s > 0", truncate(string(line), 200))
	}
	return r, nil
}

// lastLine is the last non-empty line of b, or err's text.
func lastLine(b []byte, err error) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if l := strings.TrimSpace(lines[len(lines)-1]); l != "" {
		return l
	}
	return err.Error()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// add records one round of the peer.
func (rp *RiverPoint) add(r RiverPeerRun) {
	rp.Version, rp.Postgres, rp.Workers = r.RiverVersion, r.Postgres, r.Workers
	rp.Rounds = append(rp.Rounds, r.WindowJobsPerS)
	rp.DrainRounds = append(rp.DrainRounds, r.JobsPerS)
	rp.InsertRounds = append(rp.InsertRounds, r.InsertPerS)
}

// finish sets the medians.
func (rp *RiverPoint) finish() {
	rp.Throughput, rp.DrainThroughput = median(rp.Rounds), median(rp.DrainRounds)
}
