// Package demo is `jobq demo` / `make demo`: provider → migrate → N
// `jobq serve` processes → 1,000 mixed jobs over HTTP → SIGKILL one replica
// mid-job → wait until every job is terminal → summary. It fails when any
// acknowledged job is lost or left non-terminal.
package demo

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/schollz/progressbar/v3"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/client"
	"github.com/jobq/jobq/dbprovider"
	"github.com/jobq/jobq/internal/redact"
	"github.com/jobq/jobq/internal/replica"
	"github.com/jobq/jobq/store"
)

// Options configure the demo.
type Options struct {
	Jobs     int  // jobs to submit. Defaults to 1000.
	Replicas int  // jobq serve processes. Defaults to 3.
	Kill     bool // SIGKILL one replica while it runs jobs
	Keep     bool // keep the database
	// Binary is the jobq executable to start. Defaults to this process's.
	Binary string
	Out    io.Writer // summary; defaults to stdout
}

// Replica is one `jobq serve` child process (see internal/replica).
type Replica = replica.Replica

// StartReplica starts `jobq serve` with dsn (passed in the environment so
// it never shows in ps) and waits for /readyz.
func StartReplica(ctx context.Context, bin, dsn, name, logDir string, extra ...string) (*Replica, error) {
	return replica.Start(ctx, replica.Spec{Binary: bin, DSN: dsn, Name: name, LogDir: logDir, Args: extra})
}

// jobFor returns the i-th demo job: 40% noop, 40% sleep 100–1000 ms,
// 10% flaky (fails its first attempt), 10% effect.
func jobFor(run string, i int) apitype.SubmitRequest {
	req := apitype.SubmitRequest{JobKey: fmt.Sprintf("demo-%s-%05d", run, i)}
	switch i % 10 {
	case 0, 1, 2, 3:
		req.JobType = "noop"
	case 4, 5, 6, 7:
		req.JobType, req.Params = "sleep", json.RawMessage(fmt.Sprintf(`{"ms":%d}`, 100+(i*37)%900))
	case 8:
		req.JobType, req.Params = "flaky", json.RawMessage(`{"failures":1,"ms":50}`)
	default:
		req.JobType, req.Params = "effect", json.RawMessage(`{"ms":200}`)
	}
	return req
}

// Run runs the demo.
func Run(ctx context.Context, opts Options) error {
	if opts.Jobs <= 0 {
		opts.Jobs = 1000
	}
	if opts.Replicas <= 0 {
		opts.Replicas = 3
	}
	if opts.Out == nil {
		opts.Out = os.Stdout
	}
	if opts.Binary == "" {
		b, err := os.Executable()
		if err != nil {
			return err
		}
		opts.Binary = b
	}
	if opts.Kill && opts.Replicas < 2 {
		return errors.New("--replicas: the kill needs at least 2 replicas")
	}
	srv, err := dbprovider.Provide(ctx, dbprovider.Options{})
	if err != nil {
		return err
	}
	defer srv.Close()
	dsn, drop, err := srv.CreateDatabase(ctx, "jobq_demo")
	if err != nil {
		return err
	}
	if opts.Keep {
		fmt.Fprintf(os.Stderr, "demo database kept: %s\n", redact.DSN(dsn))
	} else {
		defer drop()
	}
	st, err := store.Open(ctx, dsn, store.PoolConfig{MaxOpen: 4})
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.MigrateUp(ctx); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "server: %s; schema migrated\n", st.Server.Description)

	logDir, err := os.MkdirTemp("", "jobq-demo-")
	if err != nil {
		return err
	}
	var replicas []*Replica
	defer func() {
		for _, r := range replicas {
			r.Stop(15 * time.Second)
		}
	}()
	for i := 1; i <= opts.Replicas; i++ {
		r, err := StartReplica(ctx, opts.Binary, dsn, fmt.Sprintf("replica-%d", i), logDir,
			"--lease", "4s", "--rescue-interval", "1s", "--retry-backoff", "200ms")
		if err != nil {
			return err
		}
		replicas = append(replicas, r)
	}
	fmt.Fprintf(os.Stderr, "%d replicas ready (logs in %s)\n", len(replicas), logDir)

	// Submit over HTTP, round-robin, with a kill watcher.
	run := fmt.Sprintf("%d", time.Now().UnixNano()%1e9)
	acked := make([]uint64, opts.Jobs)
	var submitted atomic.Int64
	var killed atomic.Value // *killInfo
	var killWG sync.WaitGroup
	if opts.Kill {
		victim := replicas[1]
		killWG.Add(1)
		go func() {
			defer killWG.Done()
			for ctx.Err() == nil {
				if submitted.Load() >= int64(opts.Jobs*3/10) {
					var n int
					_ = st.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM job_queue WHERE status='RUNNING' AND owner=?", victim.Name).Scan(&n)
					if n > 0 {
						victim.Signal(syscall.SIGKILL)
						<-victim.Exited()
						killed.Store(&killInfo{name: victim.Name, running: n, at: time.Now()})
						return
					}
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	bar := progressbar.NewOptions(opts.Jobs, progressbar.OptionSetDescription("submitting"), progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionThrottle(250*time.Millisecond), progressbar.OptionClearOnFinish())
	start := time.Now()
	var submitErr error
	var errMu sync.Mutex
	var wg sync.WaitGroup
	next := atomic.Int64{}
	clients := make([]*client.Client, len(replicas))
	for i, r := range replicas {
		clients[i] = client.New(r.URL())
	}
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= opts.Jobs || ctx.Err() != nil {
					return
				}
				req := jobFor(run, i)
				var err error
				// Round-robin; a submit to a dead replica is retried on the next one.
				for try := 0; try < len(clients); try++ {
					var job apitype.Job
					job, _, err = clients[(i+try)%len(clients)].Submit(ctx, req)
					if err == nil {
						acked[i] = job.ID
						break
					}
					var ae *client.APIError
					if errors.As(err, &ae) {
						break
					}
				}
				if err != nil {
					errMu.Lock()
					submitErr = errors.Join(submitErr, fmt.Errorf("submit %s: %w", req.JobKey, err))
					errMu.Unlock()
				}
				submitted.Add(1)
				_ = bar.Add(1)
			}
		}()
	}
	wg.Wait()
	_ = bar.Finish()
	submitDur := time.Since(start)
	if submitErr != nil {
		return submitErr
	}
	fmt.Fprintf(os.Stderr, "submitted %d jobs in %s (%.0f/s)\n", opts.Jobs, submitDur.Round(time.Millisecond), float64(opts.Jobs)/submitDur.Seconds())

	// Wait until every acknowledged job is terminal.
	wbar := progressbar.NewOptions(opts.Jobs, progressbar.OptionSetDescription("finishing "), progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionShowCount(), progressbar.OptionThrottle(250*time.Millisecond), progressbar.OptionClearOnFinish())
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var done int
		if err := st.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM job_queue WHERE status IN ('SUCCESS','FAILED','CANCELED')").Scan(&done); err != nil {
			return err
		}
		_ = wbar.Set(done)
		if done >= opts.Jobs || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = wbar.Finish()
	killWG.Wait()
	var ki *killInfo
	if v := killed.Load(); v != nil {
		ki = v.(*killInfo)
	}
	sum, err := Summarize(ctx, st.DB(), acked)
	if err != nil {
		return err
	}
	sum.Print(opts.Out, ki)
	if sum.Lost > 0 || sum.NonTerminal > 0 {
		return fmt.Errorf("demo failed: %d lost, %d non-terminal", sum.Lost, sum.NonTerminal)
	}
	if opts.Kill && ki == nil {
		return errors.New("demo failed: the kill never happened (no replica held a running job)")
	}
	return nil
}

type killInfo struct {
	name    string
	running int
	at      time.Time
}

// Summary is the demo's verdict, read from the database.
type Summary struct {
	Jobs           int
	ByStatus       map[string]int
	PerOwner       []OwnerCount
	Retries        int // sum of retry_times
	FailedAttempts int
	Rescued        int // executions closed LEASE_EXPIRED
	Stale          int // completions refused (STALE)
	Lost           int // acknowledged but missing
	NonTerminal    int // acknowledged but not SUCCESS/FAILED/CANCELED
	TxEffectDups   int // jobs with more than one transactional effect (must be 0)
	NonTxEffectDup int // jobs whose non-transactional effect ran more than once
	PickupP50      time.Duration
	PickupP99      time.Duration
	PickupMax      time.Duration
	JobsPerSec     float64
	Span           time.Duration
}

// OwnerCount is executions per replica.
type OwnerCount struct {
	Owner      string
	Executions int
	Succeeded  int
}

// Summarize reads the verdict for the acknowledged job ids.
func Summarize(ctx context.Context, db *sql.DB, acked []uint64) (*Summary, error) {
	s := &Summary{Jobs: len(acked), ByStatus: map[string]int{}}
	status := map[uint64]string{}
	rows, err := db.QueryContext(ctx, "SELECT id, status FROM job_queue")
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id uint64
		var st string
		if err := rows.Scan(&id, &st); err != nil {
			rows.Close()
			return nil, err
		}
		status[id] = st
	}
	rows.Close()
	for _, id := range acked {
		st, ok := status[id]
		switch {
		case id == 0 || !ok:
			s.Lost++
		case !jobq.JobState(st).Terminal():
			s.NonTerminal++
		}
		if ok {
			s.ByStatus[st]++
		}
	}
	orows, err := db.QueryContext(ctx, "SELECT owner, COUNT(*), SUM(outcome='SUCCESS') FROM job_execution GROUP BY owner ORDER BY owner")
	if err != nil {
		return nil, err
	}
	for orows.Next() {
		var oc OwnerCount
		if err := orows.Scan(&oc.Owner, &oc.Executions, &oc.Succeeded); err != nil {
			orows.Close()
			return nil, err
		}
		s.PerOwner = append(s.PerOwner, oc)
	}
	orows.Close()
	q := func(dst *int, query string) error { return db.QueryRowContext(ctx, query).Scan(dst) }
	for _, x := range []struct {
		dst   *int
		query string
	}{
		{&s.Retries, "SELECT COALESCE(SUM(retry_times),0) FROM job_queue"},
		{&s.FailedAttempts, "SELECT COUNT(*) FROM job_execution WHERE outcome='FAILED'"},
		{&s.Rescued, "SELECT COUNT(*) FROM job_execution WHERE outcome='LEASE_EXPIRED'"},
		{&s.Stale, "SELECT COUNT(*) FROM job_execution WHERE outcome='STALE'"},
		{&s.TxEffectDups, "SELECT COUNT(*) FROM (SELECT job_id FROM job_effect WHERE kind='tx' GROUP BY job_id HAVING COUNT(*)>1) d"},
		{&s.NonTxEffectDup, "SELECT COUNT(*) FROM (SELECT job_id FROM job_effect WHERE kind='non_tx' GROUP BY job_id HAVING COUNT(*)>1) d"},
	} {
		if err := q(x.dst, x.query); err != nil {
			return nil, err
		}
	}
	// Pickup latency: first attempt's start minus the time the job became due.
	h := hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3)
	prow, err := db.QueryContext(ctx, `SELECT TIMESTAMPDIFF(MICROSECOND, q.create_time, e.started_at)
		FROM job_execution e JOIN job_queue q ON q.id = e.job_id WHERE e.attempt = 1`)
	if err != nil {
		return nil, err
	}
	for prow.Next() {
		var us int64
		if err := prow.Scan(&us); err != nil {
			prow.Close()
			return nil, err
		}
		_ = h.RecordValue(max(us, 1))
	}
	prow.Close()
	s.PickupP50 = time.Duration(h.ValueAtQuantile(50)) * time.Microsecond
	s.PickupP99 = time.Duration(h.ValueAtQuantile(99)) * time.Microsecond
	s.PickupMax = time.Duration(h.Max()) * time.Microsecond
	var first, last sql.NullTime
	if err := db.QueryRowContext(ctx, "SELECT MIN(create_time), MAX(finished_at) FROM job_queue").Scan(&first, &last); err != nil {
		return nil, err
	}
	if first.Valid && last.Valid && last.Time.After(first.Time) {
		s.Span = last.Time.Sub(first.Time)
		s.JobsPerSec = float64(len(acked)) / s.Span.Seconds()
	}
	return s, nil
}

// Print writes the summary table.
func (s *Summary) Print(w io.Writer, ki *killInfo) {
	fmt.Fprintln(w, "\n=== jobq demo summary ===")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "jobs acknowledged\t%d\n", s.Jobs)
	var sts []string
	for k := range s.ByStatus {
		sts = append(sts, k)
	}
	sort.Strings(sts)
	for _, k := range sts {
		fmt.Fprintf(tw, "  %s\t%d\n", k, s.ByStatus[k])
	}
	fmt.Fprintf(tw, "lost\t%d\n", s.Lost)
	fmt.Fprintf(tw, "non-terminal\t%d\n", s.NonTerminal)
	if ki != nil {
		fmt.Fprintf(tw, "killed\t%s (SIGKILL; it held %d running jobs just before)\n", ki.name, ki.running)
	}
	fmt.Fprintln(tw, "executions per replica\t")
	for _, o := range s.PerOwner {
		fmt.Fprintf(tw, "  %s\t%d (%d succeeded)\n", o.Owner, o.Executions, o.Succeeded)
	}
	fmt.Fprintf(tw, "retries (sum of retry_times)\t%d\n", s.Retries)
	fmt.Fprintf(tw, "failed attempts\t%d\n", s.FailedAttempts)
	fmt.Fprintf(tw, "rescued leases\t%d\n", s.Rescued)
	fmt.Fprintf(tw, "stale completions refused\t%d\n", s.Stale)
	fmt.Fprintf(tw, "duplicate transactional effects\t%d\n", s.TxEffectDups)
	fmt.Fprintf(tw, "repeated non-transactional effects\t%d (at-least-once cost of interrupted runs)\n", s.NonTxEffectDup)
	fmt.Fprintf(tw, "pickup latency p50 / p99 / max\t%s / %s / %s (submit → first start; includes queueing behind busy workers)\n", s.PickupP50.Round(time.Microsecond*10), s.PickupP99.Round(time.Microsecond*10), s.PickupMax.Round(time.Millisecond))
	fmt.Fprintf(tw, "throughput\t%.0f jobs/s (%d jobs in %s, first submit to last finish)\n", s.JobsPerSec, s.Jobs, s.Span.Round(time.Millisecond))
	tw.Flush()
}
