package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/cronplan"
	"github.com/jobq/jobq/storeerr"
)

// Operations input limits. Each is enforced at the edge with a 400 naming
// the field.
const (
	MaxRunningLimit      = 100000           // max_running: 0 (no limit) – 100,000
	MaxRateStarts        = 1000000          // starts: 1 – 1,000,000
	MinRatePeriod        = time.Millisecond // period: 1ms – 24h
	MaxRatePeriod        = day              //
	MaxPeriodicNameRunes = 40               // name: 1–40 of [A-Za-z0-9_.-], so '<name>@<instant>' fits job_key
	MaxCronRunes         = 128              // cron: 1–128 characters
	MinPurgeAge          = time.Minute      // older_than: at least 1m
	StatsWindowDefault   = time.Minute      // window: default 1m
	MaxActivityMinutes   = 60               // activity: 1–60 minutes
	MaxStatsWindow       = time.Hour        // window: 1s – 1h
	MinStatsWindow       = time.Second      //
	purgeBatch           = 500              // jobs per purge transaction
	retryBulkBatch       = 500              // jobs per bulk-retry UPDATE
	day                  = 24 * time.Hour   //
	maxAge               = 100 * 365 * day  // older_than: at most ~100 years
	opsRetryAttempts     = apiRetryAttempts // transient DB errors retried per call
	periodicNameAlphabet = "letters, digits, '_', '.' and '-'"
)

// OpsStore is what the operations API needs from persistence.
type OpsStore interface {
	TypeSetPaused(ctx context.Context, jobType string, paused bool) (jobq.TypeControl, error)
	TypeSetLimit(ctx context.Context, jobType string, maxRunning int) (jobq.TypeControl, error)
	TypeSetRateLimit(ctx context.Context, jobType string, rl jobq.RateLimit) (jobq.TypeControl, error)
	TypeControls(ctx context.Context) ([]jobq.TypeControl, error)
	PeriodicUpsert(ctx context.Context, spec jobq.PeriodicSpec, firstFunc func(now time.Time) time.Time) (jobq.Periodic, bool, error)
	PeriodicGet(ctx context.Context, name string) (jobq.Periodic, error)
	PeriodicList(ctx context.Context) ([]jobq.Periodic, error)
	PeriodicDelete(ctx context.Context, name string) error
	// FireHistory is one page of a schedule's fire ledger, newest first.
	FireHistory(ctx context.Context, p jobq.FireHistoryParams) ([]jobq.FireEntry, error)
	JobRetryBulk(ctx context.Context, p jobq.RetryBulkParams) (int64, error)
	JobPurge(ctx context.Context, p jobq.PurgeParams) (jobq.PurgeResult, error)
	QueueStats(ctx context.Context, window time.Duration) (jobq.QueueStats, error)
	Activity(ctx context.Context, minutes int) (jobq.Activity, error)
}

// Ops validates and runs operations requests: pause/resume and limits per
// job type, periodic schedules, bulk retry, purge and stats. Nothing is
// written unless the whole request is valid.
type Ops struct {
	store     OpsStore
	knownType func(string) bool
	changed   func()
	retry     storeerr.RetryPolicy
	// validateParams, if set, checks a schedule's params for its job type,
	// as a submit's are (Options.ValidateParamsFunc).
	validateParams func(jobType string, params json.RawMessage) (field, rule string)
}

// OpsOptions configures an Ops.
type OpsOptions struct {
	// Store is where type controls and schedules are kept. Required.
	Store OpsStore
	// KnownTypeFunc reports registered job types. Defaults to nil: every
	// type is accepted.
	KnownTypeFunc func(jobType string) bool
	// ValidateParamsFunc checks a schedule's params (the same check a
	// submit of that job type gets): a schedule whose every run would be
	// refused at submit is refused when it is put, naming the field.
	// Defaults to nil: params are only checked to be a JSON object.
	ValidateParamsFunc func(jobType string, params json.RawMessage) (field, rule string)
	// ChangedFunc is called after every change to type controls or
	// schedules so the local scheduler re-reads them at once
	// (scheduler.RefreshOps). Defaults to nil: none.
	ChangedFunc func()
}

// NewOps returns the operations service configured by opts.
func NewOps(opts OpsOptions) *Ops {
	return &Ops{store: opts.Store, knownType: opts.KnownTypeFunc, changed: opts.ChangedFunc,
		validateParams: opts.ValidateParamsFunc, retry: storeerr.RetryPolicy{MaxAttempts: opsRetryAttempts}}
}

func (o *Ops) notify() {
	if o.changed != nil {
		o.changed()
	}
}

func (o *Ops) checkType(field, jobType string) error {
	if err := checkText(field, jobType, MaxJobTypeRunes); err != nil {
		return err
	}
	if o.knownType != nil && !o.knownType(jobType) {
		return invalid(field, "%q is not a registered job type", jobType)
	}
	return nil
}

// SetPaused pauses (paused=true) or resumes jobType, a registered type.
// Paused types are not claimed by any replica from its next scan on; their
// RUNNING jobs finish.
func (o *Ops) SetPaused(ctx context.Context, jobType string, paused bool) (jobq.TypeControl, error) {
	if err := o.checkType("job_type", jobType); err != nil {
		return jobq.TypeControl{}, err
	}
	tc, err := retryV(ctx, o.retry, "pause", func() (jobq.TypeControl, error) { return o.store.TypeSetPaused(ctx, jobType, paused) })
	if err == nil {
		o.notify()
	}
	return tc, err
}

// SetLimit sets jobType's cluster-wide limit of RUNNING jobs.
func (o *Ops) SetLimit(ctx context.Context, jobType string, req apitype.LimitRequest) (jobq.TypeControl, error) {
	if err := o.checkType("job_type", jobType); err != nil {
		return jobq.TypeControl{}, err
	}
	if req.MaxRunning == nil {
		return jobq.TypeControl{}, invalid("max_running", "is required: an integer in [0, %d] (0 removes the limit)", MaxRunningLimit)
	}
	if n := *req.MaxRunning; n < 0 || n > MaxRunningLimit {
		return jobq.TypeControl{}, invalid("max_running", "must be an integer in [0, %d] (0 removes the limit), got %d", MaxRunningLimit, n)
	}
	tc, err := retryV(ctx, o.retry, "limit", func() (jobq.TypeControl, error) { return o.store.TypeSetLimit(ctx, jobType, *req.MaxRunning) })
	if err == nil {
		o.notify()
	}
	return tc, err
}

// SetRateLimit sets jobType's cluster-wide rate limit: at most req.Starts
// starts in any window of req.Period, of the type or (req.PerKey) of each
// rate key of the type.
func (o *Ops) SetRateLimit(ctx context.Context, jobType string, req apitype.RateLimitRequest) (jobq.TypeControl, error) {
	if err := o.checkType("job_type", jobType); err != nil {
		return jobq.TypeControl{}, err
	}
	if req.Starts == nil {
		return jobq.TypeControl{}, invalid("starts", "is required: an integer in [1, %d] (DELETE the rate limit to remove it)", MaxRateStarts)
	}
	if n := *req.Starts; n < 1 || n > MaxRateStarts {
		return jobq.TypeControl{}, invalid("starts", "must be an integer in [1, %d], got %d", MaxRateStarts, n)
	}
	if req.Period == "" {
		return jobq.TypeControl{}, invalid("period", "is required: a duration from %s to %s, e.g. \"1s\" or \"500ms\"", MinRatePeriod, MaxRatePeriod)
	}
	period, err := time.ParseDuration(req.Period)
	if err != nil {
		return jobq.TypeControl{}, invalid("period", "must be a duration such as \"1s\" or \"500ms\", got %q", req.Period)
	}
	if period < MinRatePeriod || period > MaxRatePeriod {
		return jobq.TypeControl{}, invalid("period", "must be from %s to %s, got %s", MinRatePeriod, MaxRatePeriod, period)
	}
	period = period.Truncate(time.Microsecond)
	tc, err := retryV(ctx, o.retry, "rate limit", func() (jobq.TypeControl, error) {
		return o.store.TypeSetRateLimit(ctx, jobType, jobq.RateLimit{Starts: *req.Starts, Period: period, PerKey: req.PerKey})
	})
	if err == nil {
		o.notify()
	}
	return tc, err
}

// ClearRateLimit removes jobType's rate limit (if any): its jobs are
// claimed by the ordinary scan again unless it is paused or has a
// concurrency limit.
func (o *Ops) ClearRateLimit(ctx context.Context, jobType string) (jobq.TypeControl, error) {
	if err := o.checkType("job_type", jobType); err != nil {
		return jobq.TypeControl{}, err
	}
	tc, err := retryV(ctx, o.retry, "rate limit", func() (jobq.TypeControl, error) { return o.store.TypeSetRateLimit(ctx, jobType, jobq.RateLimit{}) })
	if err == nil {
		o.notify()
	}
	return tc, err
}

// Types lists the job types that have a control row (paused or limited now
// or before), ordered by type.
func (o *Ops) Types(ctx context.Context) ([]jobq.TypeControl, error) {
	out, err := retryV(ctx, o.retry, "types", func() ([]jobq.TypeControl, error) { return o.store.TypeControls(ctx) })
	if out == nil {
		out = []jobq.TypeControl{}
	}
	return out, err
}

// DecodeStrict parses body into v: valid UTF-8, exactly one JSON object, no
// unknown fields. Errors are *ValidationError naming the field.
func DecodeStrict(body []byte, v any) error {
	if !utf8.Valid(body) {
		return invalid("body", "must be valid UTF-8")
	}
	if key := repeatedTopLevelKey(body); key != "" {
		return invalid(fieldName(key), "is given more than once")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var ute *json.UnmarshalTypeError
		switch {
		case errors.As(err, &ute):
			field, kind := ute.Field, "string"
			if field == "" {
				field, kind = "body", "object"
			} else if strings.Contains(ute.Type.String(), "int") {
				kind = "integer"
			} else if ute.Type.String() == "bool" {
				kind = "boolean (true or false)"
			}
			return invalid(field, "must be a JSON %s", kind)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return invalid(strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`), "unknown field")
		default:
			return invalid("body", "%s", jsonRule(body, err))
		}
	}
	if dec.More() {
		return invalid("body", "must hold exactly one JSON object")
	}
	return nil
}

// repeatedTopLevelKey returns the first key that body's top-level JSON object
// holds more than once (encoding/json would silently keep the last), or ""
// when there is none or body is not a well-formed object (Decode reports that).
func repeatedTopLevelKey(body []byte) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return ""
	}
	seen := map[string]bool{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return ""
		}
		key, _ := kt.(string)
		if seen[key] {
			return key
		}
		seen[key] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return ""
		}
	}
	return ""
}

// ValidatePeriodic checks every field of req and fills defaults (priority
// 0, max_retry 3, timeout_ms 0, misfire skip, overlap allow). It does not
// touch the database.
func (o *Ops) ValidatePeriodic(req apitype.PeriodicRequest, source string) (jobq.PeriodicSpec, error) {
	spec := jobq.PeriodicSpec{Name: req.Name, Cron: req.Cron, JobType: req.JobType, MaxRetry: MaxRetryDefault,
		Misfire: jobq.MisfireSkip, Source: source}
	if err := checkText("name", req.Name, MaxPeriodicNameRunes); err != nil {
		return spec, err
	}
	for _, r := range req.Name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-') {
			return spec, invalid("name", "must hold only %s, got %q", periodicNameAlphabet, req.Name)
		}
	}
	if err := checkText("cron", req.Cron, MaxCronRunes); err != nil {
		return spec, err
	}
	if _, err := cronplan.Parse(req.Cron); err != nil {
		return spec, invalid("cron", "must be a cron expression (5 fields, 6 with leading seconds, or @every/@hourly…): %v", err)
	}
	switch req.Overlap {
	case "", jobq.OverlapAllow:
		spec.Overlap = jobq.OverlapAllow
	case jobq.OverlapSkip, jobq.OverlapQueueOne, jobq.OverlapCancelPrevious:
		if req.Workflow != nil {
			return spec, invalid("overlap", "must be %q for a workflow schedule, got %q", jobq.OverlapAllow, req.Overlap)
		}
		spec.Overlap = req.Overlap
	default:
		return spec, invalid("overlap", "must be one of %s, got %q", strings.Join(jobq.OverlapPolicies, ", "), req.Overlap)
	}
	if req.Workflow != nil {
		return o.validatePeriodicWorkflow(req, spec)
	}
	if err := o.checkType("job_type", req.JobType); err != nil {
		return spec, err
	}
	params, err := canonicalParams(req.Params)
	if err != nil {
		return spec, err
	}
	spec.Params = params
	if o.validateParams != nil {
		if field, rule := o.validateParams(req.JobType, json.RawMessage(params)); field != "" {
			return spec, invalid(field, "%s", rule)
		}
	}
	if req.Priority != nil {
		if *req.Priority < MinPriority || *req.Priority > MaxPriority {
			return spec, invalid("priority", "must be an integer in [%d, %d], got %d", MinPriority, MaxPriority, *req.Priority)
		}
		spec.Priority = *req.Priority
	}
	if req.MaxRetry != nil {
		if *req.MaxRetry < 0 || *req.MaxRetry > MaxRetryLimit {
			return spec, invalid("max_retry", "must be an integer in [0, %d], got %d", MaxRetryLimit, *req.MaxRetry)
		}
		spec.MaxRetry = *req.MaxRetry
	}
	if req.TimeoutMs != nil {
		if *req.TimeoutMs < 0 || *req.TimeoutMs > MaxTimeoutMs {
			return spec, invalid("timeout_ms", "must be an integer in [0, %d] (0 = no timeout), got %d", MaxTimeoutMs, *req.TimeoutMs)
		}
		spec.TimeoutMs = *req.TimeoutMs
	}
	switch req.Misfire {
	case "", jobq.MisfireSkip:
	case jobq.MisfireOnce:
		spec.Misfire = jobq.MisfireOnce
	default:
		return spec, invalid("misfire", "must be %q or %q, got %q", jobq.MisfireSkip, jobq.MisfireOnce, req.Misfire)
	}
	return spec, nil
}

// PutPeriodic validates req and creates or replaces the schedule (source
// jobq.PeriodicSourceAPI or jobq.PeriodicSourceConfig). A new schedule, or
// one whose cron expression changed, starts at its next instant; an
// unchanged expression keeps its cursor. created is true for a new schedule.
func (o *Ops) PutPeriodic(ctx context.Context, req apitype.PeriodicRequest, source string) (p jobq.Periodic, created bool, err error) {
	spec, err := o.ValidatePeriodic(req, source)
	if err != nil {
		return p, false, err
	}
	sched, _ := cronplan.Parse(spec.Cron)
	first := func(now time.Time) time.Time { return sched.Next(now) }
	p, created, err = retryV2(ctx, o.retry, "periodic.put", func() (jobq.Periodic, bool, error) {
		return o.store.PeriodicUpsert(ctx, spec, first)
	})
	if err == nil {
		o.notify()
	}
	return p, created, err
}

func checkName(name string) error { return checkText("name", name, MaxPeriodicNameRunes) }

// GetPeriodic returns one schedule; jobq.ErrNotFound if none.
func (o *Ops) GetPeriodic(ctx context.Context, name string) (jobq.Periodic, error) {
	if err := checkName(name); err != nil {
		return jobq.Periodic{}, err
	}
	p, err := retryV(ctx, o.retry, "periodic.get", func() (jobq.Periodic, error) { return o.store.PeriodicGet(ctx, name) })
	return p, err
}

// ListPeriodic returns every schedule, ordered by name.
func (o *Ops) ListPeriodic(ctx context.Context) ([]jobq.Periodic, error) {
	out, err := retryV(ctx, o.retry, "periodic.list", func() ([]jobq.Periodic, error) { return o.store.PeriodicList(ctx) })
	if out == nil {
		out = []jobq.Periodic{}
	}
	return out, err
}

// DeletePeriodic removes a schedule (jobs it already enqueued stay);
// jobq.ErrNotFound if none.
func (o *Ops) DeletePeriodic(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	err := retryDo(ctx, o.retry, "periodic.delete", func() error { return o.store.PeriodicDelete(ctx, name) })
	if err == nil {
		o.notify()
	}
	return err
}

// RetryBulk re-queues every job in req.Status (of req.JobType, if set) with
// a fresh retry budget, due now, in batches of 500.
func (o *Ops) RetryBulk(ctx context.Context, req apitype.RetryBulkRequest) (apitype.RetryBulkResult, error) {
	if jobq.JobState(req.Status) != jobq.StateFailed && jobq.JobState(req.Status) != jobq.StateCanceled {
		return apitype.RetryBulkResult{}, invalid("status", "must be %s or %s, got %q", jobq.StateFailed, jobq.StateCanceled, req.Status)
	}
	if req.JobType != "" {
		if err := checkText("job_type", req.JobType, MaxJobTypeRunes); err != nil {
			return apitype.RetryBulkResult{}, err
		}
	}
	n, err := retryV(ctx, o.retry, "retry.bulk", func() (int64, error) {
		return o.store.JobRetryBulk(ctx, jobq.RetryBulkParams{Status: jobq.JobState(req.Status), JobType: req.JobType, Batch: retryBulkBatch})
	})
	return apitype.RetryBulkResult{Retried: n}, err
}

// ParseAge parses an age such as "7d", "36h", "90m", "1d12h" or "2h30m":
// Go duration syntax plus a leading whole number of days ("d").
func ParseAge(s string) (time.Duration, error) {
	var days time.Duration
	rest := s
	if i := strings.IndexByte(s, 'd'); i >= 0 {
		n, err := strconv.Atoi(s[:i])
		if err != nil || n < 0 || n > 36500 {
			return 0, fmt.Errorf("%q: days must be a whole number 0–36500 before 'd'", s)
		}
		days, rest = time.Duration(n)*day, s[i+1:]
	}
	var d time.Duration
	if rest != "" {
		var err error
		if d, err = time.ParseDuration(rest); err != nil {
			return 0, fmt.Errorf("%q: want e.g. 7d, 36h, 1d12h, 90m", s)
		}
	}
	if s == "" {
		return 0, errors.New("empty; want e.g. 7d, 36h, 1d12h, 90m")
	}
	return days + d, nil
}

// Purge deletes terminal jobs finished more than req.OlderThan ago, with
// their job_execution rows, 500 per short transaction.
func (o *Ops) Purge(ctx context.Context, req apitype.PurgeRequest) (jobq.PurgeResult, error) {
	age, err := ParseAge(req.OlderThan)
	if err != nil {
		return jobq.PurgeResult{}, invalid("older_than", "must be an age such as 7d, 36h or 90m: %v", err)
	}
	if age < MinPurgeAge || age > maxAge {
		return jobq.PurgeResult{}, invalid("older_than", "must be between %s and 36500d, got %s", MinPurgeAge, age)
	}
	res, err := retryV(ctx, o.retry, "purge", func() (jobq.PurgeResult, error) {
		return o.store.JobPurge(ctx, jobq.PurgeParams{OlderThan: age, Batch: purgeBatch})
	})
	return res, err
}

// Stats returns the queue snapshot; window ("" for 1m) is the span of the
// recent counts, 1s–1h, in Go duration syntax.
func (o *Ops) Stats(ctx context.Context, window string) (jobq.QueueStats, error) {
	w := StatsWindowDefault
	if window != "" {
		d, err := time.ParseDuration(window)
		if err != nil || d < MinStatsWindow || d > MaxStatsWindow {
			return jobq.QueueStats{}, invalid("window", "must be a duration between %s and %s such as 5m, got %q", MinStatsWindow, MaxStatsWindow, window)
		}
		w = d
	}
	st, err := retryV(ctx, o.retry, "stats", func() (jobq.QueueStats, error) { return o.store.QueueStats(ctx, w) })
	return st, err
}

// Activity returns the cluster's last `minutes` minutes (1–60): attempts
// started with their pickup latency, attempts finished by outcome, and the
// replicas seen (see jobq.Activity).
func (o *Ops) Activity(ctx context.Context, minutes int) (jobq.Activity, error) {
	if minutes < 1 || minutes > MaxActivityMinutes {
		return jobq.Activity{}, invalid("minutes", "must be an integer in [1, %d], got %d", MaxActivityMinutes, minutes)
	}
	return retryV(ctx, o.retry, "activity", func() (jobq.Activity, error) { return o.store.Activity(ctx, minutes) })
}

// ParsePeriodicSpec parses a schedule given on the command line or in a
// file, "name=cron;job_type[;params[;misfire[;overlap]]]", e.g.
// `nightly=0 0 3 * * *;backup;{"db":"main"};once;skip`. params is a JSON
// object (it may contain ';'); misfire is skip (default) or once; overlap
// allow (default), skip, queue_one or cancel_previous. Field errors are
// *ValidationError; values are checked by ValidatePeriodic.
func ParsePeriodicSpec(spec string) (apitype.PeriodicRequest, error) {
	var req apitype.PeriodicRequest
	name, rest, ok := strings.Cut(spec, "=")
	if !ok {
		return req, invalid("periodic", "must be name=cron;job_type[;params[;misfire[;overlap]]], got %q", spec)
	}
	req.Name = strings.TrimSpace(name)
	cronExpr, rest, ok := strings.Cut(rest, ";")
	if !ok {
		return req, invalid("periodic", "%q: missing ';job_type' after the cron expression", spec)
	}
	req.Cron = strings.TrimSpace(cronExpr)
	jobType, rest, _ := strings.Cut(rest, ";")
	req.JobType = strings.TrimSpace(jobType)
	rest = strings.TrimSpace(rest)
	if strings.HasPrefix(rest, "{") {
		dec := json.NewDecoder(strings.NewReader(rest))
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return req, invalid("params", "%q: must be a JSON object: %v", spec, err)
		}
		req.Params = raw
		rest = strings.TrimSpace(rest[dec.InputOffset():])
		if rest != "" {
			after, ok := strings.CutPrefix(rest, ";")
			if !ok {
				return req, invalid("periodic", "%q: expected ';misfire' after params", spec)
			}
			rest = strings.TrimSpace(after)
		}
	}
	misfire, overlap, _ := strings.Cut(rest, ";")
	req.Misfire, req.Overlap = strings.TrimSpace(misfire), strings.TrimSpace(overlap)
	return req, nil
}
