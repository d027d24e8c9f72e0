package bench

import (
	"math"
	"strings"
	"testing"
)

// The replica scan's ratios are per round: each count against that round's
// fastest count, the defaults against the best flags of the same round.
func TestReplicaScanRatiosAndTargets(t *testing.T) {
	dp := func(name string, replicas int, rounds ...float64) DrainPoint {
		d := DrainPoint{Name: name, Rounds: rounds, Throughput: median(rounds)}
		d.Spec.Replicas = replicas
		return d
	}
	tr := &ThroughputResult{Rounds: 3,
		Defaults:  dp("jobq defaults, 3 replicas", 3, 9000, 10000, 12000),
		BestFlags: []DrainPoint{dp("jobq, 1 replica(s)", 1, 10000, 10000, 10000)},
	}
	tr.BestFlags[0].VsCeiling = 0.9
	tr.finishScan([]DrainPoint{
		dp("jobq defaults, 1 replica(s)", 1, 9500, 9000, 8000),
		dp("jobq defaults, 2 replica(s)", 2, 9800, 9900, 11000),
		dp("jobq defaults, 4 replica(s)", 4, 9900, 10200, 11500),
		dp("jobq defaults, 8 replica(s)", 8, 8000, 10100, 11900),
	})
	var counts []int
	for _, p := range tr.ReplicaScan {
		counts = append(counts, p.Replicas)
	}
	if len(counts) != 5 || counts[0] != 1 || counts[2] != 3 || counts[4] != 8 {
		t.Fatalf("scan counts %v, want 1 2 3 4 8", counts)
	}
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9 }
	// 8 replicas: 8000/9900, 10100/10200, 11900/12000 → median 10100/10200.
	if got := tr.ReplicaScan[4].VsBestCount; !near(got, 10100.0/10200) {
		t.Errorf("8 replicas vs best count = %v, want %v", got, 10100.0/10200)
	}
	if !near(tr.DefaultsVsBestFlags, 1.0) || !near(tr.OneReplicaVsBestFlags, 0.9) {
		t.Errorf("vs best flags: 3 replicas %v, 1 replica %v; want 1.00 and 0.90", tr.DefaultsVsBestFlags, tr.OneReplicaVsBestFlags)
	}
	byName := map[string]Target{}
	for _, tg := range ThroughputTargets(tr) {
		byName[tg.Name] = tg
	}
	for name, met := range map[string]bool{
		"jobq defaults (3 replicas) vs best flags":             true,
		"jobq defaults (1 replica) vs best flags":              true,
		"jobq defaults, 8 replicas, vs the best replica count": true,
	} {
		if tg, ok := byName[name]; !ok || !tg.Measured || tg.Met != met {
			t.Errorf("target %q = %+v (found %v), want measured, met %v", name, tg, ok, met)
		}
	}
	var b strings.Builder
	WriteThroughput(&b, tr)
	if !strings.Contains(b.String(), "| 8 | 10100 (8000–11900) | 8000 / 10100 / 11900 | 0.99× |") {
		t.Errorf("report lacks the 8-replica row:\n%s", b.String())
	}
}

// Narrowed to the replica scan (--replica-counts): the report is the scan
// alone and its one target is the last count against the round's best.
func TestReplicaCountsReport(t *testing.T) {
	sp := func(replicas int, rounds ...float64) ScanPoint {
		p := ScanPoint{Replicas: replicas}
		p.Rounds, p.Throughput = rounds, median(rounds)
		return p
	}
	tr := &ThroughputResult{Rounds: 3, ReplicaScan: []ScanPoint{sp(1, 9000, 10000, 8000), sp(3, 10000, 9000, 9500), sp(8, 9000, 6000, 9500)}}
	scanRatios(tr.ReplicaScan)
	// 8 replicas: 9000/10000, 6000/10000, 9500/9500 → median 0.9.
	if got := tr.ReplicaScan[2].VsBestCount; math.Abs(got-0.9) > 1e-9 {
		t.Errorf("8 replicas vs best count = %v, want 0.9", got)
	}
	ts := ThroughputTargets(tr)
	if len(ts) != 1 || ts[0].Name != "jobq defaults, 8 replicas, vs the best replica count" || !ts[0].Met {
		t.Errorf("targets %+v, want the 8-replica one, met", ts)
	}
	var b strings.Builder
	WriteThroughput(&b, tr)
	if s := b.String(); !strings.Contains(s, "| 8 | 9000 (6000–9500) | 9000 / 6000 / 9500 | 0.90× |") || strings.Contains(s, "ceiling") {
		t.Errorf("narrowed report:\n%s", s)
	}
}
