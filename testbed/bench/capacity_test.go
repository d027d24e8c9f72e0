package bench

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	for in, want := range map[string]float64{"20/m": 20.0 / 60, "5/s": 5, "360/h": 0.1, "2.5": 2.5} {
		if got, err := ParseRate(in); err != nil || math.Abs(got-want) > 1e-12 {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0/m", "-1/s", "3/d", "x/m"} {
		if _, err := ParseRate(bad); err == nil {
			t.Errorf("ParseRate(%q): no error", bad)
		}
	}
}

func TestPoissonQuantile(t *testing.T) {
	// Poisson(20): P(N ≤ 34) = 0.9986, P(N ≤ 35) = 0.9993.
	if got := PoissonQuantile(20, 0.999); got != 35 {
		t.Fatalf("PoissonQuantile(20, 0.999) = %d, want 35", got)
	}
	if got := PoissonQuantile(0.5, 0.999); got != 4 {
		t.Fatalf("PoissonQuantile(0.5, 0.999) = %d, want 4", got)
	}
	if got := PoissonQuantile(10000, 0.999); got < 10200 || got > 10300 {
		t.Fatalf("PoissonQuantile(10000) = %d, want about 10,233", got)
	}
}

// 60 s jobs at 20/min: 20 in flight on average, 35 workers (99.9th
// percentile), 2 replicas (HA) each able to carry all 35; the database's
// limit from a made-up no-op drain of 1,000 jobs/s at 10 statements/job.
func TestPlanCapacity(t *testing.T) {
	o := CapacityOptions{JobDuration: time.Minute, Rate: 20.0 / 60, DBLatency: 2 * time.Millisecond, WorkersPerReplica: 200, MinReplicas: 2}
	r := &CapacityResult{SaturationJobsPerS: 1000, DrainStatementsPerJob: 10, StatementsPerJob: 10, ServerCPUSPerJob: 0.0005, MeasuredPickupP99: 12}
	PlanCapacity(o, r)
	if math.Abs(r.Concurrency-20) > 1e-9 || r.Workers != 35 || r.Replicas != 2 || r.WorkersPerReplica != 35 {
		t.Fatalf("plan %+v", r)
	}
	if r.PredictedP99 != 12 || math.Abs(r.DBCPUShare-20.0/60*0.0005) > 1e-12 {
		t.Fatalf("p99 %v, cpu %v", r.PredictedP99, r.DBCPUShare)
	}
	// Fixed load: 2 replicas × (3 heartbeats per 30 s lease + 1 probe/s +
	// 1 rescue pass per 10 s) = 2.4 statements/s.
	if want := 20.0/60*10 + 2.4; math.Abs(r.DBLoadQPS-want) > 1e-9 {
		t.Fatalf("db load %v, want %v", r.DBLoadQPS, want)
	}
	if want := (10000 - 2.4) / 10; math.Abs(r.SaturationRate-want) > 1e-9 {
		t.Fatalf("saturation %v, want %v", r.SaturationRate, want)
	}
	var b strings.Builder
	WriteCapacity(&b, r)
	for _, s := range []string{"**Answer: 2 replicas × 35 workers**", "expected pickup p99 | 12.0 ms", "Assumptions:", "99.9th percentile"} {
		if !strings.Contains(b.String(), s) {
			t.Fatalf("report lacks %q:\n%s", s, b.String())
		}
	}
	// 600 jobs/s of 1 s jobs with 200 workers a replica: 4 replicas.
	o = CapacityOptions{JobDuration: time.Second, Rate: 600, WorkersPerReplica: 200, MinReplicas: 2}
	r = &CapacityResult{SaturationJobsPerS: 1000, DrainStatementsPerJob: 10, StatementsPerJob: 10, ServerCPUSPerJob: -1}
	PlanCapacity(o, r)
	if r.Workers < 640 || r.Workers > 700 || r.Replicas != 4 || r.DBCPUShare != -1 {
		t.Fatalf("plan %+v", r)
	}
}

// capacity.json and capacity.png are written; PLOT_OUT keeps them.
func TestWriteCapacityFiles(t *testing.T) {
	o := CapacityOptions{JobDuration: time.Minute, Rate: 20.0 / 60, WorkersPerReplica: 200, MinReplicas: 2}
	r := &CapacityResult{SaturationJobsPerS: 5000, DrainStatementsPerJob: 0.1, StatementsPerJob: 6, ServerCPUSPerJob: 0.0001, MeasuredPickupP99: 40}
	PlanCapacity(o, r)
	dir := t.TempDir()
	if d := os.Getenv("PLOT_OUT"); d != "" {
		dir = d
	}
	if err := WriteCapacityFiles(dir, r); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"capacity.json", "capacity.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() < 100 {
			t.Fatalf("%s: %v", f, err)
		}
	}
}
