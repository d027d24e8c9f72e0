package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/cronplan"
	"github.com/jobq/jobq/service"
)

// timeLayout shows times in UTC to the millisecond.
const timeLayout = "2006-01-02 15:04:05.000Z"

var funcs = template.FuncMap{
	"utc": func(t any) string {
		switch v := t.(type) {
		case time.Time:
			if v.IsZero() {
				return "—"
			}
			return v.UTC().Format(timeLayout)
		case *time.Time:
			if v == nil || v.IsZero() {
				return "—"
			}
			return v.UTC().Format(timeLayout)
		}
		return "—"
	},
	"dur":   fmtDuration,
	"lower": func(s any) string { return strings.ToLower(fmt.Sprint(s)) },
	"query": func(kv ...string) template.URL {
		q := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] != "" {
				q.Set(kv[i], kv[i+1])
			}
		}
		if len(q) == 0 {
			return ""
		}
		return template.URL("?" + q.Encode())
	},
	"seconds": func(d time.Duration) int { return int(d / time.Second) },
	"list":    func(v ...string) []string { return v },
	"outcome": func(m map[jobq.Outcome]int64, k string) int64 { return m[jobq.Outcome(k)] },
	"add1":    func(n int) int { return n + 1 },
}

// fmtDuration shows a duration compactly: 850ms, 12.3s, 4m05s, 3h12m, 2d4h.
func fmtDuration(d time.Duration) string {
	neg := d < 0
	if neg {
		d = -d
	}
	var s string
	switch {
	case d < time.Second:
		s = fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		s = fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		s = fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		s = fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		s = fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
	}
	if neg {
		return "−" + s
	}
	return s
}

// ---- overview ----

type overviewData struct {
	Refresh     time.Duration
	Stats       jobq.QueueStats
	States      []jobq.JobState
	Types       []typeCounts
	Activity    jobq.Activity
	Replicas    []replicaRow
	Minutes     int
	OldestDue   string
	StatsFailed bool
}

type typeCounts struct {
	JobType string
	Counts  []int64 // in States order
	Total   int64
}

type replicaRow struct {
	jobq.ReplicaActivity
	Self          bool
	HeartbeatAgo  string // DBNow − (LeaseUntil − lease)
	LeaseLeft     string // LeaseUntil − DBNow
	LastStarted   string // age of the latest attempt start
	LeaseExpired  bool
	HasHeartbeats bool
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	d := overviewData{Refresh: c.opts.RefreshInterval, States: jobq.JobStates, Minutes: c.opts.ActivityMinutes}
	p := &page{Title: "Overview", Nav: "overview", Data: &d}
	status := http.StatusOK
	snap := c.snapshot(r.Context())
	d.Stats, d.Activity = snap.stats, snap.activity
	if err := cmpErr(snap.statsErr, snap.activityErr); err != nil {
		p.Answer = c.errAnswer(err, "")
		status = p.Answer.Status
		d.StatsFailed = snap.statsErr != nil
	}
	d.Types = typeMatrix(d.Stats.ByTypeStatus, d.States)
	if d.Stats.OldestWaitingSeconds != nil {
		d.OldestDue = fmtDuration(time.Duration(*d.Stats.OldestWaitingSeconds * float64(time.Second)))
	}
	for _, ra := range d.Activity.Replicas {
		row := replicaRow{ReplicaActivity: ra, Self: ra.Owner == c.opts.Owner && ra.Owner != ""}
		if ra.LeaseUntil != nil {
			row.HasHeartbeats = true
			row.HeartbeatAgo = fmtDuration(d.Activity.DBNow.Sub(ra.LeaseUntil.Add(-c.opts.Lease)))
			row.LeaseLeft = fmtDuration(ra.LeaseUntil.Sub(d.Activity.DBNow))
			row.LeaseExpired = !ra.LeaseUntil.After(d.Activity.DBNow)
		}
		if ra.LastStarted != nil {
			row.LastStarted = fmtDuration(d.Activity.DBNow.Sub(*ra.LastStarted))
		}
		d.Replicas = append(d.Replicas, row)
	}
	c.render(w, r, status, "overview", p)
}

// overviewSnapshot is what the overview reads from the database.
type overviewSnapshot struct {
	at                    time.Time
	stats                 jobq.QueueStats
	activity              jobq.Activity
	statsErr, activityErr error
}

// snapshot returns the overview's data, read at most once per
// SnapshotMaxAge however many browsers show the overview: the statements
// scan an index of every job (counts by type and status) and up to
// jobq.ActivityRecentRows executions, so each open page must not add a
// scan every refresh. A failed read is not kept.
func (c *Console) snapshot(ctx context.Context) overviewSnapshot {
	c.snapMu.Lock()
	defer c.snapMu.Unlock()
	if c.snap != nil && time.Since(c.snap.at) < SnapshotMaxAge {
		return *c.snap
	}
	var s overviewSnapshot
	s.stats, s.statsErr = c.opts.Ops.Stats(ctx, "1m")
	s.activity, s.activityErr = c.opts.Ops.Activity(ctx, c.opts.ActivityMinutes)
	s.at = time.Now() // the age counts from the end of the read
	if s.statsErr == nil && s.activityErr == nil {
		c.snap = &s
	}
	return s
}

func cmpErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// typeMatrix turns per-type-and-status counts into one row per type, in
// states order; a status not in states (a newer server) is added as a column.
func typeMatrix(counts []jobq.TypeStatusCount, states []jobq.JobState) []typeCounts {
	var out []typeCounts
	idx := map[string]int{}
	for _, tc := range counts {
		i, ok := idx[tc.JobType]
		if !ok {
			i = len(out)
			idx[tc.JobType] = i
			out = append(out, typeCounts{JobType: tc.JobType, Counts: make([]int64, len(states))})
		}
		if si := slices.Index(states, tc.Status); si >= 0 {
			out[i].Counts[si] += tc.Count
		}
		out[i].Total += tc.Count
	}
	return out
}

// ---- jobs ----

type jobsData struct {
	States    []jobq.JobState
	Types     []string
	Status    string
	JobType   string
	KeyPrefix string
	Limit     string
	Cursor    string
	Jobs      []jobRow
	Next      string
	Now       time.Time
}

type jobRow struct {
	jobq.Job
	Age         string
	MaxAttempts int
}

func (c *Console) jobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := jobsData{States: jobq.JobStates, Types: c.opts.JobTypes, Status: q.Get("status"), JobType: q.Get("type"),
		KeyPrefix: q.Get("key_prefix"), Limit: q.Get("limit"), Cursor: q.Get("cursor"), Now: time.Now().UTC()}
	p := &page{Title: "Jobs", Nav: "jobs", Data: &d}
	lim := d.Limit
	if lim == "" {
		lim = strconv.Itoa(PageSizeDefault)
	}
	jobs, next, err := c.opts.Service.List(r.Context(), service.ListRequest{Status: d.Status, JobType: d.JobType,
		KeyPrefix: d.KeyPrefix, Limit: lim, Cursor: d.Cursor})
	if err != nil {
		p.Answer = c.errAnswer(err, "")
		c.render(w, r, p.Answer.Status, "jobs", p)
		return
	}
	for _, j := range jobs {
		d.Jobs = append(d.Jobs, jobRow{Job: j, Age: fmtDuration(d.Now.Sub(j.CreateTime)), MaxAttempts: j.MaxRetry + 1})
	}
	d.Next = next
	c.render(w, r, http.StatusOK, "jobs", p)
}

// ---- job detail ----

type jobData struct {
	Job        jobq.Job
	Params     string
	Output     string // the job's output, indented ("" when none)
	Log        *jobLog
	Executions []execRow
	CanCancel  bool
	CanRetry   bool
	// StaleError: the job succeeded, so its last_error is an earlier
	// attempt's, shown as history rather than as an error.
	StaleError bool
}

type execRow struct {
	jobq.Execution
	Duration string
	Progress string // "75% · message" ("" when none)
	Marked   bool   // STALE or LEASE_EXPIRED: the run lost its lease
	Note     string // what the mark means
}

func (c *Console) job(w http.ResponseWriter, r *http.Request) {
	id, err := service.ParseID(r.PathValue("id"))
	if err != nil {
		c.renderAnswer(w, r, "job", "Job", "jobs", c.errAnswer(err, ""), nil)
		return
	}
	c.renderJob(w, r, id, nil)
}

// renderJob shows job id with ans (an action's answer, may be nil) on top.
func (c *Console) renderJob(w http.ResponseWriter, r *http.Request, id uint64, ans *answer) {
	notFound := fmt.Sprintf("job %d not found", id)
	job, err := c.opts.Service.Get(r.Context(), id)
	if err != nil {
		if ans == nil {
			ans = c.errAnswer(err, notFound)
		}
		c.renderAnswer(w, r, "job", fmt.Sprintf("Job %d", id), "jobs", ans, nil)
		return
	}
	ex, err := c.opts.Service.Executions(r.Context(), id)
	if err != nil && ans == nil {
		ans = c.errAnswer(err, notFound)
	}
	d := &jobData{Job: job, Params: prettyJSON(job.Params), Log: c.logOf(r, id),
		CanCancel:  !job.Status.Terminal(),
		CanRetry:   job.Status == jobq.StateFailed || job.Status == jobq.StateCanceled,
		StaleError: job.Status == jobq.StateSuccess && job.LastError != ""}
	for _, e := range ex {
		row := execRow{Execution: e, Progress: progressText(e.Progress, e.ProgressMessage)}
		if e.FinishedAt != nil {
			row.Duration = fmtDuration(e.FinishedAt.Sub(e.StartedAt))
		}
		switch e.Outcome {
		case jobq.OutcomeStale:
			row.Marked, row.Note = true, "finished after losing its lease: its outcome was refused (fencing)"
		case jobq.OutcomeLeaseExpired:
			row.Marked, row.Note = true, "the replica stopped renewing its lease; the rescuer took the job back"
		case jobq.OutcomeReleased:
			row.Note = "handed back unfinished at shutdown"
		case "":
			row.Note = "running"
		}
		d.Executions = append(d.Executions, row)
	}
	if len(job.Output) > 0 {
		d.Output = prettyJSON(job.Output)
	}
	status := http.StatusOK
	if ans != nil {
		status = ans.Status
	}
	c.render(w, r, status, "job", &page{Title: fmt.Sprintf("Job %d", id), Nav: "jobs", Answer: ans, Data: d})
}

// renderAnswer renders a page that has nothing but an answer.
func (c *Console) renderAnswer(w http.ResponseWriter, r *http.Request, name, title, nav string, ans *answer, data any) {
	c.render(w, r, ans.Status, name, &page{Title: title, Nav: nav, Answer: ans, Data: data})
}

func prettyJSON(raw json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

// jobAction runs cancel or retry through the service, as the HTTP API does
// (service.Cancel / service.Retry, whose *service.StateError names the
// job's status and the rule), and shows the job with the answer.
func (c *Console) jobAction(action string) http.HandlerFunc {
	run := map[string]func(context.Context, uint64) (jobq.Job, error){
		"cancel": c.opts.Service.Cancel, "retry": c.opts.Service.Retry}[action]
	return func(w http.ResponseWriter, r *http.Request) {
		id, err := service.ParseID(r.PathValue("id"))
		if err != nil {
			c.renderAnswer(w, r, "job", "Job", "jobs", c.errAnswer(err, ""), nil)
			return
		}
		job, err := run(r.Context(), id)
		var ans *answer
		if err != nil {
			ans = c.errAnswer(err, fmt.Sprintf("job %d not found", id))
		} else {
			var msg string
			switch {
			case action == "retry":
				// A replica may claim it at once: say what the retry did,
				// then what the job is now.
				msg = fmt.Sprintf("retry: job %d re-queued with a fresh retry budget (now %s)", job.ID, job.Status)
			case job.Status == jobq.StateRunning:
				msg = fmt.Sprintf("cancel: job %d is RUNNING; cancellation requested, it ends CANCELED when its handler returns", job.ID)
			default:
				msg = fmt.Sprintf("cancel: job %d is now %s", job.ID, job.Status)
			}
			ans = &answer{OK: true, Status: http.StatusOK, Message: msg}
		}
		c.renderJob(w, r, id, ans)
	}
}

// ---- types and schedules ----

type typesData struct {
	Types    []typeRow
	Periodic []periodicRow
	JobTypes []string
	// Overlaps are the overlap policies the add form offers.
	Overlaps []string
	Form     periodicForm
	// Confirm is set when a schedule waits for confirmation (add or remove).
	Confirm *confirmData
}

type typeRow struct {
	JobType    string
	Registered bool
	Paused     bool
	MaxRunning int
	// RateLimit is "N per P", "" without a rate limit.
	RateLimit string
	Waiting   int64
	Running   int64
	Updated   *time.Time
}

type periodicRow struct {
	jobq.Periodic
	Params string
	NextIn string
}

type periodicForm struct {
	Name, Cron, JobType, Params, Priority, MaxRetry, Misfire, Overlap string
}

type confirmData struct {
	Remove   bool
	Name     string
	Form     periodicForm
	Next     []time.Time // the next instants of a schedule to add
	Replaces *jobq.Periodic
}

func (c *Console) types(w http.ResponseWriter, r *http.Request) {
	c.renderTypes(w, r, nil, nil, periodicForm{Misfire: jobq.MisfireSkip, Overlap: jobq.OverlapAllow})
}

func (c *Console) renderTypes(w http.ResponseWriter, r *http.Request, ans *answer, confirm *confirmData, form periodicForm) {
	d := &typesData{JobTypes: c.opts.JobTypes, Overlaps: jobq.OverlapPolicies, Confirm: confirm, Form: form}
	ctx := r.Context()
	controls, err := c.opts.Ops.Types(ctx)
	if err != nil && ans == nil {
		ans = c.errAnswer(err, "")
	}
	stats, err := c.opts.Ops.Stats(ctx, "1m")
	if err != nil && ans == nil {
		ans = c.errAnswer(err, "")
	}
	rows := map[string]*typeRow{}
	row := func(t string) *typeRow {
		if rows[t] == nil {
			rows[t] = &typeRow{JobType: t}
		}
		return rows[t]
	}
	for _, t := range c.opts.JobTypes {
		row(t).Registered = true
	}
	for _, tc := range controls {
		tr := row(tc.JobType)
		tr.Paused, tr.MaxRunning = tc.Paused, tc.MaxRunning
		if tc.RateStarts > 0 {
			tr.RateLimit = fmt.Sprintf("%d per %s", tc.RateStarts, tc.RatePeriod)
			if tc.RatePerKey {
				tr.RateLimit += " per rate key"
			}
		}
		u := tc.UpdateTime
		tr.Updated = &u
	}
	for _, n := range stats.ByTypeStatus {
		switch n.Status {
		case jobq.StateWaiting:
			row(n.JobType).Waiting += n.Count
		case jobq.StateRunning:
			row(n.JobType).Running += n.Count
		}
	}
	for _, tr := range rows {
		d.Types = append(d.Types, *tr)
	}
	slices.SortFunc(d.Types, func(a, b typeRow) int { return strings.Compare(a.JobType, b.JobType) })
	ps, err := c.opts.Ops.ListPeriodic(ctx)
	if err != nil && ans == nil {
		ans = c.errAnswer(err, "")
	}
	for _, p := range ps {
		d.Periodic = append(d.Periodic, periodicRow{Periodic: p, Params: string(p.Params), NextIn: fmtDuration(p.NextRunAt.Sub(stats.DBNow))})
	}
	status := http.StatusOK
	if ans != nil {
		status = ans.Status
	}
	c.render(w, r, status, "types", &page{Title: "Types and schedules", Nav: "types", Answer: ans, Data: d})
}

func (c *Console) typePause(paused bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		jt := r.PathValue("job_type")
		tc, err := c.opts.Ops.SetPaused(r.Context(), jt, paused)
		ans := c.typeAnswer(tc, err)
		c.renderTypes(w, r, ans, nil, periodicForm{Misfire: jobq.MisfireSkip, Overlap: jobq.OverlapAllow})
	}
}

func (c *Console) typeLimit(w http.ResponseWriter, r *http.Request) {
	jt := r.PathValue("job_type")
	var req apitype.LimitRequest
	var err error
	if v := strings.TrimSpace(r.PostFormValue("max_running")); v != "" {
		n, perr := strconv.Atoi(v)
		if perr != nil {
			err = &service.ValidationError{Field: "max_running", Rule: fmt.Sprintf("must be an integer in [0, %d] (0 removes the limit), got %q", service.MaxRunningLimit, v)}
		}
		req.MaxRunning = &n
	}
	var tc jobq.TypeControl
	if err == nil {
		tc, err = c.opts.Ops.SetLimit(r.Context(), jt, req)
	}
	c.renderTypes(w, r, c.typeAnswer(tc, err), nil, periodicForm{Misfire: jobq.MisfireSkip, Overlap: jobq.OverlapAllow})
}

func (c *Console) typeAnswer(tc jobq.TypeControl, err error) *answer {
	if err != nil {
		return c.errAnswer(err, "")
	}
	state := "running"
	if tc.Paused {
		state = "paused: no replica claims its jobs; RUNNING ones finish"
	}
	limit := "no limit"
	if tc.MaxRunning > 0 {
		limit = fmt.Sprintf("at most %d RUNNING across all replicas", tc.MaxRunning)
	}
	return &answer{OK: true, Status: http.StatusOK, Message: fmt.Sprintf("type %s is %s; %s", tc.JobType, state, limit)}
}

func formOf(r *http.Request) periodicForm {
	f := periodicForm{}
	for k, p := range map[string]*string{"name": &f.Name, "cron": &f.Cron, "job_type": &f.JobType, "params": &f.Params,
		"priority": &f.Priority, "max_retry": &f.MaxRetry, "misfire": &f.Misfire, "overlap": &f.Overlap} {
		*p = strings.TrimSpace(r.PostFormValue(k))
	}
	return f
}

// request turns the form into the API's request; a non-integer number is a
// ValidationError naming its field.
func (f periodicForm) request() (apitype.PeriodicRequest, error) {
	req := apitype.PeriodicRequest{Name: f.Name, Cron: f.Cron, JobType: f.JobType, Misfire: f.Misfire, Overlap: f.Overlap}
	if f.Params != "" {
		req.Params = json.RawMessage(f.Params)
		if !json.Valid(req.Params) {
			return req, &service.ValidationError{Field: "params", Rule: "must be a JSON object, e.g. {\"ms\": 100}"}
		}
	}
	for _, n := range []struct {
		field, v string
		dst      **int
	}{{"priority", f.Priority, &req.Priority}, {"max_retry", f.MaxRetry, &req.MaxRetry}} {
		if n.v == "" {
			continue
		}
		i, err := strconv.Atoi(n.v)
		if err != nil {
			return req, &service.ValidationError{Field: n.field, Rule: fmt.Sprintf("must be an integer, got %q", n.v)}
		}
		*n.dst = &i
	}
	return req, nil
}

// periodicAdd validates the form; without confirm=yes it shows what would be
// created (the next instants, and the schedule it replaces) and asks for
// confirmation; with it, creates or replaces the schedule.
func (c *Console) periodicAdd(w http.ResponseWriter, r *http.Request) {
	f := formOf(r)
	req, err := f.request()
	if err == nil {
		_, err = c.opts.Ops.ValidatePeriodic(req, jobq.PeriodicSourceAPI)
	}
	if err != nil {
		c.renderTypes(w, r, c.errAnswer(err, ""), nil, f)
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		conf := &confirmData{Name: f.Name, Form: f}
		if sched, perr := cronplan.Parse(f.Cron); perr == nil {
			t := time.Now().UTC()
			for range 3 {
				t = sched.Next(t)
				conf.Next = append(conf.Next, t)
			}
		}
		if old, gerr := c.opts.Ops.GetPeriodic(r.Context(), f.Name); gerr == nil {
			conf.Replaces = &old
		}
		c.renderTypes(w, r, nil, conf, f)
		return
	}
	p, created, err := c.opts.Ops.PutPeriodic(r.Context(), req, jobq.PeriodicSourceAPI)
	if err != nil {
		c.renderTypes(w, r, c.errAnswer(err, ""), nil, f)
		return
	}
	verb := "replaced"
	if created {
		verb = "created"
	}
	c.renderTypes(w, r, &answer{OK: true, Status: http.StatusOK,
		Message: fmt.Sprintf("schedule %s %s: %s → %s, next run %s", p.Name, verb, p.Cron, p.JobType, p.NextRunAt.Format(timeLayout))},
		nil, periodicForm{Misfire: jobq.MisfireSkip, Overlap: jobq.OverlapAllow})
}

// periodicDelete asks for confirmation, then removes the schedule.
func (c *Console) periodicDelete(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	blank := periodicForm{Misfire: jobq.MisfireSkip, Overlap: jobq.OverlapAllow}
	if r.PostFormValue("confirm") != "yes" {
		if _, err := c.opts.Ops.GetPeriodic(r.Context(), name); err != nil {
			c.renderTypes(w, r, c.errAnswer(err, fmt.Sprintf("schedule %q not found (removed meanwhile?)", name)), nil, blank)
			return
		}
		c.renderTypes(w, r, nil, &confirmData{Remove: true, Name: name}, blank)
		return
	}
	err := c.opts.Ops.DeletePeriodic(r.Context(), name)
	if err != nil {
		c.renderTypes(w, r, c.errAnswer(err, fmt.Sprintf("schedule %q not found (removed meanwhile?)", name)), nil, blank)
		return
	}
	c.renderTypes(w, r, &answer{OK: true, Status: http.StatusOK,
		Message: fmt.Sprintf("schedule %s removed; jobs it already enqueued stay", name)}, nil, blank)
}
