package bench

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/prometheus/procfs"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/store"
	"github.com/jobq/jobq/testbed/chaos/remoteworker"
	"github.com/jobq/jobq/testbed/dbprovider"
	"github.com/jobq/jobq/testbed/replica"
)

// RemoteOptions configures RunRemote: the remote drain and pickup points
// of each worker library, measured in the same run as the in-process
// drain and pickup of one `jobq serve` replica.
type RemoteOptions struct {
	// DSN is a server-level DSN ("" lets dbprovider choose).
	DSN string
	// Binary is the jobq executable (replica, Go worker, jobq work).
	Binary string
	// RepoDir is the repository root (sdk/python, sdk/node). Defaults to ".".
	RepoDir string
	// Kinds are the workers to measure: go, work, python, node.
	Kinds []string
	// Jobs is how many no-op jobs each drain point runs. Defaults to 5000.
	Jobs int
	// Concurrency is the replica's workers and each worker's concurrency.
	// Defaults to 64.
	Concurrency int
	// PickupRate and PickupFor: the open-model submits of the pickup point.
	// Default to 200 jobs/s for 5s.
	PickupRate int
	PickupFor  time.Duration
	// Out receives the replica's and workers' logs. Defaults to out/bench-remote.
	Out string
	Log *slog.Logger
}

// RemotePoint is one executor's drain and pickup.
type RemotePoint struct {
	Executor   string  `json:"executor"` // in-process, go, work, python, node
	Jobs       int     `json:"jobs"`
	DrainS     float64 `json:"drain_s"`    // first claim to last finish, database clock
	DrainRate  float64 `json:"drain_rate"` // jobs/s
	Ratio      float64 `json:"ratio"`      // DrainRate / in-process DrainRate
	CPUPerJob  float64 `json:"worker_cpu_ms_per_job"`
	PickupJobs int     `json:"pickup_jobs"`
	PickupP50  float64 `json:"pickup_p50_ms"`
	PickupP99  float64 `json:"pickup_p99_ms"`
}

// RunRemote measures the in-process point, then each kind's.
func RunRemote(ctx context.Context, o RemoteOptions) ([]RemotePoint, error) {
	o.RepoDir = cmp.Or(o.RepoDir, ".")
	o.Jobs = cmp.Or(o.Jobs, 5000)
	o.Concurrency = cmp.Or(o.Concurrency, 64)
	o.PickupRate = cmp.Or(o.PickupRate, 200)
	o.PickupFor = cmp.Or(o.PickupFor, 5*time.Second)
	o.Out = cmp.Or(o.Out, "out/bench-remote")
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	srv, err := dbprovider.Provide(ctx, dbprovider.Options{DSN: o.DSN})
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	dsn, drop, err := srv.CreateDatabase(ctx, "jobq_rbench")
	if err != nil {
		return nil, err
	}
	defer func() { _ = drop() }()
	st, err := store.Open(ctx, dsn, store.PoolConfig{MaxOpen: 4})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if _, err := st.MigrateUp(ctx); err != nil {
		return nil, err
	}
	db := st.DB()
	rep, err := replica.Start(ctx, replica.Spec{Binary: o.Binary, DSN: dsn, Name: "bench-1", LogDir: o.Out,
		Args: []string{"--remote-type", remoteworker.Noop, "--workers", strconv.Itoa(o.Concurrency)}})
	if err != nil {
		return nil, err
	}
	defer rep.Stop(10 * time.Second)

	var out []RemotePoint
	p, err := measureRemotePoint(ctx, o, db, rep.URL(), "in-process", "noop", 0, nil)
	if err != nil {
		return nil, err
	}
	out = append(out, p)
	for _, kind := range o.Kinds {
		w, err := startBenchWorker(o, kind, rep.URL())
		if err != nil {
			return out, err
		}
		p, err := measureRemotePoint(ctx, o, db, rep.URL(), kind, remoteworker.Noop, 1, w)
		w.stop()
		if err != nil {
			return out, err
		}
		p.Ratio = p.DrainRate / out[0].DrainRate
		out = append(out, p)
		o.Log.Info("remote bench point", "executor", kind, "drain_rate", p.DrainRate, "ratio", p.Ratio)
	}
	out[0].Ratio = 1
	return out, nil
}

type benchWorker struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func (w *benchWorker) cpu() float64 {
	p, err := procfs.NewProc(w.cmd.Process.Pid)
	if err != nil {
		return 0
	}
	s, err := p.Stat()
	if err != nil {
		return 0
	}
	return s.CPUTime() + float64(s.CUTime+s.CSTime)/100 // waited-for children (jobq work's commands), USER_HZ 100
}

func (w *benchWorker) stop() {
	_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
		<-w.done
	}
}

func startBenchWorker(o RemoteOptions, kind, server string) (*benchWorker, error) {
	conc := strconv.Itoa(o.Concurrency)
	var argv []string
	switch kind {
	case "go":
		argv = []string{o.Binary, "chaos-worker"}
	case "work":
		argv = []string{o.Binary, "work", "--type", remoteworker.Noop, "--concurrency", conc, "--server", server,
			"--", o.Binary, "chaos-worker", "--exec"}
	case "python":
		argv = []string{"python3", filepath.Join(o.RepoDir, "sdk/python/conformance_worker.py")}
	case "node":
		argv = []string{"node", filepath.Join(o.RepoDir, "sdk/node/conformance/worker.js")}
	default:
		return nil, fmt.Errorf("remote bench: unknown worker %q (want go, work, python, node)", kind)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "JOBQ_SERVER="+server, "JOBQ_WORKER_ID=bench-"+kind, "JOBQ_TYPES="+remoteworker.Noop,
		"JOBQ_CONCURRENCY="+conc, "JOBQ_WORKER_TOKEN=")
	logf, err := os.Create(filepath.Join(o.Out, "worker-"+kind+".log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	w := &benchWorker{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(w.done) }()
	return w, nil
}

// measureRemotePoint drains o.Jobs jobs of jobType (inserted in one
// statement, lane as given), then submits at o.PickupRate for o.PickupFor
// through the API and reads each job's pickup (first claim − create_time).
func measureRemotePoint(ctx context.Context, o RemoteOptions, db *sql.DB, api, name, jobType string, lane int, w *benchWorker) (RemotePoint, error) {
	p := RemotePoint{Executor: name, Jobs: o.Jobs}
	prefix := fmt.Sprintf("drain-%s-", name)
	q := `INSERT INTO job_queue (job_key, job_type, params, request_hash, status, priority, max_retry, timeout_ms, run_at, attempt,
		create_time, update_time, lane) ` + digits + `
		SELECT CONCAT(?, k), ?, '{"action":"succeed"}', REPEAT('0', 64), 'WAITING', 0, 3, 0, NOW(6), 0, NOW(6), NOW(6), ?
		FROM (SELECT a.n * 1000 + b.n AS k FROM d a CROSS JOIN d b WHERE a.n * 1000 + b.n < ?) AS s`
	var cpu0 float64
	if w != nil {
		cpu0 = w.cpu()
	}
	if _, err := db.ExecContext(ctx, q, prefix, jobType, lane, o.Jobs); err != nil {
		return p, fmt.Errorf("insert drain jobs: %w", err)
	}
	if err := waitDone(ctx, db, prefix, o.Jobs, 5*time.Minute); err != nil {
		return p, err
	}
	if w != nil {
		p.CPUPerJob = (w.cpu() - cpu0) * 1000 / float64(o.Jobs)
	}
	var us float64
	if err := db.QueryRowContext(ctx, `SELECT TIMESTAMPDIFF(MICROSECOND, MIN(started_at), MAX(finished_at)) FROM job_queue WHERE job_key LIKE CONCAT(?, '%')`,
		prefix).Scan(&us); err != nil {
		return p, err
	}
	p.DrainS = us / 1e6
	p.DrainRate = float64(o.Jobs) / p.DrainS

	// Pickup: open-model single submits.
	prefix = fmt.Sprintf("pickup-%s-", name)
	n := int(float64(o.PickupRate) * o.PickupFor.Seconds())
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer hc.CloseIdleConnections()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		sleepUntil(ctx, start.Add(time.Duration(i)*time.Second/time.Duration(o.PickupRate)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			body, _ := json.Marshal(apitype.SubmitRequest{JobKey: prefix + strconv.Itoa(i), JobType: jobType,
				Params: json.RawMessage(`{"action":"succeed"}`)})
			resp, err := hc.Post(api+"/v1/jobs", "application/json", strings.NewReader(string(body)))
			if err != nil {
				errs <- err
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				errs <- fmt.Errorf("submit: HTTP %d", resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return p, err
	}
	if err := waitDone(ctx, db, prefix, n, time.Minute); err != nil {
		return p, err
	}
	rows, err := db.QueryContext(ctx, `SELECT TIMESTAMPDIFF(MICROSECOND, q.create_time, e.started_at) FROM job_queue q
		JOIN job_attempt e ON e.job_id = q.id AND e.attempt = 1 WHERE q.job_key LIKE CONCAT(?, '%')`, prefix)
	if err != nil {
		return p, err
	}
	defer rows.Close()
	var lat []float64
	for rows.Next() {
		var v float64
		if err := rows.Scan(&v); err != nil {
			return p, err
		}
		lat = append(lat, v/1000)
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		p.PickupJobs = len(lat)
		p.PickupP50 = lat[len(lat)*50/100]
		p.PickupP99 = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	return p, rows.Err()
}

func sleepUntil(ctx context.Context, t time.Time) {
	if d := time.Until(t); d > 0 {
		tm := time.NewTimer(d)
		defer tm.Stop()
		select {
		case <-ctx.Done():
		case <-tm.C:
		}
	}
}

// waitDone waits until n jobs with keys starting with prefix are SUCCESS.
func waitDone(ctx context.Context, db *sql.DB, prefix string, n int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		var done int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM job_queue WHERE job_key LIKE CONCAT(?, '%') AND status = 'SUCCESS'`,
			prefix).Scan(&done); err != nil {
			return err
		}
		if done >= n {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s: %d of %d jobs done after %s", prefix, done, n, limit)
		}
		sleepUntil(ctx, time.Now().Add(100*time.Millisecond))
	}
}

// WriteRemote prints the remote points as a table.
func WriteRemote(w io.Writer, pts []RemotePoint) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "executor\tjobs\tdrain jobs/s\tvs in-process\tworker CPU ms/job\tpickup jobs\tpickup p50\tpickup p99\t")
	for _, p := range pts {
		cpu := fmt.Sprintf("%.2f", p.CPUPerJob)
		if p.Executor == "in-process" {
			cpu = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.2f×\t%s\t%d\t%.1fms\t%.1fms\t\n", p.Executor, p.Jobs, p.DrainRate, p.Ratio, cpu,
			p.PickupJobs, p.PickupP50, p.PickupP99)
	}
	tw.Flush()
}
