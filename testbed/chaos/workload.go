package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/client"
	"github.com/jobq/jobq/testbed/chaos/checker"
	"github.com/jobq/jobq/testbed/chaos/remoteworker"
	"github.com/jobq/jobq/testbed/jobtypes"
)

// submitTimeout bounds one HTTP submit; a paused or partitioned replica
// must not stall the open-loop workload.
const submitTimeout = 2 * time.Second

// submitDeadline bounds all tries of one submit across replicas.
const submitDeadline = 20 * time.Second

// workload submits cfg.Jobs jobs open-loop at cfg.Rate: job i is due at
// start + i/Rate whatever happened to earlier submits (no coordinated
// omission); each goes to replica i mod N and, on a transport error or a
// 5xx, to the next one with the same job_key (idempotent). It returns the
// submit log in job order.
func (cl *cluster) workload(ctx context.Context, start time.Time, runID string, toDB func(time.Time) time.Time, done *atomic.Int64) []checker.Submit {
	cfg := cl.cfg
	rt, _ := ParseRuntime(cfg.Runtime)
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x776f726b))
	reqs := make([]apitype.SubmitRequest, cfg.Jobs)
	// lead[i] > 0: job i is due that long after its send time.
	lead := make([]time.Duration, cfg.Jobs)
	poisoned := 0
	for i := range reqs {
		ms := rt.Sample(rng).Milliseconds()
		req := apitype.SubmitRequest{JobKey: fmt.Sprintf("chaos-%s-%06d", runID, i), JobType: "effect", MaxRetry: &cfg.MaxRetry}
		if cfg.PoisonJobs > 0 && i%(cfg.Jobs/cfg.PoisonJobs) == cfg.Jobs/cfg.PoisonJobs/2 && poisoned < cfg.PoisonJobs {
			poisoned++
			req.JobType, req.Params = jobtypes.Poison, json.RawMessage(`{}`)
		} else if rng.Float64() < cfg.FlakyFraction {
			req.JobType = "flaky"
			req.Params = json.RawMessage(fmt.Sprintf(`{"failures":%d,"ms":%d}`, cfg.FlakyFailures, ms))
		} else {
			req.Params = json.RawMessage(fmt.Sprintf(`{"ms":%d}`, ms))
		}
		// Drawn only when asked for, so other workloads keep their seeds.
		if cfg.RateLimited > 0 && req.JobType == "effect" && rng.Float64() < cfg.RateLimited {
			req.JobType = jobtypes.EffectLimited
			if cfg.RateKeys > 0 {
				req.RateKey = fmt.Sprintf("rk-%d", i%cfg.RateKeys)
			}
		}
		if cfg.FutureFraction > 0 && rng.Float64() < cfg.FutureFraction {
			lo := cfg.FutureMaxDelay / 6
			lead[i] = lo + time.Duration(rng.Int64N(int64(cfg.FutureMaxDelay-lo)+1))
		}
		if k := cfg.ConcurrencyKeys; k > 0 && i%4 != 3 {
			limit := 1 + (i%k)%2
			req.ConcurrencyKey, req.ConcurrencyLimit = fmt.Sprintf("chaos-%s-key-%04d", runID, i%k), &limit
		}
		if cfg.Executor == ExecutorRemote || (cfg.Executor == ExecutorMixed && i%2 == 1) {
			switch req.JobType {
			case "effect":
				req.JobType = remoteworker.Effect
			case "flaky":
				req.JobType = remoteworker.Flaky
			}
		}
		reqs[i] = req
	}
	hc := &http.Client{Timeout: submitTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 5 * time.Second}}
	defer hc.CloseIdleConnections()
	if cfg.Workflows {
		return cl.workflowWorkload(ctx, start, runID, reqs, rng, hc, toDB, done)
	}
	log := make([]checker.Submit, cfg.Jobs)
	sem := make(chan struct{}, 256)
	var wg sync.WaitGroup
	interval := time.Duration(float64(time.Second) / cfg.Rate)
	for i := range reqs {
		due := start.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
		if ctx.Err() != nil {
			log[i] = checker.Submit{Key: reqs[i].JobKey, Type: reqs[i].JobType, SentAt: toDB(due), Err: "not sent: run cancelled"}
			continue
		}
		if lead[i] > 0 {
			runAt := toDB(due).Add(lead[i]).UTC().Format(time.RFC3339Nano)
			reqs[i].RunAt = &runAt
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(i int, due time.Time) {
			defer func() { <-sem; wg.Done(); done.Add(1) }()
			log[i] = cl.submit(ctx, hc, i, reqs[i], due, toDB)
		}(i, due)
	}
	wg.Wait()
	return log
}

func (cl *cluster) submit(ctx context.Context, hc *http.Client, i int, req apitype.SubmitRequest, due time.Time, toDB func(time.Time) time.Time) checker.Submit {
	s := checker.Submit{Key: req.JobKey, Type: req.JobType, SentAt: toDB(due)}
	deadline := time.Now().Add(submitDeadline)
	for try := 0; ; try++ {
		n := cl.nodes[(i+try)%len(cl.nodes)]
		s.Tries++
		var err error
		if r := n.current(); r != nil && r.Alive() {
			c := client.New(r.URL())
			c.HTTP = hc
			job, _, e := c.Submit(ctx, req)
			if e == nil {
				s.JobID, s.Replica, s.AckedAt, s.Err = job.ID, n.name, toDB(time.Now()), ""
				return s
			}
			err = e
			var ae *client.APIError
			if errors.As(e, &ae) && ae.Status < 500 {
				// A 4xx will not change on another replica; Replica names
				// the one that refused.
				s.Err, s.Replica = e.Error(), n.name
				return s
			}
		} else {
			err = fmt.Errorf("%s is down", n.name)
		}
		s.Err = err.Error()
		if time.Now().After(deadline) || ctx.Err() != nil {
			return s
		}
		if try%len(cl.nodes) == len(cl.nodes)-1 {
			time.Sleep(100 * time.Millisecond) // every replica refused: back off a little
		}
	}
}

// workflowWorkload submits the jobs as random DAGs (Config.Workflows): the
// jobs are cut into workflows of 4–40 consecutive jobs; in each, every job
// but the first depends on 1–3 earlier ones at random (fan-out where many
// pick one parent, fan-in where one picks several). A workflow is sent at
// its first job's due time, open loop, to replica w mod N and on an error
// to the next (same workflow_key: idempotent). Every job of an
// acknowledged workflow is logged acknowledged with its id.
func (cl *cluster) workflowWorkload(ctx context.Context, start time.Time, runID string, reqs []apitype.SubmitRequest, rng *rand.Rand,
	hc *http.Client, toDB func(time.Time) time.Time, done *atomic.Int64) []checker.Submit {
	cfg := cl.cfg
	log := make([]checker.Submit, len(reqs))
	interval := time.Duration(float64(time.Second) / cfg.Rate)
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for a, w := 0, 0; a < len(reqs); w++ {
		b := min(len(reqs), a+4+rng.IntN(37))
		wreq := apitype.WorkflowSubmitRequest{WorkflowKey: fmt.Sprintf("chaos-%s-wf%05d", runID, w)}
		for i := a; i < b; i++ {
			reqs[i].RunAt = nil
			j := apitype.WorkflowJob{SubmitRequest: reqs[i]}
			if i > a {
				seen := map[int]bool{}
				for range 1 + rng.IntN(3) {
					p := a + rng.IntN(i-a)
					if !seen[p] {
						seen[p] = true
						j.DependsOn = append(j.DependsOn, apitype.DependencyRef{JobKey: reqs[p].JobKey})
					}
				}
			}
			wreq.Jobs = append(wreq.Jobs, j)
		}
		due := start.Add(time.Duration(a) * interval)
		if d := time.Until(due); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
		if ctx.Err() != nil {
			for i := a; i < b; i++ {
				log[i] = checker.Submit{Key: reqs[i].JobKey, Type: reqs[i].JobType, SentAt: toDB(due), Err: "not sent: run cancelled"}
			}
			a = b
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(w, a, b int, due time.Time) {
			defer func() { <-sem; wg.Done(); done.Add(int64(b - a)) }()
			cl.submitWorkflow(ctx, hc, w, wreq, log[a:b], due, toDB)
		}(w, a, b, due)
		a = b
	}
	wg.Wait()
	return log
}

func (cl *cluster) submitWorkflow(ctx context.Context, hc *http.Client, w int, req apitype.WorkflowSubmitRequest, log []checker.Submit, due time.Time, toDB func(time.Time) time.Time) {
	for i, j := range req.Jobs {
		log[i] = checker.Submit{Key: j.JobKey, Type: j.JobType, SentAt: toDB(due)}
	}
	deadline := time.Now().Add(submitDeadline)
	for try := 0; ; try++ {
		n := cl.nodes[(w+try)%len(cl.nodes)]
		var err error
		if r := n.current(); r != nil && r.Alive() {
			c := client.New(r.URL())
			c.HTTP = hc
			wf, _, e := c.SubmitWorkflow(ctx, req)
			if e == nil {
				ids := make(map[string]uint64, len(wf.Jobs))
				for _, j := range wf.Jobs {
					ids[j.JobKey] = j.ID
				}
				for i := range log {
					log[i].JobID, log[i].Replica, log[i].AckedAt, log[i].Err, log[i].Tries = ids[log[i].Key], n.name, toDB(time.Now()), "", try+1
				}
				return
			}
			err = e
			var ae *client.APIError
			if errors.As(e, &ae) && ae.Status < 500 {
				for i := range log {
					log[i].Err, log[i].Replica, log[i].Tries = e.Error(), n.name, try+1
				}
				return
			}
		} else {
			err = fmt.Errorf("%s is down", n.name)
		}
		for i := range log {
			log[i].Err, log[i].Tries = err.Error(), try+1
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return
		}
		if try%len(cl.nodes) == len(cl.nodes)-1 {
			time.Sleep(100 * time.Millisecond)
		}
	}
}
