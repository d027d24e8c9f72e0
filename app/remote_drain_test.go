package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/jobtypes"
	"github.com/jobq/jobq/scheduler"
)

// BenchmarkRemoteDrain drains JOBQ_DRAIN_JOBS (default 20,000) no-op jobs
// twice on one replica (defaults, 50 workers): run by its own handlers,
// then by remote workers over HTTP — JOBQ_DRAIN_WORKERS (default 4) Go
// worker loops in this process, each fetching up to 200 jobs per call and
// completing each job with its own call from 64 goroutines, one heartbeat
// never needed (30 s lease). It reports both rates and remote/local.
//
//	go test -run '^$' -bench BenchmarkRemoteDrain -benchtime 1x ./app/
func BenchmarkRemoteDrain(b *testing.B) {
	n := envInt("JOBQ_DRAIN_JOBS", 20000)
	workers := envInt("JOBQ_DRAIN_WORKERS", 4)
	reg := scheduler.NewRegistry()
	jobtypes.Register(reg)
	done := &drainCount{n: n}
	r, err := Start(context.Background(), Config{DSN: testdb.DSN(b), Listen: "127.0.0.1:0", NoUI: true, Migrate: true, Registry: reg,
		Scheduler: scheduler.Config{RemoteTypes: []string{"rnoop"}, Observer: done},
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Stop(context.Background())
	base := "http://" + r.Addr
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	post := func(path string, body, out any) {
		j, _ := json.Marshal(body)
		resp, err := hc.Post(base+path, "application/json", bytes.NewReader(j))
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode >= 300 {
			msg, _ := io.ReadAll(resp.Body)
			b.Fatalf("%s: %d %s", path, resp.StatusCode, msg)
		}
		if out != nil {
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				b.Fatal(err)
			}
		}
	}
	// seed inserts n WAITING jobs of jobType straight into the table (the
	// scan and the fetch see them only when the drain starts: the type's
	// lane is set after).
	seed := func(jobType string, lane int) {
		db := r.Store.DB()
		for start := 0; start < n; start += 1000 {
			q := "INSERT INTO job_queue (job_key, job_type, params, request_hash, status, run_at, create_time, update_time, lane) VALUES "
			args := []any{}
			for i := start; i < min(n, start+1000); i++ {
				if i > start {
					q += ","
				}
				q += "(?, ?, '{}', '', 'SCHEDULED', NOW(6), NOW(6), NOW(6), ?)"
				args = append(args, fmt.Sprintf("%s-%d", jobType, i), jobType, lane)
			}
			if _, err := db.Exec(q, args...); err != nil {
				b.Fatal(err)
			}
		}
	}
	release := func(jobType string) time.Time {
		if _, err := r.Store.DB().Exec("UPDATE job_queue SET status = 'WAITING' WHERE job_type = ? AND status = 'SCHEDULED'", jobType); err != nil {
			b.Fatal(err)
		}
		r.Scheduler.Wake()
		return time.Now()
	}
	// waitAll waits for the n-th applied success of jobType on the
	// replica (its events: each is counted after its commit).
	waitAll := func(jobType string) {
		select {
		case <-done.all(jobType):
		case <-time.After(30 * time.Minute):
			b.Fatalf("timed out after 30m0s waiting for %d %s jobs to succeed", n, jobType)
		}
	}
	b.ResetTimer()

	seed("noop", 0)
	start := release("noop")
	waitAll("noop")
	local := time.Since(start)

	seed("rnoop", 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	start = release("rnoop")
	for w := range workers {
		wg.Go(func() {
			tokens := make(chan string, 256)
			var done sync.WaitGroup
			for range 64 {
				done.Go(func() {
					for t := range tokens {
						var res apitype.CompleteResponse
						post("/v1/workers/complete", map[string]any{"task_token": t, "outcome": "success"}, &res)
					}
				})
			}
			defer func() { close(tokens); done.Wait() }()
			for ctx.Err() == nil {
				var f apitype.FetchResponse
				post("/v1/workers/fetch", map[string]any{"worker_id": "bench-" + strconv.Itoa(w), "job_types": []string{"rnoop"}, "max_jobs": 200, "wait_ms": 200}, &f)
				for _, j := range f.Jobs {
					tokens <- j.TaskToken
				}
			}
		})
	}
	waitAll("rnoop")
	remote := time.Since(start)
	cancel()
	wg.Wait()
	b.StopTimer()
	lr, rr := float64(n)/local.Seconds(), float64(n)/remote.Seconds()
	b.ReportMetric(lr, "local_jobs/s")
	b.ReportMetric(rr, "remote_jobs/s")
	b.ReportMetric(rr/lr, "remote/local")
	b.Logf("drain of %d no-op jobs on one replica: in-process %.0f jobs/s (%s), remote (%d HTTP worker loops) %.0f jobs/s (%s): %.2f×",
		n, lr, local.Round(time.Millisecond), workers, rr, remote.Round(time.Millisecond), rr/lr)
}

// drainCount is an observer counting each job type's applied successes; the
// channel of all(jobType) is closed at the n-th.
type drainCount struct {
	n    int
	mu   sync.Mutex
	done map[string]int
	ch   map[string]chan struct{}
}

func (d *drainCount) chanLocked(jobType string) chan struct{} {
	if d.ch == nil {
		d.ch, d.done = map[string]chan struct{}{}, map[string]int{}
	}
	if d.ch[jobType] == nil {
		d.ch[jobType] = make(chan struct{})
	}
	return d.ch[jobType]
}

func (d *drainCount) all(jobType string) <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.chanLocked(jobType)
}

func (d *drainCount) Observe(e scheduler.Event) {
	if e.Kind != scheduler.EventCompleted || !e.Applied || e.Completion.Outcome != jobq.OutcomeSuccess {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	ch := d.chanLocked(e.Completion.JobType)
	if d.done[e.Completion.JobType]++; d.done[e.Completion.JobType] == d.n {
		close(ch)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
