// Package demo is `jobq demo` / `make demo`: provider → migrate → N
// `jobq serve` processes → 1,000 mixed jobs over HTTP → SIGKILL one replica
// mid-job → wait until every job is terminal → summary and one verdict
// line. It narrates each step on stderr as it happens and fails when any
// acknowledged job is lost or left non-terminal, or a transactional effect
// is duplicated.
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
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/client"
	"github.com/jobq/jobq/internal/redact"
	"github.com/jobq/jobq/store"
	"github.com/jobq/jobq/testbed/dbprovider"
	"github.com/jobq/jobq/testbed/jobtypes"
	"github.com/jobq/jobq/testbed/replica"
)

// Options configure the demo.
type Options struct {
	Jobs     int  // jobs to submit. Defaults to 1000.
	Replicas int  // jobq serve processes. Defaults to 3.
	Kill     bool // SIGKILL one replica while it runs jobs
	Keep     bool // keep the database
	// NoProgress turns the progress bars off; they are drawn only when
	// stderr is a terminal anyway.
	NoProgress bool
	// DSN is a server-level DSN (the --dsn flag); empty lets dbprovider
	// choose (JOBQ_DSN, Docker, a local server).
	DSN string
	// Binary is the jobq executable to start. Defaults to this process's.
	Binary string
	Out    io.Writer // summary; defaults to stdout
	// Console, after a passing demo, submits two showcase jobs (a flaky job
	// that fails twice and succeeds on its third attempt, and one that ends
	// FAILED), prints the web console's URLs and keeps the replicas running
	// until ctx ends (Ctrl-C).
	Console bool
}

// Replica settings of the demo: short enough that a killed replica's jobs
// are rescued within seconds.
const (
	demoLease          = 4 * time.Second
	demoRescueInterval = time.Second
)

// bar is a progress bar on stderr, or nothing when stderr is not a terminal
// (no \r frames in logs) or with --no-progress.
type bar struct{ pb *progressbar.ProgressBar }

func newBar(on bool, total int, desc string, its bool) *bar {
	if !on {
		return &bar{}
	}
	o := []progressbar.Option{progressbar.OptionSetDescription(desc), progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionShowCount(), progressbar.OptionThrottle(250 * time.Millisecond), progressbar.OptionClearOnFinish()}
	if its {
		o = append(o, progressbar.OptionShowIts())
	}
	return &bar{pb: progressbar.NewOptions(total, o...)}
}

func (b *bar) add(n int) {
	if b.pb != nil {
		_ = b.pb.Add(n)
	}
}

func (b *bar) set(n int) {
	if b.pb != nil {
		_ = b.pb.Set(n)
	}
}

func (b *bar) describe(s string) {
	if b.pb != nil {
		b.pb.Describe(s)
	}
}

func (b *bar) finish() {
	if b.pb != nil {
		_ = b.pb.Finish()
	}
}

// say prints one narration line on stderr, clearing the bar first.
func (b *bar) say(format string, args ...any) {
	if b != nil && b.pb != nil {
		_ = b.pb.Clear()
	}
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

// Replica is one `jobq serve` child process (see internal/replica).
type Replica = replica.Replica

// StartReplica starts `jobq serve` with dsn (passed in the environment so
// it never shows in ps) and waits for /readyz.
func StartReplica(ctx context.Context, bin, dsn, name, logDir string, extra ...string) (*Replica, error) {
	// The demo's effect jobs are the testbed's type: ask for it.
	return replica.Start(ctx, replica.Spec{Binary: bin, DSN: dsn, Name: name, LogDir: logDir, Args: extra,
		Env: []string{jobtypes.TestbedEnv + "=1"}})
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
func Run(ctx context.Context, opts Options) (runErr error) {
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
	srv, err := dbprovider.Provide(ctx, dbprovider.Options{DSN: opts.DSN})
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
	// The replica logs are removed after a passing demo and kept, with a
	// line that says where, after a failing one.
	defer func() {
		if runErr != nil {
			fmt.Fprintf(os.Stderr, "replica logs kept in %s\n", logDir)
		} else {
			_ = os.RemoveAll(logDir)
		}
	}()
	var replicas []*Replica
	defer func() {
		for _, r := range replicas {
			r.Stop(15 * time.Second)
		}
	}()
	for i := 1; i <= opts.Replicas; i++ {
		r, err := StartReplica(ctx, opts.Binary, dsn, fmt.Sprintf("replica-%d", i), logDir,
			"--lease", demoLease.String(), "--rescue-interval", demoRescueInterval.String(), "--retry-backoff", "200ms")
		if err != nil {
			return err
		}
		replicas = append(replicas, r)
	}
	fmt.Fprintf(os.Stderr, "%d replicas ready (lease %s, rescue every %s; logs in %s)\n", len(replicas), demoLease, demoRescueInterval, logDir)
	progress := !opts.NoProgress && term.IsTerminal(int(os.Stderr.Fd()))
	flaky := 0
	for i := range opts.Jobs {
		if jobFor("", i).JobType == "flaky" {
			flaky++
		}
	}
	fmt.Fprintf(os.Stderr, "submitting %d jobs round-robin over HTTP: 40%% noop, 40%% sleep 0.1–1s, 10%% flaky (%d jobs that fail their first attempt by design), 10%% effect (one write outside and one inside the completing transaction)\n",
		opts.Jobs, flaky)
	if opts.Kill {
		fmt.Fprintf(os.Stderr, "once 30%% are submitted, %s is SIGKILLed while it runs jobs\n", replicas[1].Name)
	}
	sub := newBar(progress, opts.Jobs, "submitting", true)

	// Submit over HTTP, round-robin, with a kill watcher.
	run := fmt.Sprintf("%d", time.Now().UnixNano()%1e9)
	start := time.Now()
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
					held, _ := runningRuns(ctx, st.DB(), victim.Name)
					if n := len(held); n > 0 {
						victim.Signal(syscall.SIGKILL)
						<-victim.Exited()
						ki := &killInfo{name: victim.Name, running: n, held: held, at: time.Now()}
						killed.Store(ki)
						sub.say(">> SIGKILL %s at +%s: it held %d RUNNING jobs. Their leases run out within %s; then a survivor's rescuer (every %s) puts them back to WAITING and they run again.",
							victim.Name, ki.at.Sub(start).Round(10*time.Millisecond), n, demoLease, demoRescueInterval)
						return
					}
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
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
				sub.add(1)
			}
		}()
	}
	wg.Wait()
	sub.finish()
	submitDur := time.Since(start)
	if submitErr != nil {
		return submitErr
	}
	fmt.Fprintf(os.Stderr, "submitted %d jobs in %s (%.0f/s)\n", opts.Jobs, submitDur.Round(time.Millisecond), float64(opts.Jobs)/submitDur.Seconds())

	// Wait until every acknowledged job is terminal, saying when the killed
	// replica's jobs are rescued (the bar stalls until their leases expire).
	fin := newBar(progress, opts.Jobs, "finishing ", false)
	deadline := time.Now().Add(3 * time.Minute)
	rescuedSaid := false
	for {
		var done int
		if err := st.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM job_queue WHERE status IN ('SUCCESS','FAILED','CANCELED')").Scan(&done); err != nil {
			return err
		}
		fin.set(done)
		if v := killed.Load(); v != nil && !rescuedSaid {
			ki := v.(*killInfo)
			var held int
			if err := st.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM job_queue WHERE status='RUNNING' AND owner=?", ki.name).Scan(&held); err != nil {
				return err
			}
			if held > 0 {
				fin.describe(fmt.Sprintf("finishing (%d jobs wait for %s's leases to expire)", held, ki.name))
			} else {
				rescuedSaid = true
				fin.describe("finishing ")
				fin.say(">> %s's jobs rescued %s after the kill (lease %s + rescue interval %s at most); the survivors run them now.",
					ki.name, time.Since(ki.at).Round(100*time.Millisecond), demoLease, demoRescueInterval)
			}
		}
		if done >= opts.Jobs || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	fin.finish()
	killWG.Wait()
	var ki *killInfo
	if v := killed.Load(); v != nil {
		ki = v.(*killInfo)
	}
	if ki == nil && opts.Kill {
		fmt.Fprintln(os.Stderr, "the kill never happened: no replica held a running job when it was due")
	}
	sum, err := Summarize(ctx, st.DB(), acked)
	if err != nil {
		return err
	}
	if ki != nil {
		if err := ki.account(ctx, st.DB()); err != nil {
			return err
		}
	}
	sum.Flaky = flaky
	sum.Print(opts.Out, ki)
	if sum.Lost > 0 || sum.NonTerminal > 0 || sum.TxEffectDups > 0 {
		return fmt.Errorf("demo failed: %d lost, %d stuck, %d duplicate transactional effects", sum.Lost, sum.NonTerminal, sum.TxEffectDups)
	}
	if opts.Kill && ki == nil {
		return errors.New("demo failed: the kill never happened (no replica held a running job)")
	}
	if opts.Console {
		rescued, err := RescuedExample(ctx, st.DB())
		if err != nil {
			return err
		}
		return holdForConsole(ctx, opts.Out, run, replicas, rescued)
	}
	return nil
}

// Rescued is one job whose run was cut by a dead replica: attempt Attempt
// on Killed ended LEASE_EXPIRED, and a later attempt on Survivor succeeded.
type Rescued struct {
	JobID    uint64
	Attempt  int
	Killed   string
	Survivor string
}

// RescuedExample finds the lowest-id job with a LEASE_EXPIRED attempt
// followed by a SUCCESS one, for the console's showcase; nil when none.
func RescuedExample(ctx context.Context, db *sql.DB) (*Rescued, error) {
	var r Rescued
	err := db.QueryRowContext(ctx, `SELECT e.job_id, e.attempt, e.owner, s.owner
		FROM job_attempt e JOIN job_attempt s ON s.job_id = e.job_id AND s.attempt > e.attempt AND s.outcome = 'SUCCESS'
		WHERE e.outcome = 'LEASE_EXPIRED' ORDER BY e.job_id LIMIT 1`).Scan(&r.JobID, &r.Attempt, &r.Killed, &r.Survivor)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// holdForConsole submits the console showcase jobs to a live replica, waits
// until they are final, prints where to look, and waits for ctx to end.
func holdForConsole(ctx context.Context, out io.Writer, run string, replicas []*Replica, rescued *Rescued) error {
	var live *Replica
	for _, r := range replicas {
		if r.Alive() {
			live = r
			break
		}
	}
	if live == nil {
		return errors.New("--console: no replica is running")
	}
	c := client.New(live.URL())
	defer c.HTTP.CloseIdleConnections()
	one := 1
	showcase := []apitype.SubmitRequest{
		{JobKey: "console-third-time-lucky-" + run, JobType: "flaky", Params: json.RawMessage(`{"failures":2,"ms":300}`)},
		{JobKey: "console-always-fails-" + run, JobType: "flaky", Params: json.RawMessage(`{"failures":100,"ms":300}`), MaxRetry: &one},
	}
	var ids []uint64
	for _, req := range showcase {
		j, _, err := c.Submit(ctx, req)
		if err != nil {
			return fmt.Errorf("--console: submit %s: %w", req.JobKey, err)
		}
		ids = append(ids, j.ID)
	}
	fmt.Fprintf(os.Stderr, "console: waiting for the two showcase jobs to finish (a few seconds)\n")
	for _, id := range ids {
		for ctx.Err() == nil {
			j, err := c.Get(ctx, id)
			if err == nil && j.Status.Terminal() {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	base := live.URL() + "/ui/"
	fmt.Fprintf(out, "\nconsole: %s (loopback, no authentication)\n", base)
	fmt.Fprintf(out, "  job %d failed twice and succeeded on its third attempt: %sjobs/%d\n", ids[0], base, ids[0])
	fmt.Fprintf(out, "  job %d ended FAILED (press Retry on its page):    %sjobs/%d\n", ids[1], base, ids[1])
	if rescued != nil {
		fmt.Fprintf(out, "  job %d was running on %s when it was SIGKILLed (attempt %d LEASE_EXPIRED), then succeeded on %s: %sjobs/%d\n",
			rescued.JobID, rescued.Killed, rescued.Attempt, rescued.Survivor, base, rescued.JobID)
	}
	fmt.Fprintf(out, "the replicas keep running until Ctrl-C\n")
	<-ctx.Done()
	return nil
}

type killInfo struct {
	name    string
	running int          // RUNNING jobs it held when counted, just before the kill
	held    []jobq.Fence // those runs
	at      time.Time
	// What became of its runs (account): the held runs its death cut
	// short (rescued once their lease expired), the held runs that ended
	// otherwise — their completion committed between the count and the
	// kill — by outcome, and the runs it claimed in that gap, also rescued.
	heldRescued  int
	heldEnded    map[string]int
	claimedAfter int
}

// runningRuns returns the runs owner holds now (RUNNING jobs and their attempts).
func runningRuns(ctx context.Context, db *sql.DB, owner string) ([]jobq.Fence, error) {
	rows, err := db.QueryContext(ctx, "SELECT id, attempt FROM job_queue WHERE status='RUNNING' AND owner=?", owner)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []jobq.Fence
	for rows.Next() {
		var f jobq.Fence
		if err := rows.Scan(&f.ID, &f.Attempt); err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// account reads, from the killed replica's job_execution rows, what became
// of the runs it held when counted and of the runs it claimed after the
// count: the count and the kill are two steps, so the rescued leases need
// not equal the RUNNING jobs counted.
func (k *killInfo) account(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, "SELECT job_id, attempt, COALESCE(outcome, '') FROM job_attempt WHERE owner=?", k.name)
	if err != nil {
		return err
	}
	defer rows.Close()
	outcome := map[jobq.Fence]string{}
	for rows.Next() {
		var f jobq.Fence
		var o string
		if err := rows.Scan(&f.ID, &f.Attempt, &o); err != nil {
			return err
		}
		outcome[f] = o
	}
	if err := rows.Err(); err != nil {
		return err
	}
	k.heldRescued, k.heldEnded, k.claimedAfter = 0, map[string]int{}, 0
	held := map[jobq.Fence]bool{}
	for _, f := range k.held {
		held[f] = true
		switch o := outcome[f]; o {
		case "LEASE_EXPIRED":
			k.heldRescued++
		case "":
			k.heldEnded["no outcome yet"]++
		default:
			k.heldEnded[o]++
		}
	}
	for f, o := range outcome {
		if o == "LEASE_EXPIRED" && !held[f] {
			k.claimedAfter++
		}
	}
	return nil
}

// difference explains why the leases rescued from the killed replica
// differ from the RUNNING jobs it was counted with: "" when they are the
// same runs, else e.g. "1 of the 63 finished (SUCCESS) between that count
// and the kill".
func (k *killInfo) difference() string {
	var parts []string
	ended := 0
	var outs []string
	for o, n := range k.heldEnded {
		ended += n
		outs = append(outs, fmt.Sprintf("%d %s", n, o))
	}
	sort.Strings(outs)
	if ended > 0 {
		parts = append(parts, fmt.Sprintf("%d of the %d ended (%s) between that count and the kill", ended, k.running, strings.Join(outs, ", ")))
	}
	if k.claimedAfter > 0 {
		verb := "were"
		if k.claimedAfter == 1 {
			verb = "was"
		}
		parts = append(parts, fmt.Sprintf("%d run claimed between that count and the kill %s rescued too", k.claimedAfter, verb))
	}
	return strings.Join(parts, "; ")
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
	Flaky          int // flaky jobs submitted (each fails its first attempt by design)
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
	orows, err := db.QueryContext(ctx, "SELECT owner, COUNT(*), SUM(outcome='SUCCESS') FROM job_attempt GROUP BY owner ORDER BY owner")
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
		{&s.FailedAttempts, "SELECT COUNT(*) FROM job_attempt WHERE outcome='FAILED'"},
		{&s.Rescued, "SELECT COUNT(*) FROM job_attempt WHERE outcome='LEASE_EXPIRED'"},
		{&s.Stale, "SELECT COUNT(*) FROM job_attempt WHERE outcome='STALE'"},
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
		FROM job_attempt e JOIN job_queue q ON q.id = e.job_id WHERE e.attempt = 1`)
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

// Print writes the summary table, each figure with what it means, and the
// verdict line.
func (s *Summary) Print(w io.Writer, ki *killInfo) {
	fmt.Fprintln(w, "\n=== jobq demo summary ===")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "jobs acknowledged\t%d\t(the API answered 201 for each)\n", s.Jobs)
	var sts []string
	for k := range s.ByStatus {
		sts = append(sts, k)
	}
	sort.Strings(sts)
	for _, k := range sts {
		fmt.Fprintf(tw, "  %s\t%d\t\n", k, s.ByStatus[k])
	}
	fmt.Fprintf(tw, "lost\t%d\t(acknowledged, then missing from job_queue; must be 0)\n", s.Lost)
	fmt.Fprintf(tw, "stuck\t%d\t(not SUCCESS, FAILED or CANCELED at the end; must be 0)\n", s.NonTerminal)
	if ki != nil {
		fmt.Fprintf(tw, "killed\t%s\t(SIGKILL; it held %d RUNNING jobs just before)\n", ki.name, ki.running)
		if d := ki.difference(); d != "" {
			fmt.Fprintf(tw, "  of those, rescued\t%d\t(%s)\n", ki.heldRescued, d)
		}
	}
	fmt.Fprintln(tw, "executions per replica\t\t(attempts each replica ran)")
	for _, o := range s.PerOwner {
		fmt.Fprintf(tw, "  %s\t%d\t(%d succeeded)\n", o.Owner, o.Executions, o.Succeeded)
	}
	fmt.Fprintf(tw, "failed attempts\t%d\t(%d flaky jobs fail their first attempt by design; a flaky attempt cut short by the kill is rescued instead)\n", s.FailedAttempts, s.Flaky)
	fmt.Fprintf(tw, "rescued leases\t%d\t(runs whose replica died: re-queued by a survivor after the lease expired)\n", s.Rescued)
	fmt.Fprintf(tw, "retries\t%d\t(sum of retry_times = failed attempts + rescued leases)\n", s.Retries)
	fmt.Fprintf(tw, "stale completions refused\t%d\t(completions of runs that had lost their lease, refused by the attempt fence)\n", s.Stale)
	fmt.Fprintf(tw, "duplicate transactional effects\t%d\t(effects committed with the fenced completion: exactly once; must be 0)\n", s.TxEffectDups)
	fmt.Fprintf(tw, "repeated non-transactional effects\t%d\t(at-least-once cost: runs killed after their effect, before their completion)\n", s.NonTxEffectDup)
	fmt.Fprintf(tw, "pickup latency p50 / p99 / max\t%s / %s / %s\t(submit → first start; mostly queueing behind busy workers)\n", s.PickupP50.Round(time.Millisecond), s.PickupP99.Round(time.Millisecond), s.PickupMax.Round(time.Millisecond))
	fmt.Fprintf(tw, "throughput\t%.0f jobs/s\t(%d jobs in %s, first submit to last finish)\n", s.JobsPerSec, s.Jobs, s.Span.Round(time.Millisecond))
	tw.Flush()
	fmt.Fprintln(w, s.Verdict(ki))
}

// Verdict is the demo's one-line answer: "HA held: …" when no job was lost
// or stuck and no transactional effect was duplicated, "HA BROKEN: …"
// otherwise.
func (s *Summary) Verdict(ki *killInfo) string {
	head := "HA held"
	if s.Lost > 0 || s.NonTerminal > 0 || s.TxEffectDups > 0 {
		head = "HA BROKEN"
	}
	line := fmt.Sprintf("%s: %d lost, %d stuck, %d duplicate effects (transactional)", head, s.Lost, s.NonTerminal, s.TxEffectDups)
	if ki != nil {
		line += fmt.Sprintf("; %s SIGKILLed with %d jobs running, %d leases rescued", ki.name, ki.running, s.Rescued)
		if d := ki.difference(); d != "" {
			line += " (" + d + ")"
		}
	} else {
		line += "; no replica was killed"
	}
	return line + fmt.Sprintf("; %d of %d jobs SUCCESS", s.ByStatus[string(jobq.StateSuccess)], s.Jobs)
}
