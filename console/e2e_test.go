package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/client"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/testbed/replica"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// SkipBrowserEnv, set to 1, skips the browser test (local development
// only; scripts/ensure-browser.sh then installs nothing). CI never sets it:
// there a missing browser fails the test.
const SkipBrowserEnv = "JOBQ_SKIP_BROWSER"

// ShotsEnv names the directory the browser test writes its screenshots to;
// by default a new directory under the system temp dir, printed by the test.
const ShotsEnv = "JOBQ_CONSOLE_SHOTS"

const (
	chromiumPath = "/usr/bin/chromium"
	token        = "e2e-console-token-0123456789"
)

// browser is the playwright-core driver process (e2e/driver.mjs).
type browser struct {
	t   *testing.T
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startBrowser(t *testing.T) *browser {
	t.Helper()
	if os.Getenv(SkipBrowserEnv) == "1" {
		t.Skipf("%s=1: browser test skipped (local development only)", SkipBrowserEnv)
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("%s is missing: run scripts/ensure-browser.sh (make test does), or set %s=1 to skip locally", chromiumPath, SkipBrowserEnv)
	}
	if _, err := os.Stat("e2e/node_modules/playwright-core/package.json"); err != nil {
		t.Fatalf("playwright-core is not installed in console/e2e: run scripts/ensure-browser.sh (make test does), or set %s=1 to skip locally", SkipBrowserEnv)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is missing: run scripts/ensure-browser.sh (make test does)")
	}
	cmd := exec.Command(node, "e2e/driver.mjs")
	cmd.Env = append(os.Environ(), "JOBQ_PROFILE="+t.TempDir(), "JOBQ_CHROMIUM="+chromiumPath)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start browser driver: %v", err)
	}
	sc := bufio.NewScanner(outPipe)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	b := &browser{t: t, cmd: cmd, in: in, out: sc}
	t.Cleanup(func() {
		_, _ = io.WriteString(in, `{"op":"close"}`+"\n")
		in.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return b
}

// do sends one command and decodes its value into out (may be nil).
func (b *browser) do(out any, cmd map[string]any) {
	b.t.Helper()
	line, _ := json.Marshal(cmd)
	if _, err := b.in.Write(append(line, '\n')); err != nil {
		b.t.Fatalf("browser %s: %v", cmd["op"], err)
	}
	if !b.out.Scan() {
		b.t.Fatalf("browser %s: driver exited (%v)", cmd["op"], b.out.Err())
	}
	var res struct {
		OK    bool            `json:"ok"`
		Value json.RawMessage `json:"value"`
		Error string          `json:"error"`
	}
	if err := json.Unmarshal(b.out.Bytes(), &res); err != nil {
		b.t.Fatalf("browser %s: bad answer %q: %v", cmd["op"], b.out.Text(), err)
	}
	if !res.OK {
		b.t.Fatalf("browser %s %v: %s", cmd["op"], cmd, res.Error)
	}
	if out != nil {
		if err := json.Unmarshal(res.Value, out); err != nil {
			b.t.Fatalf("browser %s: value %s: %v", cmd["op"], res.Value, err)
		}
	}
}

type nav struct {
	Status int    `json:"status"`
	URL    string `json:"url"`
}

func (b *browser) gotoURL(url string) nav {
	var n nav
	b.do(&n, map[string]any{"op": "goto", "url": url})
	return n
}

func (b *browser) click(selector, wait string) nav {
	var n nav
	b.do(&n, map[string]any{"op": "click", "selector": selector, "wait": wait})
	return n
}

func (b *browser) fill(selector, value string) {
	b.do(nil, map[string]any{"op": "fill", "selector": selector, "value": value})
}

func (b *browser) text(selector string) string {
	var s string
	b.do(&s, map[string]any{"op": "text", "selector": selector})
	return s
}

func (b *browser) attrs(selector, name string) []string {
	var s []string
	b.do(&s, map[string]any{"op": "attrs", "selector": selector, "name": name})
	return s
}

func (b *browser) waitText(selector, text string) {
	b.do(nil, map[string]any{"op": "waitText", "selector": selector, "text": text, "timeout": 30000})
}

func (b *browser) shot(dir, name string) {
	p := filepath.Join(dir, name+".png")
	b.do(nil, map[string]any{"op": "screenshot", "path": p})
	b.t.Logf("screenshot %s", p)
}

// buildJobq builds cmd/jobq into a temp dir.
func buildJobq(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "jobq")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/jobq/jobq/cmd/jobq").CombinedOutput()
	if err != nil {
		t.Fatalf("go build jobq: %v\n%s", err, out)
	}
	return bin
}

func shotsDir(t *testing.T) string {
	dir := os.Getenv(ShotsEnv)
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "jobq-console-shots-"); err != nil {
			t.Fatal(err)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("console e2e: screenshots in %s\n", dir)
	t.Logf("screenshots in %s", dir)
	return dir
}

// waitJob polls the API until job id is in state want (bounded; the test
// waits on the job's state, it never asserts how long that took). It polls
// because this is a process-level test: the replicas are `jobq serve`
// processes, whose scheduler events do not reach this process.
func waitJob(t *testing.T, c *client.Client, id uint64, want jobq.JobState) apitype.Job {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(60 * time.Second)
	for {
		j, err := c.Get(ctx, id)
		if err != nil {
			t.Fatalf("get job %d: %v", id, err)
		}
		if j.Status == want {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d is %s after 60s, want %s", id, j.Status, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func submit(t *testing.T, c *client.Client, key, jobType, params string, maxRetry int, runAt string) apitype.Job {
	t.Helper()
	req := apitype.SubmitRequest{JobKey: key, JobType: jobType, MaxRetry: &maxRetry}
	if params != "" {
		req.Params = json.RawMessage(params)
	}
	if runAt != "" {
		req.RunAt = &runAt
	}
	j, created, err := c.Submit(context.Background(), req)
	if err != nil || !created {
		t.Fatalf("submit %s: created=%v err=%v", key, created, err)
	}
	return j
}

// apiStatus GETs path with the token and returns the HTTP status.
func apiStatus(t *testing.T, base, path string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestConsoleInBrowser runs three `jobq serve` replicas with bearer-token
// authentication on a throwaway database and drives the console in headless
// Chromium: sign-in, jobs submitted through the API appearing, a flaky job's
// attempts and errors, cancel and retry from the page (including a 409),
// pausing a type stopping its claims, schedules behind a confirmation, and
// the overview's live refresh. It saves a screenshot of each page.
func TestConsoleInBrowser(t *testing.T) {
	b := startBrowser(t)
	shots := shotsDir(t)
	bin := buildJobq(t)
	dsn := testdb.DSN(t)
	logDir := t.TempDir()
	names := []string{"replica-a", "replica-b", "replica-c"}
	var reps []*replica.Replica
	for _, name := range names {
		r, err := replica.Start(context.Background(), replica.Spec{Binary: bin, DSN: dsn, Name: name, LogDir: logDir,
			Env:  []string{"JOBQ_AUTH_TOKENS=" + token},
			Args: []string{"--retry-backoff", "100ms", "--poll-interval", "300ms"}})
		if err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		reps = append(reps, r)
		t.Cleanup(func() {
			r.Stop(15 * time.Second)
			if t.Failed() {
				log, _ := os.ReadFile(r.Log)
				t.Logf("%s log:\n%s", r.Name, replica.LastLines(string(log), 30))
			}
		})
	}
	base := reps[0].URL()
	api := client.New(base)
	api.Token = token
	t.Cleanup(func() { api.HTTP.CloseIdleConnections(); http.DefaultClient.CloseIdleConnections() })

	// Authentication on: the page asks for the token; a wrong one is refused.
	if n := b.gotoURL(base + "/ui/jobs"); n.Status != http.StatusUnauthorized {
		t.Fatalf("GET /ui/jobs without a token: status %d, want 401", n.Status)
	}
	if got := b.text("h1"); got != "Sign in" {
		t.Fatalf("page without a token shows %q, want the sign-in page", got)
	}
	b.shot(shots, "01-sign-in")
	b.fill("#token", "not-the-right-token-xxxx")
	if n := b.click("button[type=submit]", "#login-error"); n.Status != http.StatusUnauthorized {
		t.Fatalf("wrong token: status %d, want 401", n.Status)
	}
	if got := b.text("#login-error"); got != "This token is not accepted." {
		t.Fatalf("wrong token answer %q", got)
	}
	b.fill("#token", token)
	if n := b.click("button[type=submit]", "#jobs"); n.Status != http.StatusOK || !strings.HasSuffix(n.URL, "/ui/jobs") {
		t.Fatalf("sign-in: %+v, want 200 on /ui/jobs (the page asked for first)", n)
	}

	// Jobs submitted through the API appear.
	flaky := submit(t, api, "e2e-flaky", "flaky", `{"failures":2,"ms":20}`, 3, "")
	failing := submit(t, api, "e2e-failing", "flaky", `{"failures":50}`, 1, "")
	later := submit(t, api, "e2e-later", "noop", "", 3, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	var oks []uint64
	for i := range 3 {
		oks = append(oks, submit(t, api, "e2e-ok-"+strconv.Itoa(i), "noop", "", 3, "").ID)
	}
	waitJob(t, api, flaky.ID, jobq.StateSuccess)
	waitJob(t, api, failing.ID, jobq.StateFailed)
	for _, id := range oks {
		waitJob(t, api, id, jobq.StateSuccess)
	}
	b.gotoURL(base + "/ui/jobs?key_prefix=e2e-")
	page, err := api.List(context.Background(), "", "", 100, "")
	if err != nil {
		t.Fatal(err)
	}
	var wantRows []string
	for _, j := range page.Jobs {
		wantRows = append(wantRows, j.JobKey+"="+string(j.Status))
	}
	keys, states := b.attrs("#jobs tbody tr", "data-key"), b.attrs("#jobs tbody tr", "data-status")
	var gotRows []string
	for i := range keys {
		gotRows = append(gotRows, keys[i]+"="+states[i])
	}
	if !slices.Equal(gotRows, wantRows) {
		t.Fatalf("jobs page rows %v, want the API's %v", gotRows, wantRows)
	}
	b.shot(shots, "02-jobs")
	b.gotoURL(base + "/ui/jobs?key_prefix=e2e-ok-&status=SUCCESS&limit=20")
	if got := b.attrs("#jobs tbody tr", "data-key"); !slices.Equal(got, []string{"e2e-ok-2", "e2e-ok-1", "e2e-ok-0"}) {
		t.Fatalf("filtered jobs %v", got)
	}
	if n := b.gotoURL(base + "/ui/jobs?status=NOPE"); n.Status != http.StatusBadRequest ||
		!strings.Contains(b.text("#answer"), "status: must be one of") {
		t.Fatalf("bad filter: status %d, answer %q", n.Status, b.text("#answer"))
	}

	// A flaky job: two failed attempts then a success, each attempt's
	// replica and error shown as the API reports them.
	b.gotoURL(fmt.Sprintf("%s/ui/jobs/%d", base, flaky.ID))
	ex, err := api.Executions(context.Background(), flaky.ID)
	if err != nil {
		t.Fatal(err)
	}
	var wantOwners []string
	for _, e := range ex {
		wantOwners = append(wantOwners, e.Owner)
	}
	if got := b.attrs("#executions li", "data-outcome"); !slices.Equal(got, []string{"FAILED", "FAILED", "SUCCESS"}) {
		t.Fatalf("flaky executions outcomes %v", got)
	}
	if got := b.attrs("#executions li", "data-owner"); !slices.Equal(got, wantOwners) {
		t.Fatalf("flaky executions owners %v, want %v", got, wantOwners)
	}
	if got := b.texts("#executions li pre.err-text"); !slices.Equal(got, []string{
		"flaky: attempt 1 of the first 2 fails by design", "flaky: attempt 2 of the first 2 fails by design"}) {
		t.Fatalf("flaky errors %v", got)
	}
	if got := b.text("#attempt"); got != "3" {
		t.Fatalf("flaky attempt %q, want 3", got)
	}
	b.shot(shots, "03-job-three-attempts")

	// A job that succeeded offers no action, and its last error (an
	// earlier attempt's) is history, not an error.
	if n := len(b.texts("#retry")) + len(b.texts("#cancel")); n != 0 {
		t.Fatalf("a SUCCESS job's page offers %d actions, want none", n)
	}
	if n := len(b.texts("td.err-text#last-error")); n != 0 {
		t.Fatalf("a SUCCESS job's last error is shown as an error")
	}
	b.shot(shots, "04-success-no-actions")

	// The failed job shows its error and attempts; retry brings it back.
	b.gotoURL(fmt.Sprintf("%s/ui/jobs/%d", base, failing.ID))
	if got := b.text("#job-status"); got != "FAILED" {
		t.Fatalf("failing job shows %q", got)
	}
	if got := b.text("#last-error"); got != "flaky: attempt 2 of the first 50 fails by design" {
		t.Fatalf("failing job last error %q", got)
	}
	if got := b.attrs("#executions li", "data-outcome"); !slices.Equal(got, []string{"FAILED", "FAILED"}) {
		t.Fatalf("failing job outcomes %v", got)
	}
	b.shot(shots, "05-job-failed")
	if n := b.click("#retry", "#answer"); n.Status != http.StatusOK {
		t.Fatalf("retry of a FAILED job: status %d", n.Status)
	}
	if got := b.text("#answer"); !strings.HasPrefix(got, fmt.Sprintf("retry: job %d re-queued with a fresh retry budget (now ", failing.ID)) {
		t.Fatalf("retry answer %q", got)
	}
	b.shot(shots, "06-retry-failed")
	if j := waitJob(t, api, failing.ID, jobq.StateFailed); j.Attempt != 4 {
		t.Fatalf("retried job ended with attempt %d, want 4 (two more attempts)", j.Attempt)
	}

	// Cancel a job due in an hour from the page: the API reports CANCELED.
	cancelFromPage(t, b, api, base, later.ID)
	b.shot(shots, "07-cancel")
	if n := b.gotoURL(base + "/ui/jobs/987654321"); n.Status != http.StatusNotFound || b.text("#answer") != "404 Not Found · not_found job 987654321 not found" {
		t.Fatalf("missing job: %d %q", n.Status, b.text("#answer"))
	}

	// Pause a type from the page: its claims stop on every replica.
	b.gotoURL(base + "/ui/types")
	b.click(`tr[data-type="sleep"] button.pause`, "#answer")
	if got := b.text("#answer"); got != "type sleep is paused: no replica claims its jobs; RUNNING ones finish; no limit" {
		t.Fatalf("pause answer %q", got)
	}
	b.shot(shots, "08-types-paused")
	paused := submit(t, api, "e2e-paused", "sleep", `{"ms":1}`, 3, "")
	waiting := submit(t, api, "e2e-waiting", "sleep", `{"ms":1}`, 3, "")
	after := submit(t, api, "e2e-after-pause", "noop", "", 3, "")
	// A scan that claimed the later noop job saw the paused jobs due before it.
	waitJob(t, api, after.ID, jobq.StateSuccess)
	for _, id := range []uint64{paused.ID, waiting.ID} {
		if j, _ := api.Get(context.Background(), id); j.Status != jobq.StateWaiting || j.Attempt != 0 {
			t.Fatalf("job %d of a paused type: %s attempt %d, want WAITING attempt 0", id, j.Status, j.Attempt)
		}
	}
	// Cancel a WAITING job from the page: the API reports CANCELED.
	cancelFromPage(t, b, api, base, waiting.ID)
	b.gotoURL(base + "/ui/types")
	b.click(`tr[data-type="sleep"] button.resume`, "#answer")
	waitJob(t, api, paused.ID, jobq.StateSuccess)
	b.fill(`tr[data-type="noop"] input[name=max_running]`, "200000")
	if n := b.click(`tr[data-type="noop"] form[action$="/limit"] button`, "#answer"); n.Status != http.StatusBadRequest ||
		b.text("#answer .msg") != "max_running: must be an integer in [0, 100000] (0 removes the limit), got 200000" {
		t.Fatalf("bad limit: status %d, answer %q", n.Status, b.text("#answer"))
	}

	// Periodic schedules: bad input answered, add and remove confirmed.
	b.fill(`#add-periodic input[name=name]`, "e2e-hourly")
	b.fill(`#add-periodic input[name=cron]`, "every hour")
	if n := b.click("#add-schedule", "#answer"); n.Status != http.StatusBadRequest || !strings.Contains(b.text("#answer"), "cron: must be a cron expression") {
		t.Fatalf("bad cron: %d %q", n.Status, b.text("#answer"))
	}
	b.fill(`#add-periodic input[name=cron]`, "@every 1h")
	b.do(nil, map[string]any{"op": "select", "selector": `#add-periodic select[name=job_type]`, "value": "noop"})
	b.click("#add-schedule", "#confirm")
	if got := b.text("#confirm h2"); got != "Create schedule e2e-hourly?" {
		t.Fatalf("confirmation %q", got)
	}
	if st := apiStatus(t, base, "/v1/periodic/e2e-hourly"); st != http.StatusNotFound {
		t.Fatalf("schedule exists before confirmation: %d", st)
	}
	b.click("#confirm-yes", "#answer")
	if got := b.text("#answer"); !strings.HasPrefix(got, "schedule e2e-hourly created: @every 1h → noop") {
		t.Fatalf("create answer %q", got)
	}
	if st := apiStatus(t, base, "/v1/periodic/e2e-hourly"); st != http.StatusOK {
		t.Fatalf("schedule after confirmation: %d", st)
	}
	b.shot(shots, "09-types-and-schedules")
	b.click(`tr[data-name="e2e-hourly"] button.danger`, "#confirm")
	b.click("#confirm-yes", "#answer")
	if got := b.text("#answer"); got != "schedule e2e-hourly removed; jobs it already enqueued stay" {
		t.Fatalf("remove answer %q", got)
	}
	if st := apiStatus(t, base, "/v1/periodic/e2e-hourly"); st != http.StatusNotFound {
		t.Fatalf("schedule after removal: %d", st)
	}

	// Overview: counts match the API, replicas of the flaky job listed, and
	// the page refreshes itself when a job is submitted.
	b.gotoURL(base + "/ui/")
	stats := map[string]int64{}
	for _, s := range jobq.JobStates {
		list, err := api.List(context.Background(), string(s), "", 1000, "")
		if err != nil {
			t.Fatal(err)
		}
		stats[string(s)] = int64(len(list.Jobs))
		if got := b.text("#count-" + string(s)); got != strconv.Itoa(len(list.Jobs)) {
			t.Fatalf("overview %s count %q, want %d", s, got, len(list.Jobs))
		}
	}
	owners := b.attrs("#replicas tbody tr", "data-owner")
	for _, o := range wantOwners {
		if !slices.Contains(owners, o) {
			t.Fatalf("overview replicas %v lack %s, which ran the flaky job", owners, o)
		}
	}
	b.shot(shots, "10-overview")
	live := submit(t, api, "e2e-live", "noop", "", 3, time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	b.waitText("#count-"+string(live.Status), strconv.FormatInt(stats[string(live.Status)]+1, 10))

	// The pipeline of docs/workflows.md, submitted as the page has it: its
	// graph once it ended (docs/img/console-workflow.png is this shot).
	pipeline := docsPipeline(t)
	var req struct {
		WorkflowKey string `json:"workflow_key"`
		Jobs        []struct {
			JobKey string `json:"job_key"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(pipeline, &req); err != nil {
		t.Fatalf("docs/workflows.md pipeline.json: %v", err)
	}
	if _, _, err := api.SubmitWorkflowRaw(context.Background(), pipeline); err != nil {
		t.Fatalf("submit the docs pipeline: %v", err)
	}
	wf := waitWorkflow(t, api, req.WorkflowKey)
	if wf.Status != "SUCCESS" {
		t.Fatalf("docs pipeline ended %s, want SUCCESS", wf.Status)
	}
	b.gotoURL(base + "/ui/workflows/" + req.WorkflowKey)
	var wantKeys []string
	for _, j := range req.Jobs {
		wantKeys = append(wantKeys, j.JobKey)
	}
	gotKeys := b.attrs("#graph a", "data-job")
	slices.Sort(gotKeys)
	slices.Sort(wantKeys)
	if !slices.Equal(gotKeys, wantKeys) {
		t.Fatalf("workflow graph draws %v, want the pipeline's jobs %v", gotKeys, wantKeys)
	}
	if got := len(b.attrs("#graph line.edge", "class")); got != len(wf.Edges) {
		t.Fatalf("workflow graph draws %d edges, want the pipeline's %d", got, len(wf.Edges))
	}
	b.shot(shots, "11-workflow")
	var jsErrors []string
	b.do(&jsErrors, map[string]any{"op": "errors"})
	if len(jsErrors) > 0 {
		t.Fatalf("page script errors: %v", jsErrors)
	}
}

// docsPipeline returns pipeline.json as docs/workflows.md writes it (the
// heredoc of its runnable pipeline block).
func docsPipeline(t *testing.T) json.RawMessage {
	t.Helper()
	page, err := os.ReadFile(filepath.Join("..", "docs", "workflows.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(page), "cat > pipeline.json <<'JSON'\n")
	body, _, ok2 := strings.Cut(rest, "\nJSON\n")
	if !ok || !ok2 || !json.Valid([]byte(body)) {
		t.Fatal("docs/workflows.md has no pipeline.json heredoc holding JSON")
	}
	return json.RawMessage(body)
}

// waitWorkflow polls the API until workflow key is no longer RUNNING
// (bounded, as waitJob).
func waitWorkflow(t *testing.T, c *client.Client, key string) apitype.Workflow {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		wf, err := c.GetWorkflow(context.Background(), key)
		if err != nil {
			t.Fatalf("workflow %s: %v", key, err)
		}
		if wf.Status != "RUNNING" {
			return wf
		}
		if time.Now().After(deadline) {
			t.Fatalf("workflow %s still RUNNING after 60s: %+v", key, wf.Counts)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cancelFromPage presses Cancel on job id's page and checks the answer and
// that the API then reports the job CANCELED.
func cancelFromPage(t *testing.T, b *browser, api *client.Client, base string, id uint64) {
	t.Helper()
	b.gotoURL(fmt.Sprintf("%s/ui/jobs/%d", base, id))
	if n := b.click("#cancel", "#answer"); n.Status != http.StatusOK {
		t.Fatalf("cancel job %d: status %d", id, n.Status)
	}
	if got := b.text("#answer"); got != fmt.Sprintf("cancel: job %d is now CANCELED", id) {
		t.Fatalf("cancel answer %q", got)
	}
	if j, err := api.Get(context.Background(), id); err != nil || j.Status != jobq.StateCanceled {
		t.Fatalf("after cancel the API reports job %d %s (%v), want CANCELED", id, j.Status, err)
	}
}

func (b *browser) texts(selector string) []string {
	var s []string
	b.do(&s, map[string]any{"op": "texts", "selector": selector})
	return s
}
