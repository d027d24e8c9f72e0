package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/scheduler"
)

// rules are the protocol's rules (docs/workers.md, "What a worker library
// does"), each driven against every implementation.
var rules = []rule{
	{name: "success", title: "success with output recorded", run: ruleSuccess},
	{name: "failure_retry", title: "failure with retry, attempts counted", run: ruleFailureRetry},
	{name: "lost_ack", title: "lost acknowledgement retried with the same outcome", dedicated: true, run: ruleLostAck},
	{name: "many_completions", title: "many completions at once, one lost answer, each applied once", dedicated: true, run: ruleManyCompletions},
	{name: "cancel", title: "cancel while running", run: ruleCancel},
	{name: "lease_loss", title: "lease loss while frozen", dedicated: true, run: ruleLeaseLoss},
	{name: "shutdown_release", title: "shutdown releases unfinished work", dedicated: true, run: ruleShutdownRelease},
	{name: "fetch_refused", title: "a fetch refused as a configuration error stops the worker", dedicated: true, run: ruleFetchRefused},
	{name: "bad_tokens", title: "forged and stale tokens refused", run: ruleBadTokens},
	{name: "oversized_output", title: "oversized output reported as a failure", run: ruleOversizedOutput},
	{name: "log_progress", title: "log lines and progress kept with the attempt", run: ruleLogProgress},
}

// ruleSuccess: a success's output is recorded with the job and its
// attempt, completed once.
func ruleSuccess(r *ruleRun) {
	outputs := []string{`{"ip":"10.0.0.7","disks":[1,2],"ok":true,"name":"zoë"}`, `"plain text"`}
	ids := make([]uint64, len(outputs))
	for i, out := range outputs {
		ids[i] = r.submit(`{"action":"succeed","output":`+out+`}`, 3)
	}
	for i, id := range ids {
		j := r.finished(id, "SUCCESS", 20*time.Second)
		if !jsonEqual(j.Output, []byte(outputs[i])) {
			r.fatalf("job %d: output %s, want %s", id, j.Output, outputs[i])
		}
		ex := r.executions(id)
		if len(ex) != 1 || ex[0].Outcome != "SUCCESS" || ex[0].Owner != "worker:"+r.s.shared.id {
			r.fatalf("job %d: executions %+v, want one SUCCESS owned by worker:%s", id, ex, r.s.shared.id)
		}
		if !jsonEqual(ex[0].Output, []byte(outputs[i])) {
			r.fatalf("job %d: attempt 1 output %s, want %s", id, ex[0].Output, outputs[i])
		}
		cs := r.answered(id, 1)
		if len(cs) != 1 || parseCompletion(cs[0].Body).Outcome != "success" || cs[0].Status != http.StatusOK {
			r.fatalf("job %d: %d completions (%s), want one success answered 200", id, len(cs), bodies(cs))
		}
	}
}

// ruleFailureRetry: a failure with retry is retried while retries are
// left, each attempt counted; retry false fails the job at once.
func ruleFailureRetry(r *ruleRun) {
	retried := r.submit(`{"action":"fail","error":"quota exceeded","retry":true}`, 2)
	final := r.submit(`{"action":"fail","error":"bad input","retry":false}`, 3)

	j := r.finished(retried, "FAILED", 30*time.Second)
	if j.Attempt != 3 || j.RetryTimes != 2 || !strings.Contains(j.LastError, "quota exceeded") {
		r.fatalf("job %d (max_retry 2, retry true): %s; want attempt 3, retry_times 2, last_error with %q",
			retried, describe(j), "quota exceeded")
	}
	ex := r.executions(retried)
	if len(ex) != 3 {
		r.fatalf("job %d: %d executions, want 3 (one per attempt)", retried, len(ex))
	}
	for _, e := range ex {
		if e.Outcome != "FAILED" || !strings.Contains(e.Error, "quota exceeded") {
			r.fatalf("job %d attempt %d: outcome %s error %q, want FAILED with %q", retried, e.Attempt, e.Outcome, e.Error, "quota exceeded")
		}
	}
	for attempt := 1; attempt <= 3; attempt++ {
		for _, c := range r.answered(retried, attempt) {
			if b := parseCompletion(c.Body); b.Outcome != "failure" || (b.Retry != nil && !*b.Retry) {
				r.fatalf("job %d attempt %d: completion %s, want outcome failure with retry true or absent", retried, attempt, c.Body)
			}
		}
	}

	j = r.finished(final, "FAILED", 20*time.Second)
	if j.Attempt != 1 || j.RetryTimes != 0 || !strings.Contains(j.LastError, "bad input") {
		r.fatalf("job %d (max_retry 3, retry false): %s; want FAILED at attempt 1, retry_times 0, last_error with %q",
			final, describe(j), "bad input")
	}
	cs := r.answered(final, 1)
	if len(cs) != 1 {
		r.fatalf("job %d: %d completions (%s), want 1", final, len(cs), bodies(cs))
	}
	if b := parseCompletion(cs[0].Body); b.Outcome != "failure" || b.Retry == nil || *b.Retry {
		r.fatalf("job %d: completion %s, want outcome failure with retry false", final, cs[0].Body)
	}
}

// ruleLostAck: the answer to the first completion is lost after the
// replica applied it; the worker retries with the same body and the job
// ends with the one outcome.
//
// The job arrives at the end of a long poll that has waited longer than
// the lease, as it does for any idle worker: the lease starts at the claim,
// not when the worker sent its fetch, so the retries must not stop at
// "fetch sent + lease". The worker is the rule's own, so that its fetch is
// not answered early by other rules' jobs.
func ruleLostAck(r *ruleRun) {
	w := r.s.startWorker(r.T, workerSpec{id: r.s.impl.name + "-lostack", types: []string{r.typ}, concurrency: 2, shutdownMs: 5000})
	r.awaitFetchOlderThan(w, lease+200*time.Millisecond, lease+20*time.Second)
	r.s.proxy.dropNextCompletion(r.typ)
	id := r.submit(`{"action":"succeed","output":{"n":42}}`, 3)
	j := r.finished(id, "SUCCESS", 20*time.Second)
	tok := r.token(id, 1)
	var cs []call
	r.awaitProxy(15*time.Second, fmt.Sprintf("the completion whose answer was lost is sent again and answered "+
		"(the lease runs %v from the claim and heartbeats renew it: retries may not stop earlier)", lease), func() (bool, string) {
		cs = r.s.proxy.completions(tok)
		for _, c := range cs[min(1, len(cs)):] {
			if c.Status == http.StatusOK || c.Status == http.StatusConflict {
				return true, ""
			}
		}
		return false, bodies(cs)
	})
	if !cs[0].Dropped {
		r.fatalf("job %d: the first completion's answer was not the dropped one: %s", id, bodies(cs))
	}
	first := compact(cs[0].Body)
	for i, c := range cs[1:] {
		if !bytes.Equal(compact(c.Body), first) {
			r.fatalf("job %d: completion %d sent %s but the first sent %s: a retried completion must send the same body",
				id, i+2, c.Body, cs[0].Body)
		}
		if c.Status != http.StatusOK && c.Status < 500 {
			r.fatalf("job %d: completion %d answered %d %s, want 200 applied (the same outcome again)", id, i+2, c.Status, c.Answer)
		}
	}
	if !jsonEqual(j.Output, []byte(`{"n":42}`)) || j.Attempt != 1 {
		r.fatalf("job %d: %s, want SUCCESS at attempt 1 with output {\"n\":42}", id, describe(j))
	}
	if ex := r.executions(id); len(ex) != 1 || ex[0].Outcome != "SUCCESS" {
		r.fatalf("job %d: executions %+v, want one SUCCESS", id, ex)
	}
}

// awaitFetchOlderThan waits until worker w has had one fetch waiting at
// the replica for longer than d: woken when the proxy sees a fetch begin or
// end, and at the moment its oldest waiting fetch turns d old.
func (r *ruleRun) awaitFetchOlderThan(w *proc, d, within time.Duration) {
	r.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		since, waiting, changed := r.s.proxy.oldestFetch(w.id)
		var old *time.Timer
		var turnsOld <-chan time.Time
		if waiting {
			left := d - time.Since(since)
			if left < 0 {
				return
			}
			old = time.NewTimer(left)
			turnsOld = old.C
		}
		select {
		case <-changed:
		case <-turnsOld:
		case <-deadline.C:
			r.fatalf("worker %s has a fetch waiting longer than %v: not within %v; waiting now: %v", w.id, d, within, waiting)
		}
		if old != nil {
			old.Stop()
		}
	}
}

// ruleManyCompletions: a dozen jobs claimed by one fetch finish together;
// the answer of the first completion call applied for them is lost (for a
// library that sends completions in batches, POST
// /v1/workers/complete:batch, that is every completion the batch held).
// Every job ends with its one outcome, each completion's retries send the
// same body, and every retry is answered applied.
func ruleManyCompletions(r *ruleRun) {
	const n = 12
	w := r.s.startWorker(r.T, workerSpec{id: r.s.impl.name + "-many", types: []string{r.typ}, concurrency: n, shutdownMs: 5000})
	r.awaitFetchOlderThan(w, 100*time.Millisecond, 20*time.Second)
	r.s.proxy.dropNextCompletion(r.typ)
	var reqs []apitype.SubmitRequest
	maxRetry := 3
	for i := range n {
		reqs = append(reqs, apitype.SubmitRequest{JobKey: fmt.Sprintf("%s-%d-%d", r.typ, time.Now().UnixNano(), i), JobType: r.typ,
			Params: json.RawMessage(fmt.Sprintf(`{"action":"sleep","ms":300,"i":%d}`, i)), MaxRetry: &maxRetry})
	}
	resp, err := r.s.api.SubmitBatch(context.Background(), reqs)
	if err != nil || resp.Created != n {
		r.Fatalf("submit %d jobs: %+v %v", n, resp, err)
	}
	dropped := 0
	for _, res := range resp.Results {
		id := res.ID
		j := r.finished(id, "SUCCESS", 30*time.Second)
		if j.Attempt != 1 || !jsonEqual(j.Output, []byte(`{"slept":300}`)) {
			r.fatalf("job %d: %s, want SUCCESS at attempt 1 with output {\"slept\":300}", id, describe(j))
		}
		if ex := r.executions(id); len(ex) != 1 || ex[0].Outcome != "SUCCESS" {
			r.fatalf("job %d: executions %+v, want one SUCCESS", id, ex)
		}
		cs := r.answered(id, 1)
		first := compact(cs[0].Body)
		for i, c := range cs {
			if c.Dropped {
				dropped++
			}
			if i > 0 && !bytes.Equal(compact(c.Body), first) {
				r.fatalf("job %d: completion %d sent %s but the first sent %s: a retried completion must send the same body",
					id, i+1, c.Body, cs[0].Body)
			}
			if c.Status != http.StatusOK && c.Status < 500 {
				r.fatalf("job %d: completion %d answered %d %s, want 200 applied (the same outcome again)", id, i+1, c.Status, c.Answer)
			}
		}
	}
	if dropped == 0 {
		r.fatalf("no completion of the %d jobs had its answer dropped: the proxy saw no applied completion of %s", n, r.typ)
	}
}

// ruleCancel: a cancel requested while the job runs reaches the work
// within a few heartbeats and ends the job CANCELED.
func ruleCancel(r *ruleRun) {
	id := r.submit(`{"action":"block"}`, 3)
	r.fetched(id, 1, r.s.shared)
	if _, err := r.s.api.Cancel(context.Background(), id); err != nil {
		r.Fatalf("cancel job %d: %v", id, err)
	}
	r.ended(id, 1, "CANCELED", 4*heartbeatEvery+2*time.Second)
	if ex := r.executions(id); len(ex) != 1 || ex[0].Outcome != "CANCELED" {
		r.fatalf("job %d: executions %+v, want one CANCELED", id, ex)
	}
}

// ruleLeaseLoss: a worker frozen (SIGSTOP) past its lease loses the job,
// which is rescued and run again by a second worker; thawed, the first
// worker's late completion is refused (409 stale) and the job keeps the
// second run's outcome.
//
// After SIGCONT the first worker's heartbeat and its finished sleep race:
// a worker that hears "lost" first (or infers it from a heartbeat failing
// past its lease deadline) correctly sends nothing, and the late completion
// this rule is about never happens. The proxy therefore holds the thawed
// worker's heartbeats (a slow network) until its completion has been seen.
func ruleLeaseLoss(r *ruleRun) {
	a := r.s.startWorker(r.T, workerSpec{id: r.s.impl.name + "-frozen-a", types: []string{r.typ}, concurrency: 1, shutdownMs: 5000})
	id := r.submit(`{"action":"sleep","ms":1500}`, 3)
	r.fetched(id, 1, a)
	a.signal(r.T, syscall.SIGSTOP)
	r.Cleanup(func() { _ = a.cmd.Process.Signal(syscall.SIGCONT) })

	first := jobq.Fence{ID: id, Attempt: 1}
	r.awaitEvent(lease+10*time.Second, fmt.Sprintf("job %d's attempt 1 is rescued after the frozen worker's lease", id), scheduler.EventRescued,
		func(e scheduler.Event) bool { return slices.Contains(e.Fences, first) },
		func() string { return fmt.Sprintf("%s, executions %+v", describe(r.get(id)), r.executions(id)) })
	if ex := r.executions(id); len(ex) != 1 || ex[0].Outcome != "LEASE_EXPIRED" {
		r.fatalf("job %d after the rescue of attempt 1: executions %+v, want one LEASE_EXPIRED", id, ex)
	}
	b := r.s.startWorker(r.T, workerSpec{id: r.s.impl.name + "-frozen-b", types: []string{r.typ}, concurrency: 1, shutdownMs: 5000})
	j := r.finished(id, "SUCCESS", 30*time.Second)
	if j.Attempt != 2 {
		r.fatalf("job %d: %s, want SUCCESS at attempt 2 (the second worker's run)", id, describe(j))
	}

	toks := r.s.proxy.tokensOf(id)
	letBeatsThrough := r.s.proxy.holdHeartbeats(r.T, a.id)
	a.signal(r.T, syscall.SIGCONT)
	var cs []call
	r.awaitProxy(15*time.Second, "the thawed worker's late completion is sent and refused with 409 stale", func() (bool, string) {
		cs = r.s.proxy.completions(toks[1])
		return len(cs) > 0 && cs[0].Status != 0, bodies(cs)
	})
	letBeatsThrough()
	if cs[0].Status != http.StatusConflict || parseError(cs[0].Answer).Error.Code != "stale" {
		r.fatalf("job %d: the late completion of attempt 1 was answered %d %s, want 409 stale", id, cs[0].Status, cs[0].Answer)
	}
	// Stop the thawed worker so that any further completion it would send
	// (a retry after 409 stale) is in the record before the count.
	a.signal(r.T, syscall.SIGTERM)
	select {
	case <-a.exited:
	case <-time.After(20 * time.Second):
		r.fatalf("the thawed worker %s did not exit within 20s of SIGTERM", a.id)
	}
	if cs = r.s.proxy.completions(toks[1]); len(cs) != 1 {
		r.fatalf("job %d: attempt 1 sent %d completions (%s); 409 stale must end the retries", id, len(cs), bodies(cs))
	}
	j = r.get(id)
	ex := r.executions(id)
	if j.Status != "SUCCESS" || j.Attempt != 2 || !jsonEqual(j.Output, []byte(`{"slept":1500}`)) {
		r.fatalf("job %d after the late completion: %s, want the second run's SUCCESS at attempt 2", id, describe(j))
	}
	if len(ex) != 2 || ex[0].Outcome != "LEASE_EXPIRED" || ex[1].Outcome != "SUCCESS" || ex[1].Owner != "worker:"+b.id {
		r.fatalf("job %d: executions %+v, want LEASE_EXPIRED then SUCCESS by worker:%s", id, ex, b.id)
	}
}

// ruleShutdownRelease: SIGTERM during a running job: the worker stops
// fetching, waits the shutdown timeout, cancels the work and releases the
// job (WAITING, no retry spent), then exits 0.
func ruleShutdownRelease(r *ruleRun) {
	w := r.s.startWorker(r.T, workerSpec{id: r.s.impl.name + "-shutdown", types: []string{r.typ}, concurrency: 2, shutdownMs: 1000})
	id := r.submit(`{"action":"block"}`, 3)
	r.Cleanup(func() { _, _ = r.s.api.Cancel(context.Background(), id) })
	r.fetched(id, 1, w)
	// RUNNING shows once the replica claimed the job, before the worker has
	// read the fetch answer; a SIGTERM in between aborts a fetch whose jobs
	// the replica believes delivered (they come back only when the lease
	// runs out). The worker's first heartbeat with the token shows it holds
	// the job.
	tok := r.token(id, 1)
	r.awaitProxy(10*time.Second, fmt.Sprintf("worker %s heartbeats job %d", w.id, id), func() (bool, string) {
		return r.s.proxy.heartbeated(tok), "no heartbeat with the job's token answered 200"
	})
	w.signal(r.T, syscall.SIGTERM)
	j := r.ended(id, 1, "WAITING", 15*time.Second)
	if j.Attempt != 1 || j.RetryTimes != 0 {
		r.fatalf("job %d after shutdown: %s, want WAITING with attempt 1 and retry_times 0 (a release spends no retry); completions seen: %s",
			id, describe(j), bodies(r.s.proxy.completions(tok)))
	}
	if ex := r.executions(id); len(ex) != 1 || ex[0].Outcome != "RELEASED" {
		r.fatalf("job %d: executions %+v, want one RELEASED", id, ex)
	}
	select {
	case <-w.exited:
	case <-time.After(15 * time.Second):
		r.fatalf("worker %s did not exit within 15s of SIGTERM (shutdown timeout 1s)", w.id)
	}
	if w.err != nil {
		r.fatalf("worker %s exited with %v after SIGTERM, want status 0", w.id, w.err)
	}
	if j = r.get(id); j.Status != "WAITING" || j.Attempt != 1 {
		r.fatalf("job %d after the worker exited: %s; a worker shutting down must not fetch again", id, describe(j))
	}
}

// ruleFetchRefused: a fetch answered 400 (here: a job type the replica
// does not run remotely, "… is not a remote job type") would be answered
// the same at every retry. The worker stops fetching at once, lets the job
// it runs finish and report its outcome, as on shutdown, and exits with a
// failure status, its log naming the replica's message. (A 5xx or a lost
// connection is retried: the lost_ack and many_completions rules.)
func ruleFetchRefused(r *ruleRun) {
	w := r.s.startWorker(r.T, workerSpec{id: r.s.impl.name + "-refused", types: []string{r.typ}, concurrency: 2, shutdownMs: 10000})
	bad := r.typ + "-not-remote"
	r.s.proxy.refuseFetchesAfterJobs(w.id, bad)
	id := r.submit(`{"action":"sleep","ms":1500}`, 3)
	r.fetched(id, 1, w)
	j := r.finished(id, "SUCCESS", 30*time.Second)
	if j.Attempt != 1 || !jsonEqual(j.Output, []byte(`{"slept":1500}`)) {
		r.fatalf("job %d: %s, want the running job finished SUCCESS at attempt 1 after the refused fetch", id, describe(j))
	}
	select {
	case <-w.exited:
	case <-time.After(20 * time.Second):
		fs := r.s.proxy.fetchesOf(w.id)
		r.fatalf("worker %s did not exit within 20s of its job's end after a fetch answered 400 (fetches: %d, last answered %d)",
			w.id, len(fs), fs[len(fs)-1].Status)
	}
	if w.err == nil {
		r.fatalf("worker %s exited with status 0 after a fetch answered 400, want a failure status", w.id)
	}
	fs := r.s.proxy.fetchesOf(w.id)
	var refused []call
	for _, c := range fs {
		if c.Status == http.StatusBadRequest {
			refused = append(refused, c)
		}
	}
	if len(refused) != 1 || fs[len(fs)-1].Status != http.StatusBadRequest {
		var seen []string
		for _, c := range fs {
			seen = append(seen, strconv.Itoa(c.Status))
		}
		r.fatalf("worker %s's fetches were answered %s, want one refused with 400 and none after it (the worker must not retry it)",
			w.id, strings.Join(seen, ", "))
	}
	if msg := parseError(refused[0].Answer).Error.Message; !strings.Contains(w.out.tail(1<<20), msg) {
		r.fatalf("worker %s's log does not show the replica's refusal %q:\n%s", w.id, msg, w.out.tail(3000))
	}
}

// ruleBadTokens: the suite itself sends a forged token (right job and
// attempt, wrong secret) and a stale one (an attempt that no longer holds
// the job); both are refused and change nothing.
func ruleBadTokens(r *ruleRun) {
	id := r.submit(`{"action":"block"}`, 3)
	r.fetched(id, 1, r.s.shared)
	tok := r.token(id, 1)
	forged := forge(tok)
	before, exBefore := r.get(id), r.executions(id)

	status, body := r.post("/v1/workers/complete", `{"task_token":"`+forged+`","outcome":"success","output":{"forged":true}}`)
	if e := parseError(body); status != http.StatusForbidden || e.Error.Field != "task_token" {
		r.fatalf("forged token's completion answered %d %s, want 403 naming task_token", status, body)
	}
	if strings.Contains(string(body), forged) || strings.Contains(string(body), tok) {
		r.fatalf("an error body shows the task token: %s", body)
	}
	status, body = r.post("/v1/workers/heartbeat", `{"worker_id":"conformance-suite","task_tokens":["`+forged+`"]}`)
	if status != http.StatusOK || !strings.Contains(string(body), `"lost"`) {
		r.fatalf("forged token's heartbeat answered %d %s, want 200 with state lost", status, body)
	}
	if status, body = r.post("/v1/workers/log", `{"task_token":"`+forged+`","lines":["forged"]}`); status < 400 || status >= 500 {
		r.fatalf("forged token's log answered %d %s, want a 4xx", status, body)
	}
	unchanged(r, id, before, exBefore, "the forged token's calls")

	// The worker still holds the job: cancel it, then retry it, so that
	// attempt 1's token is stale while attempt 2 runs.
	if _, err := r.s.api.Cancel(context.Background(), id); err != nil {
		r.Fatalf("cancel job %d: %v", id, err)
	}
	r.ended(id, 1, "CANCELED", 4*heartbeatEvery+2*time.Second)
	if _, err := r.s.api.Retry(context.Background(), id); err != nil {
		r.Fatalf("retry job %d: %v", id, err)
	}
	r.fetched(id, 2, nil)
	before, exBefore = r.get(id), r.executions(id)
	status, body = r.post("/v1/workers/complete", `{"task_token":"`+tok+`","outcome":"success","output":{"stale":true}}`)
	if e := parseError(body); status != http.StatusConflict || e.Error.Code != "stale" {
		r.fatalf("stale token's completion answered %d %s, want 409 stale", status, body)
	}
	status, body = r.post("/v1/workers/heartbeat", `{"worker_id":"conformance-suite","task_tokens":["`+tok+`"]}`)
	if status != http.StatusOK || !strings.Contains(string(body), `"lost"`) {
		r.fatalf("stale token's heartbeat answered %d %s, want 200 with state lost", status, body)
	}
	unchanged(r, id, before, exBefore, "the stale token's calls")
	if _, err := r.s.api.Cancel(context.Background(), id); err != nil {
		r.Fatalf("cancel job %d: %v", id, err)
	}
	r.ended(id, 2, "CANCELED", 4*heartbeatEvery+2*time.Second)
}

// forge returns tok with the first character of its secret (the part
// after the last dot) changed: the right job and attempt, another secret.
// (The last character would not do: in unpadded base64 its low bits may
// carry no data, so a lenient decoder reads the same secret.)
func forge(tok string) string {
	i := strings.LastIndex(tok, ".") + 1
	repl := byte('A')
	if tok[i] == 'A' {
		repl = 'B'
	}
	return tok[:i] + string(repl) + tok[i+1:]
}

// unchanged fails the rule when job id's state moved since before.
func unchanged(r *ruleRun, id uint64, before jobView, exBefore []execView, what string) {
	r.Helper()
	after, exAfter := r.get(id), r.executions(id)
	if after.Status != before.Status || after.Attempt != before.Attempt || after.RetryTimes != before.RetryTimes ||
		after.LastError != before.LastError || !bytes.Equal(after.Output, before.Output) {
		r.fatalf("job %d changed after %s: before %s, after %s", id, what, describe(before), describe(after))
	}
	if len(exAfter) != len(exBefore) || exAfter[len(exAfter)-1].Outcome != exBefore[len(exBefore)-1].Outcome {
		r.fatalf("job %d's executions changed after %s: before %+v, after %+v", id, what, exBefore, exAfter)
	}
}

// ruleOversizedOutput: an output above 64 KiB is refused (413) and the
// worker reports the attempt as a failure carrying the replica's message.
func ruleOversizedOutput(r *ruleRun) {
	id := r.submit(`{"action":"big_output","bytes":70000}`, 0)
	j := r.finished(id, "FAILED", 20*time.Second)
	cs := r.answered(id, 1)
	if len(cs) < 2 {
		r.fatalf("job %d: completions %s, want a refused success then a failure", id, bodies(cs))
	}
	first, last := parseCompletion(cs[0].Body), parseCompletion(cs[len(cs)-1].Body)
	msg := parseError(cs[0].Answer).Error.Message
	if first.Outcome != "success" || (cs[0].Status != http.StatusRequestEntityTooLarge && cs[0].Status != http.StatusBadRequest) || msg == "" {
		r.fatalf("job %d: first completion %.200s answered %d %s, want a success refused with 413", id, cs[0].Body, cs[0].Status, cs[0].Answer)
	}
	if last.Outcome != "failure" || last.Error != msg || cs[len(cs)-1].Status != http.StatusOK {
		r.fatalf("job %d: last completion %s answered %d, want a failure whose error is the replica's message %q", id, cs[len(cs)-1].Body, cs[len(cs)-1].Status, msg)
	}
	if !strings.Contains(j.LastError, msg) {
		r.fatalf("job %d: last_error %q, want the replica's message %q", id, j.LastError, msg)
	}
	if ex := r.executions(id); len(ex) != 1 || ex[0].Outcome != "FAILED" || ex[0].Error != msg {
		r.fatalf("job %d: executions %+v, want one FAILED with error %q", id, ex, msg)
	}
}

// token waits until the proxy has passed on the fetch answer holding job
// id's task token for attempt, and returns the token. (The claim commits
// before the answer reaches the proxy.)
func (r *ruleRun) token(id uint64, attempt int) string {
	r.Helper()
	var tok string
	r.awaitProxy(10*time.Second, fmt.Sprintf("the proxy sees the fetch answer with job %d attempt %d's token", id, attempt), func() (bool, string) {
		tok = r.s.proxy.tokensOf(id)[attempt]
		return tok != "", "no such fetch answer"
	})
	return tok
}

// answered waits until the proxy has passed on the replica's 200 answer
// to a completion of job id's attempt, and returns that attempt's
// completions. (The replica commits before its answer reaches the proxy,
// so a job's final status can show before the proxy has recorded it.)
func (r *ruleRun) answered(id uint64, attempt int) []call {
	r.Helper()
	var cs []call
	r.awaitProxy(10*time.Second, fmt.Sprintf("the proxy sees job %d attempt %d's completion answered 200", id, attempt), func() (bool, string) {
		tok := r.s.proxy.tokensOf(id)[attempt]
		if tok == "" {
			return false, "no fetch answer with the attempt's token"
		}
		cs = r.s.proxy.completions(tok)
		for _, c := range cs {
			if c.Status == http.StatusOK && !c.Dropped {
				return true, ""
			}
		}
		return false, bodies(cs)
	})
	return cs
}

// ruleLogProgress: a handler's log lines and progress report reach the
// attempt (GET /v1/jobs/{id}/logs, the execution's progress).
func ruleLogProgress(r *ruleRun) {
	id := r.submit(`{"action":"log","lines":["resizing disk 1","resizing disk 2 — ünïcode"],"progress":0.5,"message":"2 of 4 disks"}`, 0)
	j := r.finished(id, "SUCCESS", 20*time.Second)
	if !jsonEqual(j.Output, []byte(`{"logged":2}`)) {
		r.fatalf("job %d: output %s, want {\"logged\":2}", id, j.Output)
	}
	var page struct {
		Attempt int `json:"attempt"`
		Lines   []struct {
			Line string `json:"line"`
		} `json:"lines"`
	}
	if err := r.getJSON(fmt.Sprintf("/v1/jobs/%d/logs?attempt=1", id), &page); err != nil {
		r.Fatalf("logs of job %d: %v", id, err)
	}
	var lines []string
	for _, l := range page.Lines {
		lines = append(lines, l.Line)
	}
	if want := []string{"resizing disk 1", "resizing disk 2 — ünïcode"}; !slices.Equal(lines, want) {
		r.fatalf("job %d: attempt 1's log %q, want %q", id, lines, want)
	}
	ex := r.executions(id)
	if len(ex) != 1 || ex[0].Progress == nil || *ex[0].Progress != 0.5 || ex[0].ProgressMessage != "2 of 4 disks" {
		r.fatalf("job %d: executions %+v, want one whose progress is 0.5 with message %q", id, ex, "2 of 4 disks")
	}
}

// bodies shows calls for a failure message (long bodies cut).
func bodies(cs []call) string {
	var b strings.Builder
	for i, c := range cs {
		body := string(c.Body)
		if len(body) > 300 {
			body = body[:300] + "…"
		}
		fmt.Fprintf(&b, "\n  #%d %s → %d", i+1, body, c.Status)
		if c.Dropped {
			b.WriteString(" (answer dropped)")
		}
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}

func compact(b []byte) []byte {
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return b
	}
	return out.Bytes()
}
