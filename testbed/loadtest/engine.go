package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// sample is one submit: when it was meant to go, when it went, what came
// back, and (after read-back) when its job started and finished.
type sample struct {
	seq      uint64
	intended time.Time     // t0 + schedule.At(seq), local wall clock
	sent     time.Time     // when vegeta actually started the request
	raw      time.Duration // vegeta's latency: actual send → response read
	code     uint16
	err      string
	jobID    uint64
	jobKey   string
	create   time.Time // job_queue.create_time, DB clock (zero until read back)
	started  time.Time // job_execution.started_at of attempt 1, DB clock
	finished time.Time // job_queue.finished_at, DB clock
}

// ok reports whether the submit was acknowledged (2xx).
func (s *sample) ok() bool { return s.err == "" && s.code >= 200 && s.code < 300 }

// done is when the response was read, local clock.
func (s *sample) done() time.Time { return s.sent.Add(s.raw) }

// submitLatency is the coordinated-omission-free submit latency: intended
// send time → response read. It is never less than vegeta's raw latency.
func (s *sample) submitLatency() time.Duration { return s.done().Sub(s.intended) }

// Progress is a live snapshot of a run, reported about once a second.
type Progress struct {
	Name    string
	Phase   string        // "load" while submitting, "drain" while waiting for jobs to finish
	Elapsed time.Duration // since the first intended send
	Due     uint64        // submits the schedule has called for so far
	Total   uint64        // submits in the whole schedule
	Done    uint64        // responses received
	Errors  uint64        // transport errors and non-2xx responses
	Rate    float64       // responses per second over the last report interval (achieved rate)
	Target  float64       // the schedule's rate now, submits per second
	Backlog int64         // this run's WAITING jobs (-1 without a DSN)
	Final   bool
}

// attack sends the schedule's submits round-robin across cfg.Targets with
// vegeta and returns one sample per submit, ordered by seq. t0 is taken
// immediately before vegeta's own start time, so intended times are at
// most a few microseconds early (charged to latency, never forgiven).
func attack(ctx context.Context, cfg Config, sched *schedule, bl *backlogSampler) (t0 time.Time, samples []sample) {
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: int(min(cfg.MaxWorkers, 10000)),
		IdleConnTimeout:     30 * time.Second,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Timeout: cfg.Timeout, Transport: tr}
	atk := vegeta.NewAttacker(vegeta.Client(client), vegeta.Workers(min(cfg.Workers, cfg.MaxWorkers)),
		vegeta.MaxWorkers(cfg.MaxWorkers), vegeta.MaxBody(64<<10))

	var next atomic.Uint64
	params := string(cfg.Params)
	hdr := http.Header{"Content-Type": []string{"application/json"}}
	targeter := func(t *vegeta.Target) error {
		n := next.Add(1) - 1
		key := cfg.KeyPrefix + strconv.FormatUint(n, 10)
		t.Method = http.MethodPost
		t.URL = strings.TrimRight(cfg.Targets[n%uint64(len(cfg.Targets))], "/") + "/v1/jobs"
		t.Body = []byte(`{"job_key":` + strconv.Quote(key) + `,"job_type":` + strconv.Quote(cfg.JobType) + `,"params":` + params + `}`)
		t.Header = hdr
		return nil
	}

	samples = make([]sample, 0, sched.Total())
	var done, errs atomic.Uint64
	stopProgress := make(chan struct{})
	var wg sync.WaitGroup
	t0 = time.Now()
	results := atk.Attack(targeter, sched, 0, cfg.Name)
	bl.start(t0)
	if cfg.ProgressFunc != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			last, lastAt := uint64(0), t0
			for {
				select {
				case <-stopProgress:
					return
				case now := <-tick.C:
					el := now.Sub(t0)
					d := done.Load()
					due := uint64(0)
					for due < sched.Total() && sched.At(due) <= el {
						due++
					}
					cfg.ProgressFunc(Progress{Name: cfg.Name, Phase: "load", Elapsed: el, Due: due, Total: sched.Total(),
						Done: d, Errors: errs.Load(), Rate: float64(d-last) / now.Sub(lastAt).Seconds(),
						Target: sched.Rate(el), Backlog: bl.last()})
					last, lastAt = d, now
				}
			}
		}()
	}
	stopped := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			atk.Stop()
		case <-stopped:
		}
	}()
	for res := range results {
		s := sample{seq: res.Seq, intended: t0.Add(sched.At(res.Seq)), sent: res.Timestamp, raw: res.Latency,
			code: res.Code, err: res.Error}
		if s.ok() {
			var body struct {
				ID     uint64 `json:"id"`
				JobKey string `json:"job_key"`
			}
			if err := json.Unmarshal(res.Body, &body); err != nil || body.JobKey == "" {
				s.err = fmt.Sprintf("decode response: %v", err)
			} else {
				s.jobID, s.jobKey = body.ID, body.JobKey
			}
		}
		if !s.ok() {
			if s.code != 0 && (s.code < 200 || s.code >= 300) {
				s.err = "HTTP " + strconv.Itoa(int(s.code))
			}
			errs.Add(1)
		}
		done.Add(1)
		samples = append(samples, s)
	}
	close(stopped)
	close(stopProgress)
	wg.Wait()
	sortSamples(samples)
	return t0, samples
}
