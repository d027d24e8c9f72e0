package bench

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/client"
	"github.com/jobq/jobq/jobtypes"
)

// Percentiles summarise an HdrHistogram of durations, in milliseconds.
type Percentiles struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p999_ms"`
	Max   float64 `json:"max_ms"`
	Mean  float64 `json:"mean_ms"`
}

// newHist records microseconds from 1 µs to 10 min with 3 significant digits.
func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, 600_000_000, 3) }

func recordDur(h *hdrhistogram.Histogram, d time.Duration) {
	_ = h.RecordValue(max(1, min(d.Microseconds(), h.HighestTrackableValue())))
}

// Summarize reads the percentiles of h (values in µs).
func Summarize(h *hdrhistogram.Histogram) Percentiles {
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return Percentiles{Count: h.TotalCount(), P50: ms(h.ValueAtQuantile(50)), P90: ms(h.ValueAtQuantile(90)),
		P99: ms(h.ValueAtQuantile(99)), P999: ms(h.ValueAtQuantile(99.9)), Max: ms(h.Max()), Mean: h.Mean() / 1000}
}

// LatencyPoint is pickup latency under open-model load at one rate.
type LatencyPoint struct {
	Strategy string `json:"strategy"`
	Replicas int    `json:"replicas"`
	// Rate is the intended arrival rate (jobs/s), constant, submitted
	// round-robin through the replicas' HTTP APIs, each request sent at its
	// intended time whatever earlier requests did (open model).
	Rate     int     `json:"rate_jobs_per_s"`
	Seconds  float64 `json:"seconds"`
	Sent     int     `json:"sent"`
	Accepted int     `json:"accepted"` // 201 answers
	Errors   int     `json:"errors"`
	// Pickup is started_at − run_at of every accepted job, both from the
	// database clock: from the submit's INSERT to the claim.
	Pickup Percentiles `json:"pickup"`
	// Submit is the HTTP round trip measured from each request's intended
	// send time (no coordinated omission).
	Submit Percentiles `json:"submit"`
	// ClassicOverP50/P99 are the classic baseline's pickup percentiles at
	// the same rate divided by this point's (how many times faster).
	ClassicOverP50 float64 `json:"classic_over_p50"`
	ClassicOverP99 float64 `json:"classic_over_p99"`
}

// measureLatency runs spec's runner with HTTP APIs and submits rate jobs/s
// for d, then waits for every job to finish and reads pickup latencies.
func (h *Harness) measureLatency(ctx context.Context, spec PointSpec, rateJobs int, d time.Duration) (LatencyPoint, error) {
	lp := LatencyPoint{Strategy: spec.Strategy, Replicas: spec.Replicas, Rate: rateJobs, Seconds: d.Seconds()}
	if err := h.env.Reset(ctx); err != nil {
		return lp, err
	}
	r := h.newRunner(spec, true)
	defer r.Stop()
	if err := r.Start(ctx); err != nil {
		return lp, fmt.Errorf("latency %s: start: %w", spec.Label(), err)
	}
	urls := r.APIs()
	if len(urls) == 0 {
		return lp, fmt.Errorf("latency %s: runner has no API", spec.Label())
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 0, IdleConnTimeout: 30 * time.Second}
	defer tr.CloseIdleConnections()
	clients := make([]*client.Client, len(urls))
	for i, u := range urls {
		clients[i] = client.New(u)
		clients[i].HTTP = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	}
	h.env.seq++
	prefix := fmt.Sprintf("lat%d-", h.env.seq)
	n := int(float64(rateJobs) * d.Seconds())
	submitH := newHist()
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		intended := start.Add(time.Duration(float64(i) / float64(rateJobs) * float64(time.Second)))
		if !sleepCtx(ctx, time.Until(intended)) {
			break
		}
		lp.Sent++
		c := clients[i%len(clients)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, created, err := c.Submit(ctx, apitype.SubmitRequest{JobKey: fmt.Sprintf("%s%d", prefix, i), JobType: jobtypes.Noop})
			took := time.Since(intended)
			mu.Lock()
			defer mu.Unlock()
			recordDur(submitH, took)
			if err != nil || !created {
				lp.Errors++
				return
			}
			lp.Accepted++
		}()
	}
	wg.Wait()
	// Wait until every job finished (the classic design picks up within a poll).
	deadline := time.Now().Add(30 * time.Second)
	for {
		left, err := h.env.Remaining(ctx)
		if err != nil {
			return lp, err
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			return lp, fmt.Errorf("latency %s at %d/s: %d jobs still unfinished after 30s", spec.Label(), rateJobs, left)
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
	pickups, err := h.env.Pickups(ctx, prefix)
	if err != nil {
		return lp, err
	}
	ph := newHist()
	for _, p := range pickups {
		recordDur(ph, p)
	}
	lp.Pickup = Summarize(ph)
	lp.Submit = Summarize(submitH)
	return lp, ctx.Err()
}
