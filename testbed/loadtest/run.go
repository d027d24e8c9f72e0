package loadtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/jobq/jobq/store"
)

// Histogram range: 1 µs to 1 h at 3 significant digits.
const (
	histMinUs = 1
	histMaxUs = int64(time.Hour / time.Microsecond)
	histSig   = 3
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(histMinUs, histMaxUs, histSig) }

func record(h *hdrhistogram.Histogram, d time.Duration) {
	_ = h.RecordValue(min(max(d.Microseconds(), histMinUs), histMaxUs))
}

// Percentiles reported in Summary and in the spectrum table.
var Percentiles = []float64{50, 75, 90, 95, 99, 99.9, 99.99}

// Summary describes one latency metric. Durations are in nanoseconds in
// JSON; P maps "p50", "p99.9", … to values.
type Summary struct {
	Count int64                    `json:"count"`
	Min   time.Duration            `json:"min_ns"`
	Mean  time.Duration            `json:"mean_ns"`
	Max   time.Duration            `json:"max_ns"`
	P     map[string]time.Duration `json:"percentiles_ns"`
}

func pname(p float64) string { return "p" + fmtFloat(p) }

func summarize(h *hdrhistogram.Histogram) Summary {
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	s := Summary{Count: h.TotalCount(), P: map[string]time.Duration{}}
	if s.Count == 0 {
		return s
	}
	s.Min, s.Max, s.Mean = us(h.Min()), us(h.Max()), time.Duration(h.Mean()*float64(time.Microsecond))
	for _, p := range Percentiles {
		s.P[pname(p)] = us(h.ValueAtQuantile(p))
	}
	return s
}

// Point is one bucket of the over-time series, by intended send time.
// Latency fields are nanoseconds in JSON; zero when the bucket had none.
type Point struct {
	T          float64       `json:"t_s"` // bucket start, seconds since the first intended send
	TargetRate float64       `json:"target_rate"`
	Sent       int           `json:"sent"` // submits actually sent in this bucket (by send time)
	Errors     int           `json:"errors"`
	Backlog    int64         `json:"backlog"` // WAITING jobs of this run at the bucket's end (-1: unknown)
	SubmitP50  time.Duration `json:"submit_p50_ns"`
	SubmitP99  time.Duration `json:"submit_p99_ns"`
	SubmitMax  time.Duration `json:"submit_max_ns"`
	PickupP50  time.Duration `json:"pickup_p50_ns"`
	PickupP99  time.Duration `json:"pickup_p99_ns"`
	PickupMax  time.Duration `json:"pickup_max_ns"`
	FinishP99  time.Duration `json:"finish_p99_ns"`
}

// Result is one run's outcome; it is what loadtest.json holds.
type Result struct {
	Name      string        `json:"name"`
	Targets   []string      `json:"targets"`
	Stages    []Stage       `json:"stages"`
	JobType   string        `json:"job_type"`
	KeyPrefix string        `json:"key_prefix"`
	Start     time.Time     `json:"start"`       // first intended send, local clock
	Duration  time.Duration `json:"duration_ns"` // schedule length
	// Requests counts submits sent; OK the 2xx answers; Errors the rest
	// (transport errors, timeouts, non-2xx). ErrorRate = Errors/Requests.
	Requests     int            `json:"requests"`
	OK           int            `json:"ok"`
	Errors       int            `json:"errors"`
	ErrorRate    float64        `json:"error_rate"`
	ErrorKinds   map[string]int `json:"error_kinds,omitempty"`
	AchievedRate float64        `json:"achieved_rate"` // responses per second over the schedule's length
	// SendLagMax is the worst lateness of an actual send behind its
	// intended time: the load generator's own saturation.
	SendLagMax time.Duration `json:"send_lag_max_ns"`
	// Submit is intended send → response (coordinated-omission free).
	// SubmitUncorrected is vegeta's actual send → response, for contrast.
	Submit            Summary `json:"submit"`
	SubmitUncorrected Summary `json:"submit_uncorrected"`
	// Pickup is intended send → first claim (job_execution.started_at of
	// attempt 1); Finish is intended send → job_queue.finished_at. Jobs
	// not started (finished) by the end of the drain are recorded with
	// their age at that moment, a lower bound, and counted in Unstarted
	// (Unfinished). Both empty without a DSN.
	Pickup     Summary `json:"pickup"`
	Finish     Summary `json:"finish"`
	Unstarted  int     `json:"unstarted"`
	Unfinished int     `json:"unfinished"`
	// Throughput is finished jobs per second, first intended send → last
	// finish (0 without a DSN).
	Throughput float64       `json:"throughput"`
	Drain      time.Duration `json:"drain_ns"` // last response → every job terminal (or the drain timeout)
	Clock      *ClockReport  `json:"clock,omitempty"`
	Series     []Point       `json:"series"`
	Thresholds []Verdict     `json:"thresholds,omitempty"`
	Pass       bool          `json:"pass"`

	hSubmit, hRaw, hPickup, hFinish *hdrhistogram.Histogram
}

// Histograms returns the HdrHistograms (µs) behind Submit, Pickup and
// Finish, for spectrum output.
func (r *Result) Histograms() (submit, pickup, finish *hdrhistogram.Histogram) {
	return r.hSubmit, r.hPickup, r.hFinish
}

// ErrNoAcks is returned when a run got no 2xx answer at all.
var ErrNoAcks = errors.New("loadtest: no submit was acknowledged")

// Run sends cfg.Stages' submits open-model across cfg.Targets, waits for
// the jobs to finish (with a DSN), reads their times back and returns the
// latencies. Thresholds are evaluated when given. It returns an error only
// when the run could not be carried out; failed thresholds show in
// Result.Pass.
func Run(ctx context.Context, cfg Config, thresholds []Threshold) (*Result, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	for _, t := range thresholds {
		if t.NeedsDB() && cfg.DSN == "" {
			return nil, fmt.Errorf("threshold %q: %s is read from job rows and needs a DSN (--dsn or JOBQ_DSN)", t.Expr, t.Metric)
		}
	}
	sched := newSchedule(cfg.Stages)
	var st *store.Store
	var before probe
	if cfg.DSN != "" {
		var err error
		st, err = store.Open(ctx, cfg.DSN, store.PoolConfig{MaxOpen: 4})
		if err != nil {
			return nil, err
		}
		defer st.Close()
		if before, err = probeClock(ctx, st.DB()); err != nil {
			return nil, err
		}
	}
	bl := newBacklogSampler(ctx, st, cfg.KeyPrefix, cfg.Bucket)
	defer bl.stop()
	origProgress := cfg.ProgressFunc
	t0, samples := attack(ctx, cfg, sched, bl)
	lastResp := t0
	for i := range samples {
		if d := samples[i].done(); d.After(lastResp) {
			lastResp = d
		}
	}

	r := &Result{Name: cfg.Name, Targets: cfg.Targets, Stages: cfg.Stages, JobType: cfg.JobType, KeyPrefix: cfg.KeyPrefix,
		Start: t0, Duration: sched.Duration(), ErrorKinds: map[string]int{},
		hSubmit: newHist(), hRaw: newHist(), hPickup: newHist(), hFinish: newHist()}

	// Drain: wait until every job of this run is terminal.
	var drainEnd time.Time
	if st != nil {
		deadline := time.Now().Add(cfg.DrainTimeout)
		for {
			n, err := countUnfinished(ctx, st.DB(), cfg.KeyPrefix)
			if err != nil {
				return nil, err
			}
			if origProgress != nil {
				origProgress(Progress{Name: cfg.Name, Phase: "drain", Elapsed: time.Since(t0), Due: sched.Total(),
					Total: sched.Total(), Done: uint64(len(samples)), Errors: uint64(countErrors(samples)), Backlog: bl.last()})
			}
			if n == 0 || time.Now().After(deadline) || ctx.Err() != nil {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
		drainEnd = time.Now()
		r.Drain = drainEnd.Sub(lastResp)
	}
	bl.stop()
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	var times map[string]jobTimes
	if st != nil {
		var err error
		if times, err = readJobTimes(ctx, st.DB(), cfg.KeyPrefix); err != nil {
			return nil, err
		}
		after, err := probeClock(ctx, st.DB())
		if err != nil {
			return nil, err
		}
		r.Clock = &ClockReport{Offset: (before.offset + after.offset) / 2, Uncertainty: max(before.rtt, after.rtt) / 2,
			Drift: after.offset - before.offset}
	}
	r.fill(samples, times, sched, cfg.Bucket, drainEnd, bl.series())
	if r.OK == 0 {
		return r, fmt.Errorf("%w: %d requests, first error: %s", ErrNoAcks, r.Requests, firstError(samples))
	}
	r.Pass = true
	for _, t := range thresholds {
		v := t.Eval(r)
		r.Thresholds = append(r.Thresholds, v)
		r.Pass = r.Pass && v.Pass
	}
	return r, nil
}

func countErrors(samples []sample) (n int) {
	for i := range samples {
		if !samples[i].ok() {
			n++
		}
	}
	return n
}

func firstError(samples []sample) string {
	for _, s := range samples {
		if !s.ok() {
			return s.err
		}
	}
	return "none"
}

func sortSamples(s []sample) { sort.Slice(s, func(i, j int) bool { return s[i].seq < s[j].seq }) }

// fill computes every number of r from the samples and read-back times.
func (r *Result) fill(samples []sample, times map[string]jobTimes, sched *schedule, bucket time.Duration,
	drainEnd time.Time, backlogs map[int]int64) {
	type agg struct{ submit, pickup, finish *hdrhistogram.Histogram }
	nb := int((sched.Duration()+bucket-1)/bucket) + 1
	buckets := make([]agg, nb)
	r.Series = make([]Point, nb)
	for i := range buckets {
		buckets[i] = agg{newHist(), newHist(), newHist()}
		r.Series[i].T = (time.Duration(i) * bucket).Seconds()
		r.Series[i].TargetRate = sched.Rate(time.Duration(i) * bucket)
		r.Series[i].Backlog = -1
		if n, ok := backlogs[i]; ok {
			r.Series[i].Backlog = n
		}
	}
	bidx := func(t time.Time) int { return min(max(int(t.Sub(r.Start)/bucket), 0), nb-1) }
	var lastFinish time.Time
	finished := 0
	var off time.Duration
	lo, hi := time.Duration(-1<<62), time.Duration(1<<62)
	if r.Clock != nil {
		off = r.Clock.Offset
	}
	toLocal := func(db time.Time) time.Time { return db.Add(-off) }
	for i := range samples {
		s := &samples[i]
		r.Requests++
		b := bidx(s.intended)
		r.Series[bidx(s.sent)].Sent++
		r.SendLagMax = max(r.SendLagMax, s.sent.Sub(s.intended))
		record(r.hSubmit, s.submitLatency())
		record(r.hRaw, s.raw)
		record(buckets[b].submit, s.submitLatency())
		if !s.ok() {
			r.Errors++
			r.Series[b].Errors++
			r.ErrorKinds[errorKind(s.err)]++
			continue
		}
		r.OK++
		if times == nil {
			continue
		}
		jt, found := times[s.jobKey]
		if !found {
			r.Unstarted++
			r.Unfinished++
			continue
		}
		lo = max(lo, jt.create.Sub(s.done().Round(0)))
		hi = min(hi, jt.create.Sub(s.sent.Round(0)))
		r.Clock.BoundsJobs++
		intended := s.intended.Round(0)
		if jt.started.IsZero() {
			r.Unstarted++
			record(r.hPickup, drainEnd.Sub(s.intended))
			record(buckets[b].pickup, drainEnd.Sub(s.intended))
		} else {
			d := toLocal(jt.started).Sub(intended)
			record(r.hPickup, d)
			record(buckets[b].pickup, d)
		}
		if jt.finished.IsZero() {
			r.Unfinished++
			record(r.hFinish, drainEnd.Sub(s.intended))
			record(buckets[b].finish, drainEnd.Sub(s.intended))
		} else {
			f := toLocal(jt.finished)
			record(r.hFinish, f.Sub(intended))
			record(buckets[b].finish, f.Sub(intended))
			finished++
			if f.After(lastFinish) {
				lastFinish = f
			}
		}
	}
	if r.Requests > 0 {
		r.ErrorRate = float64(r.Errors) / float64(r.Requests)
	}
	if len(r.ErrorKinds) == 0 {
		r.ErrorKinds = nil
	}
	r.AchievedRate = float64(r.Requests) / r.Duration.Seconds()
	if finished > 0 && lastFinish.After(r.Start) {
		r.Throughput = float64(finished) / lastFinish.Sub(r.Start.Round(0)).Seconds()
	}
	if r.Clock != nil && r.Clock.BoundsJobs > 0 {
		r.Clock.BoundsLow, r.Clock.BoundsHigh = lo, hi
		r.Clock.OffsetInBounds = r.Clock.Offset+r.Clock.Uncertainty >= lo && r.Clock.Offset-r.Clock.Uncertainty <= hi
	}
	r.Submit, r.SubmitUncorrected = summarize(r.hSubmit), summarize(r.hRaw)
	r.Pickup, r.Finish = summarize(r.hPickup), summarize(r.hFinish)
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	for i, a := range buckets {
		p := &r.Series[i]
		if a.submit.TotalCount() > 0 {
			p.SubmitP50, p.SubmitP99, p.SubmitMax = us(a.submit.ValueAtQuantile(50)), us(a.submit.ValueAtQuantile(99)), us(a.submit.Max())
		}
		if a.pickup.TotalCount() > 0 {
			p.PickupP50, p.PickupP99, p.PickupMax = us(a.pickup.ValueAtQuantile(50)), us(a.pickup.ValueAtQuantile(99)), us(a.pickup.Max())
		}
		if a.finish.TotalCount() > 0 {
			p.FinishP99 = us(a.finish.ValueAtQuantile(99))
		}
	}
}

// errorKind shortens an error to its kind for ErrorKinds ("HTTP 503",
// "timeout", "connection refused", …).
func errorKind(e string) string {
	switch {
	case len(e) >= 8 && e[:5] == "HTTP ":
		return e[:8]
	case contains(e, "Client.Timeout") || contains(e, "deadline exceeded") || contains(e, "timeout"):
		return "timeout"
	case contains(e, "connection refused"):
		return "connection refused"
	case contains(e, "connection reset"):
		return "connection reset"
	}
	if len(e) > 60 {
		return e[:60]
	}
	return e
}

// backlogSampler reads this run's backlog (WAITING jobs) once per bucket
// from the database, for the live progress and the series. Without a store
// every reading is -1.
type backlogSampler struct {
	mu       sync.Mutex
	t0       time.Time
	started  chan time.Time
	readings map[int]int64
	latest   int64
	quit     chan struct{}
	done     chan struct{}
	once     sync.Once
}

func newBacklogSampler(ctx context.Context, st *store.Store, prefix string, bucket time.Duration) *backlogSampler {
	b := &backlogSampler{started: make(chan time.Time, 1), readings: map[int]int64{}, latest: -1,
		quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(b.done)
		if st == nil {
			return
		}
		var t0 time.Time
		select {
		case t0 = <-b.started:
		case <-b.quit:
			return
		}
		n := countBacklog(ctx, st.DB(), prefix)
		b.mu.Lock()
		b.latest = n
		b.mu.Unlock()
		tick := time.NewTicker(bucket)
		defer tick.Stop()
		for {
			select {
			case <-b.quit:
				return
			case now := <-tick.C:
				n := countBacklog(ctx, st.DB(), prefix)
				b.mu.Lock()
				b.latest = n
				b.readings[int(now.Sub(t0)/bucket)-1] = n
				b.mu.Unlock()
			}
		}
	}()
	return b
}

// start tells the sampler when the schedule began.
func (b *backlogSampler) start(t0 time.Time) { b.started <- t0 }

// last returns the latest reading (-1: none or no database).
func (b *backlogSampler) last() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.latest
}

// series returns the readings by bucket index.
func (b *backlogSampler) series() map[int]int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.readings)
}

// stop ends sampling and waits for the goroutine; safe to call twice.
func (b *backlogSampler) stop() {
	b.once.Do(func() { close(b.quit) })
	<-b.done
}
