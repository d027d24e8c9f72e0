package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakePeerMain stands in for testbed/bench/riverpeer: the same flags, exit
// status and output lines, no River and no PostgreSQL. The URL decides
// what it does: "…/nopg" answers like a peer without PostgreSQL, "…/fail"
// fails otherwise, anything else runs.
const fakePeerMain = `package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	url := flag.String("database-url", os.Getenv("JOBQ_RIVER_URL"), "")
	check := flag.Bool("check", false, "")
	jobs := flag.Int("jobs", 0, "")
	flag.String("warmup", "", "")
	flag.String("window", "", "")
	flag.Parse()
	switch {
	case strings.HasSuffix(*url, "/nopg"):
		fmt.Fprintln(os.Stderr, "riverpeer: PostgreSQL not reachable at postgres://postgres@127.0.0.1:1/nopg: dial error: connection refused")
		os.Exit(3)
	case strings.HasSuffix(*url, "/fail"):
		fmt.Fprintln(os.Stderr, "riverpeer: create database fail: permission denied")
		os.Exit(1)
	case *check:
		fmt.Println(` + "`" + `{"postgres":"15.20"}` + "`" + `)
	default:
		fmt.Println("a log line on stdout")
		fmt.Printf(` + "`" + `{"peer":"river","river_version":"v0.51.2","driver":"riverpgxv5","postgres":"15.20","jobs":%d,"workers":2000,"insert_batch":5000,"insert_jobs_per_s":7000,"seconds":3,"jobs_per_s":20000,"window_jobs_per_s":21000,"window_seconds":2.5,"window_jobs":52500}` + "`" + `+"\n", *jobs)
	}
}
`

// writeModule writes a one-file main module into a new directory.
func writeModule(t *testing.T, main string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module fakepeer\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRiverPeerRunsAndParses builds the stand-in peer through
// prepareRiverPeer, as the bench builds the real one, and reads one round.
func TestRiverPeerRunsAndParses(t *testing.T) {
	dir := writeModule(t, fakePeerMain)
	p, skip := prepareRiverPeer(context.Background(), dir, "postgres://postgres@127.0.0.1:5432/ok", t.TempDir())
	if p == nil {
		t.Fatalf("prepareRiverPeer skipped: %s", skip)
	}
	r, err := p.run(context.Background(), 1234, WarmupDefault, WindowDefault)
	if err != nil {
		t.Fatal(err)
	}
	if r.Jobs != 1234 || r.WindowJobsPerS != 21000 || r.JobsPerS != 20000 || r.RiverVersion != "v0.51.2" || r.InsertPerS != 7000 {
		t.Fatalf("run = %+v, want 1234 jobs, 21000 window jobs/s, 20000 drain jobs/s, v0.51.2, 7000 inserts/s", r)
	}
	var rp RiverPoint
	rp.add(r)
	r.WindowJobsPerS, r.JobsPerS = 15000, 16000
	rp.add(r)
	r.WindowJobsPerS, r.JobsPerS = 18000, 17000
	rp.add(r)
	rp.finish()
	if rp.Throughput != 18000 || rp.DrainThroughput != 17000 || len(rp.Rounds) != 3 {
		t.Fatalf("point = %+v, want medians 18000 (window) and 17000 (drain) over 3 rounds", rp)
	}
}

// TestRiverPeerSkipLines checks the one line printed for each reason the
// peer cannot run; none needs PostgreSQL.
func TestRiverPeerSkipLines(t *testing.T) {
	ctx := context.Background()
	peer := writeModule(t, fakePeerMain)
	broken := writeModule(t, "package main\n\nfunc main() { undefined() }\n")
	missing := filepath.Join(t.TempDir(), "riverpeer")
	cases := []struct {
		name, dir, url string
		noGo           bool
		want           string
	}{
		{name: "no go toolchain", dir: peer, url: "postgres://postgres@127.0.0.1:5432/ok", noGo: true,
			want: "river peer skipped: no go toolchain on PATH to build " + peer},
		{name: "no module", dir: missing, url: "postgres://postgres@127.0.0.1:5432/ok",
			want: "river peer skipped: " + filepath.Join(missing, "go.mod") + " not found (run from the repository root or pass --river-dir)"},
		{name: "build fails", dir: broken, url: "postgres://postgres@127.0.0.1:5432/ok",
			want: "river peer skipped: go build in " + broken + " failed: ./main.go:3:15: undefined: undefined"},
		{name: "no PostgreSQL", dir: peer, url: "postgres://postgres@127.0.0.1:1/nopg",
			want: "river peer skipped: PostgreSQL not reachable at postgres://postgres@127.0.0.1:1/nopg: dial error: connection refused"},
		{name: "other failure, password redacted", dir: peer, url: "postgres://postgres:s3cret@127.0.0.1:5432/fail",
			want: "river peer skipped: the peer's check at postgres://postgres:xxxxx@127.0.0.1:5432/fail failed: create database fail: permission denied"},
	}
	goDir := ""
	if p, err := exec.LookPath("go"); err == nil {
		goDir = filepath.Dir(p)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.noGo {
				t.Setenv("PATH", t.TempDir())
			} else {
				t.Setenv("PATH", goDir+string(os.PathListSeparator)+os.Getenv("PATH"))
			}
			p, got := prepareRiverPeer(ctx, tc.dir, tc.url, t.TempDir())
			if p != nil || got != tc.want {
				t.Fatalf("prepareRiverPeer = %v, %q\nwant nil, %q", p, got, tc.want)
			}
			if strings.Contains(got, "s3cret") {
				t.Fatalf("the skip line shows the password: %q", got)
			}
		})
	}
}

func TestParseRiverPeerLine(t *testing.T) {
	good := `{"peer":"river","river_version":"v0.51.2","jobs":60000,"workers":2000,"jobs_per_s":19000.5,"window_jobs_per_s":20000}`
	cases := []struct {
		name, out, wantErr string
		wantJobsPerS       float64
	}{
		{name: "after other lines", out: "starting\n" + good + "\n\n", wantJobsPerS: 19000.5},
		{name: "last object wins", out: `{"peer":"river","jobs":1,"jobs_per_s":1}` + "\n" + good + "\n", wantJobsPerS: 19000.5},
		{name: "no result", out: "riverpeer: something\n", wantErr: "no result line"},
		{name: "malformed", out: `{"peer":"river",` + "\n", wantErr: "result line"},
		{name: "not the River peer", out: `{"postgres":"15.20"}` + "\n", wantErr: `want peer "river"`},
		{name: "no jobs", out: `{"peer":"river","jobs":0,"jobs_per_s":0}` + "\n", wantErr: "jobs and jobs_per_s > 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseRiverPeerLine([]byte(tc.out))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || r.JobsPerS != tc.wantJobsPerS || r.Workers != 2000 {
				t.Fatalf("= %+v, %v; want jobs_per_s %v, 2000 workers", r, err, tc.wantJobsPerS)
			}
		})
	}
}

// TestRiverTargetsAndReport checks the River targets and the report
// section, measured and skipped.
func TestRiverTargetsAndReport(t *testing.T) {
	tr := &ThroughputResult{Rounds: 3,
		Defaults:  DrainPoint{Name: "jobq defaults, 3 replicas", Flags: "(defaults)", Rounds: []float64{9000, 10000, 11000}, Throughput: 10000, VsCeiling: 0.6, VsRiver: 0.5},
		BestFlags: []DrainPoint{{Name: "jobq, 1 replica(s)", Flags: "--workers 2000", Rounds: []float64{24000}, Throughput: 24000, VsCeiling: 0.9, VsRiver: 1.2}},
		River: &RiverPoint{Name: "River", Version: "v0.51.2", Workers: 2000, Rounds: []float64{19000, 20000, 21000}, DrainRounds: []float64{18000, 18500, 19000},
			InsertRounds: []float64{7000, 7100, 7200}, Throughput: 20000, DrainThroughput: 18500},
	}
	byName := map[string]Target{}
	for _, tg := range ThroughputTargets(tr) {
		byName[strings.SplitN(tg.Name, " (", 2)[0]+" | "+tg.Goal] = tg
	}
	def, best := byName["jobq defaults | ≥ 1.00×"], byName["jobq best flags | ≥ 1.15×"]
	if !def.Measured || def.Met || def.Value != 0.5 || !best.Measured || !best.Met || best.Value != 1.2 {
		t.Fatalf("River targets: defaults %+v, best flags %+v; want 0.50× missed and 1.20× met", def, best)
	}
	var b strings.Builder
	WriteThroughput(&b, tr)
	for _, want := range []string{"| River | 20000 (19000–21000) | 19000 / 20000 / 21000 | 1.00× |",
		"| jobq defaults, 3 replicas (defaults) | 10000 (9000–11000) | 9000 / 10000 / 11000 | 0.50× |",
		"| River, its own figure (start to last completion) | 18500 (18000–19000) |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}

	tr.River = &RiverPoint{Name: "River", Skipped: "river peer skipped: no go toolchain on PATH to build testbed/bench/riverpeer"}
	tr.Defaults.VsRiver, tr.BestFlags[0].VsRiver = 0, 0
	for _, tg := range ThroughputTargets(tr) {
		if strings.Contains(tg.Name, "vs River") && tg.Measured {
			t.Errorf("target %q measured with the peer skipped", tg.Name)
		}
	}
	b.Reset()
	WriteThroughput(&b, tr)
	if !strings.Contains(b.String(), "### jobq against River\n\nriver peer skipped: no go toolchain on PATH") {
		t.Errorf("report lacks the skip line:\n%s", b.String())
	}
}

// TestThroughputPickupIdleTargets checks the pickup and idle targets the
// throughput report adds: measured from its latency and idle points, "not
// run" without them (--drain-only).
func TestThroughputPickupIdleTargets(t *testing.T) {
	none := pickupIdleTargets(&Result{})
	if len(none) != 3 || none[0].Measured || none[1].Measured || none[2].Measured {
		t.Fatalf("without points = %+v, want 3 targets, none measured", none)
	}
	res := &Result{Latency: []LatencyPoint{{Strategy: StrategySkip, Rate: 200, Pickup: Percentiles{P50: 1.5, P99: 60}}},
		Idle: []IdlePoint{{Strategy: StrategySkip, QueriesPerSecond: 1.1}}}
	got := pickupIdleTargets(res)
	if len(got) != 3 || !got[0].Met || got[1].Met || !got[1].Measured || !got[2].Met {
		t.Fatalf("= %+v, want p50 met, p99 (60 ms) missed, idle met", got)
	}
}
