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
