package bench

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/prometheus/procfs"
)

// Diagnosis is where a throughput point's time went, measured over the whole
// run of the point (runner start to stop, after seeding), for the report's
// "Where the time goes" and "Missed targets" sections.
type Diagnosis struct {
	// BenchCPUCores is this process's CPU time (user+sys from
	// /proc/self/stat) over the run divided by its wall time: the runners, in-process replicas
	// included (not the replicas of --procs).
	BenchCPUCores float64 `json:"bench_cpu_cores"`
	// ServerCPUCores is the same for the database server when exactly one
	// mariadbd or mysqld process runs on this host (/proc/<pid>/stat);
	// -1 when it cannot be told (remote server, none or several).
	ServerCPUCores float64 `json:"server_cpu_cores"`
	// RowLockWaitsPer1000 and RowLockMsPer1000 are the SHOW GLOBAL STATUS
	// deltas of Innodb_row_lock_waits and Innodb_row_lock_time (ms) per
	// 1,000 completed jobs (server-wide).
	RowLockWaitsPer1000 float64 `json:"row_lock_waits_per_1000_jobs"`
	RowLockMsPer1000    float64 `json:"row_lock_ms_per_1000_jobs"`
	// JobsPerClaim is the average size of a non-empty claim (jobq
	// in-process runners; 0 when not observed).
	JobsPerClaim float64 `json:"jobs_per_claim"`
}

// cpuSnapshot is a point in time with the CPU used so far by this process
// and by the local database server (-1 when unknown).
type cpuSnapshot struct {
	at          time.Time
	self, serve float64 // seconds
	serverPID   int
}

// takeCPU reads this process's and the local server's CPU seconds from
// /proc (prometheus/procfs). pid is the server process found at the start
// of the point (0: look it up).
func takeCPU(pid int) cpuSnapshot {
	s := cpuSnapshot{at: time.Now(), serve: -1}
	if v, ok := procCPUSeconds(os.Getpid()); ok {
		s.self = v
	}
	if pid == 0 {
		pid = localServerPID()
	}
	if pid > 0 {
		if v, ok := procCPUSeconds(pid); ok {
			s.serve, s.serverPID = v, pid
		}
	}
	return s
}

// diagnose turns two snapshots and the status delta into a Diagnosis.
func diagnose(before, after cpuSnapshot, d GlobalStatus, completed int64) Diagnosis {
	wall := after.at.Sub(before.at).Seconds()
	dg := Diagnosis{ServerCPUCores: -1}
	if wall > 0 {
		dg.BenchCPUCores = (after.self - before.self) / wall
		if before.serve >= 0 && after.serve >= 0 && before.serverPID == after.serverPID {
			dg.ServerCPUCores = (after.serve - before.serve) / wall
		}
	}
	if completed > 0 {
		dg.RowLockWaitsPer1000 = 1000 * float64(d["Innodb_row_lock_waits"]) / float64(completed)
		dg.RowLockMsPer1000 = 1000 * float64(d["Innodb_row_lock_time"]) / float64(completed)
	}
	return dg
}

// localServerPID returns the pid of the only mariadbd or mysqld process on
// this host, or 0.
func localServerPID() int {
	procs, err := procfs.AllProcs()
	if err != nil {
		return 0
	}
	found := 0
	for _, p := range procs {
		switch comm, _ := p.Comm(); comm {
		case "mariadbd", "mysqld":
			if found != 0 {
				return 0 // several servers: cannot tell which one serves the bench
			}
			found = p.PID
		}
	}
	return found
}

// procCPUSeconds is utime+stime of pid in seconds.
func procCPUSeconds(pid int) (float64, bool) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0, false
	}
	st, err := p.Stat()
	if err != nil {
		return 0, false
	}
	return st.CPUTime(), true
}

// cpuProfileName is the CPU profile of this process written while the first
// skiplocked headline point runs.
const cpuProfileName = "cpu_skiplocked.pprof"

// startCPUProfile starts the CPU profile into dir/name; the returned stop is a
// no-op when profiling could not start (e.g. go test -cpuprofile already
// profiles the process).
func startCPUProfile(dir, name string) (stop func()) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		os.Remove(f.Name())
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// writeDiagnosis renders the "Where the time goes" section: the headline
// points' CPU, lock waits and claim sizes, and the CPU profile's location.
func writeDiagnosis(w io.Writer, res *Result) {
	var head []Point
	for _, p := range res.Points {
		if p.Group == "headline" {
			head = append(head, p)
		}
	}
	if len(head) == 0 {
		return
	}
	fmt.Fprintf(w, "## Where the time goes (headline points)\n\n")
	fmt.Fprintf(w, "| table rows | strategy | jobs/s | bench process CPU (cores) | database server CPU (cores) | row-lock waits / 1000 jobs | row-lock ms / 1000 jobs | stmts/job | jobs per claim |\n")
	fmt.Fprintf(w, "|--:|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, p := range head {
		fmt.Fprintf(w, "| %d | %s | %.0f | %.2f | %s | %.1f | %.1f | %s | %s |\n", p.TableRows, p.Strategy, p.Throughput,
			p.Diagnosis.BenchCPUCores, fmtCores(p.Diagnosis.ServerCPUCores), p.Diagnosis.RowLockWaitsPer1000,
			p.Diagnosis.RowLockMsPer1000, fmtPerJob(p.StatementsPerJob), fmtClaim(p.Diagnosis.JobsPerClaim))
	}
	fmt.Fprintf(w, "\nCPU: /proc/<pid>/stat (utime+stime) of this process and of the local database server over each point's run, divided by its wall time, on %d CPUs. Row-lock counters: SHOW GLOBAL STATUS deltas (Innodb_row_lock_waits, Innodb_row_lock_time). A CPU profile of this process during the first skiplocked headline point is in `%s` (`go tool pprof -top bin/jobq %s`).\n\n",
		res.CPUs, cpuProfileName, cpuProfileName)
}

func fmtCores(v float64) string {
	if v < 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", v)
}

func fmtClaim(v float64) string {
	if v <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", v)
}

// explainMiss says why a missed throughput target was missed, from the
// diagnosis of the skiplocked point and of its baseline (the ceiling or the
// classic design at the same table size).
func explainMiss(p, base Point, baseName string, cpus int) string {
	var why []string
	pd, bd := p.Diagnosis, base.Diagnosis
	switch {
	case pd.ServerCPUCores >= 0.85*float64(cpus):
		why = append(why, fmt.Sprintf("the database server used %.2f of %d cores: it is CPU-bound, so each statement and row a job costs counts", pd.ServerCPUCores, cpus))
	case pd.ServerCPUCores >= 0 && pd.BenchCPUCores+pd.ServerCPUCores >= 0.85*float64(cpus):
		why = append(why, fmt.Sprintf("the database server (%.2f cores) and this process (%.2f cores) together saturate the %d cores", pd.ServerCPUCores, pd.BenchCPUCores, cpus))
	case pd.ServerCPUCores >= 0:
		why = append(why, fmt.Sprintf("the database server used %.2f of %d cores (%s: %.2f) and this process %.2f: time went to waiting, not CPU", pd.ServerCPUCores, cpus, baseName, bd.ServerCPUCores, pd.BenchCPUCores))
	}
	if p.StatementsPerJob > 0 && base.StatementsPerJob > 0 {
		why = append(why, fmt.Sprintf("%.2f statements per job against %s's %.2f", p.StatementsPerJob, baseName, base.StatementsPerJob))
	}
	if pd.JobsPerClaim > 0 {
		why = append(why, fmt.Sprintf("%.1f jobs per claim (at most min(workers, batch limit) = %d)", pd.JobsPerClaim, min(p.Workers, p.BatchLimit)))
	}
	if pd.RowLockMsPer1000 > 2*bd.RowLockMsPer1000 && pd.RowLockMsPer1000 > 10 {
		why = append(why, fmt.Sprintf("row-lock waits of %.0f ms per 1000 jobs against %s's %.0f", pd.RowLockMsPer1000, baseName, bd.RowLockMsPer1000))
	}
	if len(p.Rounds) > 1 {
		rs := make([]string, len(p.Rounds))
		for i, r := range p.Rounds {
			rs[i] = fmt.Sprintf("%.0f", r)
		}
		why = append(why, fmt.Sprintf("rounds measured %s jobs/s (%s: %s)", strings.Join(rs, " / "), baseName, joinRounds(base.Rounds)))
	}
	return strings.Join(why, "; ")
}

func joinRounds(rs []float64) string {
	if len(rs) == 0 {
		return "one round"
	}
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = fmt.Sprintf("%.0f", r)
	}
	return strings.Join(out, " / ")
}
