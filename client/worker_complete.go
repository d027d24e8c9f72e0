package client

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/jobq/jobq/apitype"
)

// The completion sender. A handler's outcome is queued here and its run
// slot freed at once: the next job runs while the outcome travels. The
// sender POSTs pending completions in batches (POST
// /v1/workers/complete:batch) with at most completeCallsMax calls in
// flight, so under load each batch holds what finished while the previous
// calls were out, and a lone completion is sent at once. Until a job's
// completion is acknowledged the job stays held: its lease is renewed by
// the heartbeats. A call whose answer was lost (a network error, 5xx, 429)
// is sent again as it was — the same completions, the same bytes — after
// a backoff, until its jobs' lease deadlines.

// Limits of the completion sender.
const (
	// completeCallsMax is how many batch calls are in flight at once.
	completeCallsMax = 4
	// completeSingleCallsMax is how many single completion calls are in
	// flight at once when the replica has no batch route.
	completeSingleCallsMax = 64
	// completeBatchMax is the most completions one batch call carries (the
	// replica writes up to 500 in one transaction).
	completeBatchMax = 500
	// completeBatchBytesMax bounds the completion bodies of one batch call
	// (the replica takes up to 16 MiB).
	completeBatchBytesMax = 4 << 20
	// completeAloneBytes: a completion body larger than this goes alone, by
	// POST /v1/workers/complete (an output that large is refused anyway and
	// reported as a failure).
	completeAloneBytes = 1 << 20
)

// completion is a finished job's outcome waiting for its acknowledgement.
type completion struct {
	hj   *heldJob
	body apitype.CompleteRequest
	// raw is body encoded once: every retry sends these bytes.
	raw json.RawMessage
	// alone sends it by the single route: too large for a batch, or in a
	// batch the replica refused as a whole.
	alone bool
}

// sendCall is one completion call: a batch, or one completion by the
// single route. A call that is retried is sent again as it is.
type sendCall struct {
	cs        []*completion
	single    bool          // POST /v1/workers/complete with cs[0]
	body      []byte        // the batch's body, encoded once
	backoff   time.Duration // the wait before the next retry
	notBefore time.Time     // not sent before this (a retry's backoff)
}

// answer is what the replica said to one completion.
type answer struct {
	result  string // apitype.CompleteApplied … CompleteInvalid; "" to retry; "refused" for any other 4xx
	status  string // the job's status, when applied
	code    string // the error's code and message, when refused
	message string
	err     error // the call's error, when retried or refused
}

const answerRefused = "refused"

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (w *Worker) wakeSender() { notify(w.sendWake) }

// queueLocked frees hj's run slot and queues its completion body (w.mu is
// held).
func (w *Worker) queueLocked(hj *heldJob, body apitype.CompleteRequest) {
	raw, err := json.Marshal(body)
	if err != nil { // cannot happen: every field marshals
		w.log.Error("completion not encodable", "job_id", hj.job.ID, "err", err)
		w.dropLocked(hj)
		return
	}
	w.freeSlotLocked(hj)
	if !hj.completing {
		hj.completing = true
		w.pending++
	}
	w.outbox = append(w.outbox, &completion{hj: hj, body: body, raw: raw, alone: len(raw) > completeAloneBytes})
	w.wakeSender()
}

// freeSlotLocked frees hj's run slot, if it has one, for the next queued
// job or fetch (w.mu is held).
func (w *Worker) freeSlotLocked(hj *heldJob) {
	if hj.slot {
		hj.slot = false
		w.running--
		w.startQueuedLocked()
		notify(w.freed)
	}
}

// dropLocked forgets hj: its slot and its pending completion, if any, are
// freed (w.mu is held). Dropping twice does nothing.
func (w *Worker) dropLocked(hj *heldJob) {
	if hj.dropped {
		return
	}
	hj.dropped = true
	w.unqueueLocked(hj)
	w.freeSlotLocked(hj)
	if hj.completing {
		hj.completing = false
		w.pending--
	}
	delete(w.held, hj.job.token)
	hj.cancel(context.Canceled)
	w.wg.Done()
	notify(w.freed)
}

func (w *Worker) drop(hj *heldJob) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dropLocked(hj)
}

// sendLoop sends the queued completions until stop is closed (Run closes
// it once every held job was dropped).
func (w *Worker) sendLoop(stop <-chan struct{}) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		c, wait := w.nextCall(time.Now())
		if c != nil {
			w.sendWG.Add(1)
			go func() {
				defer w.sendWG.Done()
				w.send(c)
			}()
			continue
		}
		timer.Reset(cmp.Or(wait, time.Hour))
		select {
		case <-stop:
			return
		case <-w.sendWake:
		case <-timer.C:
		}
	}
}

// nextCall returns the next completion call to make, when one may start: a
// retry whose backoff ended, else the completions not sent yet, up to the
// batch limits. It drops the unsent completions of jobs that lost their
// lease, and says how long until the earliest retry is due (0: none
// waits).
func (w *Worker) nextCall(now time.Time) (c *sendCall, wait time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	keep := w.outbox[:0]
	for _, x := range w.outbox {
		if x.hj.lost {
			w.log.Info("job lost its lease; outcome not reported", "job_id", x.hj.job.ID, "attempt", x.hj.job.Attempt)
			w.dropLocked(x.hj)
			continue
		}
		keep = append(keep, x)
	}
	clear(w.outbox[len(keep):])
	w.outbox = keep
	single := w.single.Load()
	calls := completeCallsMax
	if single {
		calls = completeSingleCallsMax
	}
	due := -1
	for i, r := range w.retries {
		if !r.notBefore.After(now) {
			if due < 0 {
				due = i
			}
		} else if d := r.notBefore.Sub(now); wait == 0 || d < wait {
			wait = d
		}
	}
	if w.sending >= calls {
		return nil, wait
	}
	if due >= 0 {
		c = w.retries[due]
		w.retries = slices.Delete(w.retries, due, due+1)
		w.sending++
		return c, wait
	}
	if len(w.outbox) == 0 {
		return nil, wait
	}
	c = &sendCall{backoff: completeBackoffMin}
	if x := w.outbox[0]; single || x.alone {
		c.cs, c.single = []*completion{x}, true
		w.outbox = w.outbox[1:]
	} else {
		size, n := 0, 0
		for _, x := range w.outbox {
			if x.alone || n == completeBatchMax || (n > 0 && size+len(x.raw) > completeBatchBytesMax) {
				break
			}
			size += len(x.raw)
			n++
		}
		c.cs = slices.Clone(w.outbox[:n])
		w.outbox = w.outbox[n:]
	}
	if len(w.outbox) == 0 {
		w.outbox = nil // let the backing array go
	}
	w.sending++
	return c, wait
}

// send makes completion call c and settles each completion by its answer.
func (w *Worker) send(c *sendCall) {
	defer func() {
		w.mu.Lock()
		w.sending--
		w.mu.Unlock()
		w.wakeSender()
	}()
	if c.single {
		var resp apitype.CompleteResponse
		err := w.call(context.Background(), "/v1/workers/complete", c.cs[0].raw, &resp)
		if a := singleAnswer(resp, err); a.result == "" {
			w.retryLater(c, err)
		} else {
			w.settle(c.cs[0], a)
		}
		return
	}
	if c.body == nil {
		items := make([]json.RawMessage, len(c.cs))
		for i, x := range c.cs {
			items[i] = x.raw
		}
		b, err := json.Marshal(struct {
			Completions []json.RawMessage `json:"completions"`
		}{items})
		if err != nil { // cannot happen: the items were marshalled
			w.log.Error("completion batch not encodable", "err", err)
			w.requeue(c.cs, true)
			return
		}
		c.body = b
	}
	var resp apitype.CompleteBatchResponse
	err := w.call(context.Background(), "/v1/workers/complete:batch", json.RawMessage(c.body), &resp)
	if err == nil && len(resp.Results) != len(c.cs) {
		err = fmt.Errorf("%w: %d results for %d completions", errBatchShape, len(resp.Results), len(c.cs))
	}
	var ae *APIError
	switch {
	case errors.Is(err, errBatchShape):
		// The batch may or may not have been applied: each completion is
		// sent again alone, where a repeat of an applied outcome answers
		// "applied" (completion is idempotent by token and outcome).
		w.log.Warn("completion batch answer unreadable; sending its completions one by one", "jobs", len(c.cs), "err", err)
		w.requeue(c.cs, true)
	case err == nil:
		for i, x := range c.cs {
			w.settle(x, batchAnswer(resp.Results[i]))
		}
	case errors.As(err, &ae) && (ae.Status == http.StatusNotFound || ae.Status == http.StatusMethodNotAllowed):
		if w.single.CompareAndSwap(false, true) {
			w.log.Info("the replica has no batch completion route; completing one job per call", "err", err)
		}
		w.requeue(c.cs, false)
	case errors.As(err, &ae) && (ae.Status == http.StatusBadRequest || ae.Status == http.StatusRequestEntityTooLarge):
		w.log.Warn("completion batch refused as a whole; sending its completions one by one", "jobs", len(c.cs), "err", err)
		w.requeue(c.cs, true)
	case errors.As(err, &ae) && !retryable(ae.Status):
		w.log.Error("completion batch refused", "jobs", len(c.cs), "err", err)
		w.mu.Lock()
		for _, x := range c.cs {
			w.dropLocked(x.hj)
		}
		w.mu.Unlock()
	default:
		w.retryLater(c, err)
	}
}

// errBatchShape is a 200 answer to a batch call that does not hold one
// result per completion sent: no result can be matched to its completion.
var errBatchShape = errors.New("/v1/workers/complete:batch: answer does not match the batch")

// retryable reports whether an answer with status may succeed if sent
// again: 5xx, 429 and 408.
func retryable(status int) bool {
	return status >= 500 || status == http.StatusTooManyRequests || status == http.StatusRequestTimeout
}

// singleAnswer reads the answer of POST /v1/workers/complete.
func singleAnswer(resp apitype.CompleteResponse, err error) answer {
	if err == nil {
		return answer{result: apitype.CompleteApplied, status: resp.Status}
	}
	var ae *APIError
	if !errors.As(err, &ae) || retryable(ae.Status) {
		return answer{err: err}
	}
	a := answer{code: ae.Detail.Code, message: ae.Detail.Message, err: err}
	switch ae.Status {
	case http.StatusConflict:
		a.result = apitype.CompleteStale
		if ae.Detail.Code == apitype.CompleteConflict {
			a.result = apitype.CompleteConflict
		}
	case http.StatusForbidden:
		a.result = apitype.CompleteForbidden
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		a.result = apitype.CompleteInvalid
	default:
		a.result = answerRefused
	}
	return a
}

// batchAnswer reads one result of POST /v1/workers/complete:batch.
func batchAnswer(r apitype.CompleteBatchResult) answer {
	a := answer{result: r.Result, status: r.Status}
	if r.Error != nil {
		a.code, a.message = r.Error.Code, r.Error.Message
		a.err = fmt.Errorf("%s %s: %s", r.Result, r.Error.Code, r.Error.Message)
	}
	switch r.Result {
	case apitype.CompleteApplied, apitype.CompleteStale, apitype.CompleteConflict, apitype.CompleteForbidden, apitype.CompleteInvalid:
	default:
		a.result = answerRefused
		a.err = fmt.Errorf("unknown result %q", r.Result)
	}
	return a
}

// settle acts on the replica's answer to completion x: done (applied,
// stale, conflict, refused), or — a success refused as invalid or too
// large — queued again as a failure carrying the replica's message.
func (w *Worker) settle(x *completion, a answer) {
	job := x.hj.job
	switch a.result {
	case apitype.CompleteApplied:
		w.log.Debug("job completed", "job_id", job.ID, "attempt", job.Attempt, "outcome", x.body.Outcome, "status", a.status)
	case apitype.CompleteStale, apitype.CompleteConflict:
		w.log.Info("completion refused: the attempt no longer holds the job or another outcome was applied",
			"job_id", job.ID, "attempt", job.Attempt, "code", a.code)
	case apitype.CompleteInvalid:
		if x.body.Outcome == outcomeSuccess {
			w.log.Warn("success refused; reporting it as a failure", "job_id", job.ID, "attempt", job.Attempt, "err", a.err)
			retry := false
			body := apitype.CompleteRequest{TaskToken: x.body.TaskToken, Outcome: outcomeFailure, Error: a.message, Retry: &retry}
			if raw, err := json.Marshal(body); err == nil {
				w.requeue([]*completion{{hj: x.hj, body: body, raw: raw, alone: x.alone}}, false)
				return
			}
		}
		w.log.Error("completion refused", "job_id", job.ID, "attempt", job.Attempt, "err", a.err)
	default:
		w.log.Error("completion refused", "job_id", job.ID, "attempt", job.Attempt, "err", a.err)
	}
	w.drop(x.hj)
}

// requeue puts completions back among those not sent yet; alone sends
// each by the single route.
func (w *Worker) requeue(cs []*completion, alone bool) {
	w.mu.Lock()
	for _, x := range cs {
		x.alone = x.alone || alone
		w.outbox = append(w.outbox, x)
	}
	w.mu.Unlock()
	w.wakeSender()
}

// retryLater sends call c again after its backoff (100 ms doubling to 5
// s), without the completions whose retry would fall past their job's lease
// deadline (renewed by every heartbeat): those are given up, and their jobs
// will be rescued.
func (w *Worker) retryLater(c *sendCall, err error) {
	now := time.Now()
	w.mu.Lock()
	keep := c.cs[:0]
	for _, x := range c.cs {
		if now.Add(c.backoff).After(x.hj.deadline) {
			w.log.Error("completion not acknowledged before the lease deadline; the job will be rescued",
				"job_id", x.hj.job.ID, "attempt", x.hj.job.Attempt, "err", err)
			w.dropLocked(x.hj)
			continue
		}
		keep = append(keep, x)
	}
	if len(keep) < len(c.cs) {
		c.body = nil // encoded again without the given-up ones
	}
	c.cs = keep
	backoff := c.backoff
	if len(keep) > 0 {
		c.notBefore = now.Add(backoff)
		c.backoff = min(2*backoff, completeBackoffMax)
		w.retries = append(w.retries, c)
	}
	w.mu.Unlock()
	if len(keep) > 0 {
		w.log.Warn("completion failed; retrying", "jobs", len(keep), "err", err, "backoff", backoff)
		w.wakeSender()
	}
}
