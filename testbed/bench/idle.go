package bench

import (
	"context"
	"fmt"
	"time"
)

// IdlePoint is the cost of one replica on an empty queue.
type IdlePoint struct {
	Strategy string  `json:"strategy"`
	Seconds  float64 `json:"seconds"`
	// QueriesPerSecond is the replica's own statements per second
	// (StmtCounter): exact whoever else uses the server. Target ≤ 1.2, set
	// when an idle replica sent one probe per scan (1 s ± 200 ms) plus one
	// rescue scan every 10 s. What runs now, at the defaults with no alert
	// rule: those two, the promoter's probe every 5 s ± 20 %, and once per
	// 30 s each the idle-transaction reaper's probe (the pool here has no
	// idle_transaction_timeout: the MySQL case; poked sooner only by a
	// rescue that finds a row held), the operations refresh (2 reads) and
	// the alert rules read. Over 21 s the first three are 21 + 2 + about 4
	// statements (1.3/s); each of the others adds 1/21 when it falls in
	// the window.
	QueriesPerSecond float64 `json:"queries_per_s"`
	// ServerQuestionsPerSecond is the SHOW GLOBAL STATUS Questions delta per
	// second over the same window: everyone's statements, an upper bound.
	ServerQuestionsPerSecond float64 `json:"server_questions_per_s"`
}

// measureIdle starts one in-process replica of spec on an empty queue,
// lets it settle for a scan, then counts its statements over d.
func (h *Harness) measureIdle(ctx context.Context, spec PointSpec, d time.Duration) (IdlePoint, error) {
	ip := IdlePoint{Strategy: spec.Strategy, Seconds: d.Seconds()}
	if err := h.env.Reset(ctx); err != nil {
		return ip, err
	}
	// In-process even with --procs: the replica's own statement count is
	// only observable through its pool (a process's would be mixed into
	// the server-wide counters).
	spec.Replicas, spec.Procs = 1, false
	r := h.newRunner(spec, false)
	defer r.Stop()
	if err := r.Start(ctx); err != nil {
		return ip, fmt.Errorf("idle %s: %w", spec.Strategy, err)
	}
	// Skip the start-up statements (server detection) and the first tick.
	if !sleepCtx(ctx, 1500*time.Millisecond) {
		return ip, ctx.Err()
	}
	c0 := r.Counters().Statements
	s0, err := ReadStatus(ctx, h.env.Admin)
	if err != nil {
		return ip, err
	}
	t0 := time.Now()
	if !sleepCtx(ctx, d) {
		return ip, ctx.Err()
	}
	c1 := r.Counters().Statements
	el := time.Since(t0)
	s1, err := ReadStatus(ctx, h.env.Admin)
	if err != nil {
		return ip, err
	}
	ip.QueriesPerSecond = rate(c1-c0, el)
	// The harness's own SHOW GLOBAL STATUS is one of the Questions counted.
	ip.ServerQuestionsPerSecond = rate(s1.Sub(s0)["Questions"]-1, el)
	return ip, nil
}
