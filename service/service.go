// Package service is the one implementation of jobq's API behaviour and
// input validation, shared by the HTTP handlers (httpapi) and any other
// transport. Nothing is written unless the whole request is valid.
package service

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/storeerr"
)

// Input limits. Each is enforced at the edge with a 400 naming the field.
//
// MaxParamsBytes is 1 MB (10^6 bytes) so that a request carrying the largest
// params fits the HTTP API's default 1 MiB (1,048,576-byte) body limit with
// 48,576 bytes left for the rest of the envelope, which needs well under
// 1 KiB when compact.
const (
	MaxJobKeyRunes   = 64                     // job_key: 1–64 characters
	MaxJobTypeRunes  = 64                     // job_type: 1–64 characters, and registered
	MinPriority      = 0                      // priority: 0–1000, higher runs first; default 0
	MaxPriority      = 1000                   //
	MaxRetryLimit    = 100                    // max_retry: 0–100; default 3
	MaxRetryDefault  = 3                      //
	MaxTimeoutMs     = 86400000               // timeout_ms: 0 (none) – 24 h
	MaxUniqueForMs   = 365 * 24 * 3600 * 1000 // unique_for_ms: 1 ms – 365 days
	MaxParamsBytes   = 1000000                // params: a JSON object of at most 1 MB (1,000,000 bytes) once compacted
	MaxParamsDepth   = 100                    // params: nested at most 100 objects/arrays deep
	MaxListLimit     = 1000                   // limit: 1–1000; default 50
	ListLimitDefault = 50
)

// Statuses lists the valid job statuses.
var Statuses = jobq.JobStates

// ValidationError is a rejected input: Field names the offending field and
// Rule says what it must be. Transports map it to HTTP 400 / InvalidArgument.
type ValidationError struct {
	Field string
	Rule  string
}

func (e *ValidationError) Error() string { return e.Field + ": " + e.Rule }

func invalid(field, format string, args ...any) error {
	return &ValidationError{Field: field, Rule: fmt.Sprintf(format, args...)}
}

// Errors transports branch on (besides *ValidationError).
var (
	ErrNotFound     = jobq.ErrNotFound
	ErrKeyConflict  = jobq.ErrKeyConflict
	ErrInvalidState = jobq.ErrInvalidState
)

// Store is what the service needs from persistence.
type Store interface {
	JobSubmit(ctx context.Context, p jobq.SubmitParams) (jobq.Job, bool, error)
	JobSubmitMany(ctx context.Context, ps []jobq.SubmitParams) ([]jobq.SubmitOutcome, error)
	JobGet(ctx context.Context, id uint64) (jobq.Job, error)
	JobList(ctx context.Context, p jobq.ListParams) ([]jobq.Job, uint64, error)
	JobCancel(ctx context.Context, id uint64) (jobq.Job, error)
	JobRetry(ctx context.Context, id uint64) (jobq.Job, error)
	JobExecutions(ctx context.Context, id uint64) ([]jobq.Execution, error)
}

// Service validates requests and runs them against the store.
type Service struct {
	store Store
	// knownType reports whether a job_type is registered.
	knownType func(string) bool
	// wake, if set, is called after a job is created (local wake-up).
	wake func()
	// wakeAt, if set, is called after a SCHEDULED job is created with its
	// run_at and the database clock of the insert (the promoter's hint).
	wakeAt func(runAt, dbNow time.Time)
	retry  storeerr.RetryPolicy
	// validateParams, if set, checks a submit's params for its job type.
	validateParams func(jobType string, params json.RawMessage) (field, rule string)
	// isRemote, if set, reports the job types run by remote workers (a
	// worker token's "*" covers those).
	isRemote func(string) bool
	// logs, if set, serves Logs.
	logs LogStore
	// workflows, if set, serves the workflow calls (workflow.go).
	workflows WorkflowStore
}

// Options configures a Service.
type Options struct {
	// Store is where jobs are kept (a *store.Store, possibly wrapped, e.g.
	// by metrics.WrapServiceStore). Required.
	Store Store
	// KnownTypeFunc reports whether a job_type is registered (typically
	// scheduler.Registry.Lookup); a submit of another type is a 400 naming
	// job_type. Defaults to nil: every type is accepted.
	KnownTypeFunc func(jobType string) bool
	// ValidateParamsFunc checks a submit's params for its job type
	// (typically scheduler.Registry.ValidateParams): a field it names is a
	// 400 naming that field and the rule it breaks, and nothing is written.
	// Defaults to nil: params are only checked to be a JSON object.
	ValidateParamsFunc func(jobType string, params json.RawMessage) (field, rule string)
	// WakeFunc is called after jobs are created WAITING (or retried), so
	// the local scanner claims them at once (scheduler.Wake). Defaults to
	// nil: none.
	WakeFunc func()
	// WakeAtFunc is called after a job is created SCHEDULED (run_at ahead
	// of the database clock) with its RunAt and CreateTime, so the local
	// promoter makes it WAITING when it is due (scheduler.WakeAt). Defaults
	// to nil: none.
	WakeAtFunc func(runAt, dbNow time.Time)
	// RemoteTypeFunc reports the job types run by remote workers (a worker
	// token's "*" covers those). Defaults to nil: none.
	RemoteTypeFunc func(jobType string) bool
	// Logs serves Logs (typically the *store.Store). Defaults to nil: Logs
	// returns no lines.
	Logs LogStore
}

// New returns a Service configured by opts.
func New(opts Options) *Service {
	return &Service{store: opts.Store, knownType: opts.KnownTypeFunc, wake: opts.WakeFunc, wakeAt: opts.WakeAtFunc,
		validateParams: opts.ValidateParamsFunc, isRemote: opts.RemoteTypeFunc, logs: opts.Logs, retry: storeerr.RetryPolicy{MaxAttempts: apiRetryAttempts}}
}

// submitFields are the fields of a submit body, exactly as spelled.
var submitFields = []string{"job_key", "job_type", "params", "priority", "max_retry", "run_at", "timeout_ms", "unique_for_ms", "unique_while",
	"concurrency_key", "concurrency_limit", "rate_key"}

// fieldRules say what each typed field must be, for type errors.
var fieldRules = map[string]string{
	"job_key":           fmt.Sprintf("must be a JSON string of 1–%d characters", MaxJobKeyRunes),
	"job_type":          fmt.Sprintf("must be a JSON string naming a registered job type (1–%d characters)", MaxJobTypeRunes),
	"priority":          fmt.Sprintf("must be a JSON integer in [%d, %d]", MinPriority, MaxPriority),
	"max_retry":         fmt.Sprintf("must be a JSON integer in [0, %d]", MaxRetryLimit),
	"timeout_ms":        fmt.Sprintf("must be a JSON integer in [0, %d] (0 = no timeout)", MaxTimeoutMs),
	"run_at":            "must be a JSON string holding an RFC 3339 time with a UTC offset",
	"params":            "must be a JSON object",
	"unique_for_ms":     fmt.Sprintf("must be a JSON integer in [1, %d] (ms the key stays unique)", int64(MaxUniqueForMs)),
	"unique_while":      `must be the JSON string "active"`,
	"concurrency_key":   fmt.Sprintf("must be a JSON string of 1–%d characters", jobq.MaxConcurrencyKeyRunes),
	"concurrency_limit": fmt.Sprintf("must be a JSON integer in [1, %d]", jobq.MaxConcurrencyLimit),
	"rate_key":          fmt.Sprintf("must be a JSON string of 1–%d characters", jobq.MaxRateKeyRunes),
}

// DecodeSubmit parses a submit body strictly: valid UTF-8, exactly one JSON
// object, only the documented field names spelled exactly (encoding/json
// alone would accept "JOB_KEY"), each at most once, and nothing after the
// object. It does not validate values (see ValidateSubmit). Errors are
// *ValidationError naming the field ("body" for the envelope).
func DecodeSubmit(body []byte) (apitype.SubmitRequest, error) {
	var req apitype.SubmitRequest
	if !utf8.Valid(body) {
		return req, invalid("body", "must be valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err == io.EOF {
		return req, invalid("body", "is empty; must be a JSON object")
	}
	if err != nil {
		return req, invalid("body", "%s", jsonRule(body, err))
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return req, invalid("body", "must be a JSON object, got %s", tokenKind(tok))
	}
	seen := make(map[string]bool, len(submitFields))
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return req, invalid("body", "%s", jsonRule(body, err))
		}
		key, _ := kt.(string)
		if !slices.Contains(submitFields, key) {
			return req, invalid(fieldName(key), "unknown field (the fields are %s)", strings.Join(submitFields, ", "))
		}
		if seen[key] {
			return req, invalid(key, "is given more than once")
		}
		seen[key] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return req, invalid("body", "%s", jsonRule(body, err))
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return req, invalid("body", "%s", jsonRule(body, err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return req, invalid("body", "must hold exactly one JSON object and nothing after it")
	}
	if err := json.Unmarshal(body, &req); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) && fieldRules[ute.Field] != "" {
			return apitype.SubmitRequest{}, invalid(ute.Field, "%s, got %s", fieldRules[ute.Field], ute.Value)
		}
		return apitype.SubmitRequest{}, invalid("body", "%s", jsonRule(body, err))
	}
	return req, nil
}

// jsonRule says what is wrong with a body the JSON decoder refused: that
// it ends too early, or at which byte (counted from 1) its syntax breaks;
// encoding/json alone says "EOF" or "invalid character 'o' in literal null".
// The position comes from scanning the whole body again, because the
// streaming decoder's offsets are one short after it peeks ahead.
func jsonRule(body []byte, err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		var raw json.RawMessage
		if errors.As(json.Unmarshal(body, &raw), &se) && se.Error() != "unexpected end of JSON input" {
			return fmt.Sprintf("not valid JSON at byte %d: %s", se.Offset, se.Error())
		}
		err = io.ErrUnexpectedEOF
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "not valid JSON: unexpected end of input"
	}
	return "must be a JSON object: " + err.Error()
}

// fieldName makes an unknown key printable as an error's field: quoted
// when empty, over 64 characters (cut) or holding control characters.
func fieldName(key string) string {
	plain := key != "" && utf8.RuneCountInString(key) <= 64
	for _, r := range key {
		plain = plain && !unicode.IsControl(r) && r != '"'
	}
	if plain {
		return key
	}
	if r := []rune(key); len(r) > 64 {
		key = string(r[:64]) + "…"
	}
	return strconv.Quote(key)
}

func tokenKind(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '[' {
			return "an array"
		}
		return string(v)
	case string:
		return "a string"
	case float64, json.Number:
		return "a number"
	case bool:
		return "a boolean"
	default:
		return "null"
	}
}

// ValidateSubmit checks every field and fills defaults. It does not touch the database.
func (s *Service) ValidateSubmit(req apitype.SubmitRequest) (jobq.SubmitParams, error) {
	p := jobq.SubmitParams{JobKey: req.JobKey, JobType: req.JobType, Priority: 0, MaxRetry: MaxRetryDefault}
	if err := checkText("job_key", req.JobKey, MaxJobKeyRunes); err != nil {
		return p, err
	}
	if err := checkText("job_type", req.JobType, MaxJobTypeRunes); err != nil {
		return p, err
	}
	if s.knownType != nil && !s.knownType(req.JobType) {
		return p, invalid("job_type", "%q is not a registered job type", req.JobType)
	}
	params, err := canonicalParams(req.Params)
	if err != nil {
		return p, err
	}
	p.Params = params
	if s.validateParams != nil {
		if field, rule := s.validateParams(req.JobType, json.RawMessage(params)); field != "" {
			return p, invalid(field, "%s", rule)
		}
	}
	if req.Priority != nil {
		if *req.Priority < MinPriority || *req.Priority > MaxPriority {
			return p, invalid("priority", "must be an integer in [%d, %d], got %d", MinPriority, MaxPriority, *req.Priority)
		}
		p.Priority = *req.Priority
	}
	if req.MaxRetry != nil {
		if *req.MaxRetry < 0 || *req.MaxRetry > MaxRetryLimit {
			return p, invalid("max_retry", "must be an integer in [0, %d], got %d", MaxRetryLimit, *req.MaxRetry)
		}
		p.MaxRetry = *req.MaxRetry
	}
	if req.TimeoutMs != nil {
		if *req.TimeoutMs < 0 || *req.TimeoutMs > MaxTimeoutMs {
			return p, invalid("timeout_ms", "must be an integer in [0, %d] (0 = no timeout), got %d", MaxTimeoutMs, *req.TimeoutMs)
		}
		p.TimeoutMs = *req.TimeoutMs
	}
	if req.RunAt != nil {
		t, err := time.Parse(time.RFC3339Nano, *req.RunAt)
		if err != nil {
			return p, invalid("run_at", "must be an RFC 3339 time with a UTC offset, e.g. 2026-01-02T15:04:05Z or 2026-01-02T15:04:05+09:00")
		}
		// The database keeps microseconds: round a finer run_at up (never
		// down, so the job cannot start before the instant asked for), and
		// hash and store that value, so re-submitting the run_at the API
		// returned is the same request.
		t = t.UTC()
		if tr := t.Truncate(time.Microsecond); !tr.Equal(t) {
			t = tr.Add(time.Microsecond)
		}
		if t.Year() < 1970 || t.Year() > 9999 {
			return p, invalid("run_at", "must be between years 1970 and 9999")
		}
		p.RunAt = &t
	}
	if err := validateConcurrency(req, &p); err != nil {
		return p, err
	}
	if req.RateKey != "" {
		if err := checkText("rate_key", req.RateKey, jobq.MaxRateKeyRunes); err != nil {
			return p, err
		}
		p.RateKey = req.RateKey
	}
	if req.UniqueForMs != nil {
		if *req.UniqueForMs < 1 || *req.UniqueForMs > MaxUniqueForMs {
			return p, invalid("unique_for_ms", "must be an integer in [1, %d] (how long the key stays unique, ms), got %d", int64(MaxUniqueForMs), *req.UniqueForMs)
		}
		p.UniqueForMs = *req.UniqueForMs
	}
	switch req.UniqueWhile {
	case "":
	case apitype.UniqueWhileActive:
		p.UniqueWhileActive = true
	default:
		return p, invalid("unique_while", "must be %q (the key stays unique while the job is not terminal), got %q", apitype.UniqueWhileActive, req.UniqueWhile)
	}
	if p.ConcurrencyKey != "" && p.Windowed() {
		return p, invalid("concurrency_key", "cannot be combined with unique_for_ms or unique_while (a keyed job's job_key is held for good)")
	}
	// The window is not part of the request hash: it says how long the key
	// names the job, not what the job is.
	p.RequestHash = requestHash(p)
	return p, nil
}

// validateConcurrency checks concurrency_key (1–128 characters, the rules of
// job_key) and concurrency_limit (1–1000; only with a key) into p.
func validateConcurrency(req apitype.SubmitRequest, p *jobq.SubmitParams) error {
	if req.ConcurrencyKey == "" {
		if req.ConcurrencyLimit != nil {
			return invalid("concurrency_limit", "is allowed only with a concurrency_key")
		}
		return nil
	}
	if err := checkText("concurrency_key", req.ConcurrencyKey, jobq.MaxConcurrencyKeyRunes); err != nil {
		return err
	}
	p.ConcurrencyKey, p.ConcurrencyLimit = req.ConcurrencyKey, 1
	if req.ConcurrencyLimit != nil {
		if *req.ConcurrencyLimit < 1 || *req.ConcurrencyLimit > jobq.MaxConcurrencyLimit {
			return invalid("concurrency_limit", "must be an integer in [1, %d], got %d", jobq.MaxConcurrencyLimit, *req.ConcurrencyLimit)
		}
		p.ConcurrencyLimit = *req.ConcurrencyLimit
	}
	return nil
}

func checkText(field, v string, max int) error {
	if v == "" {
		return invalid(field, "is required (1–%d characters)", max)
	}
	if !utf8.ValidString(v) {
		return invalid(field, "must be valid UTF-8")
	}
	if n := utf8.RuneCountInString(v); n > max {
		return invalid(field, "must be 1–%d characters, got %d", max, n)
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return invalid(field, "must not contain control characters (NUL, newline, …)")
		}
		if r == utf8.RuneError {
			return invalid(field, "must not contain U+FFFD (what invalid UTF-8 or an unpaired \\uD800–\\uDFFF escape decodes to)")
		}
	}
	if strings.TrimSpace(v) != v {
		return invalid(field, "must not start or end with whitespace")
	}
	return nil
}

// canonicalParams checks that params is a JSON object (absent or null means
// {}) of at most MaxParamsBytes once compacted, nested at most
// MaxParamsDepth deep, with no key repeated within one object, and returns
// it compacted. Strings are stored exactly as sent, escapes included, so
// params round-trip byte for byte apart from insignificant whitespace.
func canonicalParams(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "{}", nil
	}
	if !utf8.Valid(raw) {
		return "", invalid("params", "must be valid UTF-8")
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return "", invalid("params", "must be a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, trimmed); err != nil {
		return "", invalid("params", "must be a valid JSON object: %v", err)
	}
	if buf.Len() > MaxParamsBytes {
		return "", invalid("params", "must be at most %d bytes once compacted, got %d", MaxParamsBytes, buf.Len())
	}
	if err := checkParamsShape(buf.Bytes()); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// checkParamsShape walks valid JSON and rejects nesting deeper than
// MaxParamsDepth and keys repeated within one object (which would make two
// different params hash alike and decode ambiguously).
func checkParamsShape(compact []byte) error {
	type frame struct {
		object bool
		keys   map[string]struct{}
		isKey  bool // the next string token is a key
	}
	var stack []*frame
	dec := json.NewDecoder(bytes.NewReader(compact))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return invalid("params", "must be a valid JSON object: %v", err)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				if len(stack) >= MaxParamsDepth {
					return invalid("params", "must nest objects and arrays at most %d deep", MaxParamsDepth)
				}
				if top != nil && top.object {
					top.isKey = true
				}
				stack = append(stack, &frame{object: d == '{', keys: map[string]struct{}{}, isKey: d == '{'})
			default:
				stack = stack[:len(stack)-1]
			}
			continue
		}
		if top != nil && top.object {
			if top.isKey {
				k := tok.(string)
				if _, dup := top.keys[k]; dup {
					return invalid("params", "must not repeat a key within one object, got %q twice", k)
				}
				top.keys[k] = struct{}{}
				top.isKey = false
			} else {
				top.isKey = true
			}
		}
	}
}

// requestHash identifies a submit's content so a re-submit of the same
// job_key can be told apart: same hash → same job (200), else 409. Params
// are compared canonically (key order and whitespace do not matter).
func requestHash(p jobq.SubmitParams) string {
	var params any
	dec := json.NewDecoder(strings.NewReader(markLoneSurrogates(p.Params)))
	dec.UseNumber()
	_ = dec.Decode(&params)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	runAt := ""
	if p.RunAt != nil {
		runAt = p.RunAt.Format(time.RFC3339Nano)
	}
	fields := []any{p.JobType, params, p.Priority, p.MaxRetry, p.TimeoutMs, runAt}
	if p.ConcurrencyKey != "" {
		// Only keyed submits hash the key: the hashes of every other
		// submit stay what they were.
		fields = append(fields, p.ConcurrencyKey, p.ConcurrencyLimit)
	}
	if p.RateKey != "" {
		fields = append(fields, "rate_key", p.RateKey)
	}
	_ = enc.Encode(fields)
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:])
}

// markLoneSurrogates rewrites each unpaired surrogate escape (\ud800 …
// \udfff not forming a valid pair) in JSON text as the marked text
// "\u0000lone:d800\u0000", for hashing only. Go's decoder turns every
// unpaired surrogate into U+FFFD, which would make {"s":"\ud800"} and
// {"s":"\udfff"} look like the same request; stored params keep the
// client's bytes.
func markLoneSurrogates(raw string) string {
	if !strings.Contains(raw, `\u`) {
		return raw
	}
	hexAt := func(i int) (int64, bool) {
		if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseInt(raw[i+2:i+6], 16, 32)
		return v, err == nil
	}
	var b strings.Builder
	for i := 0; i < len(raw); {
		if raw[i] != '\\' || i+1 >= len(raw) {
			b.WriteByte(raw[i])
			i++
			continue
		}
		v, ok := hexAt(i)
		if !ok {
			b.WriteString(raw[i : i+2]) // \", \\, \n, …: two bytes, never the start of a \u
			i += 2
			continue
		}
		switch {
		case v >= 0xD800 && v <= 0xDBFF:
			if w, ok := hexAt(i + 6); ok && w >= 0xDC00 && w <= 0xDFFF {
				b.WriteString(raw[i : i+12]) // a valid pair
				i += 12
				continue
			}
			fallthrough
		case v >= 0xDC00 && v <= 0xDFFF:
			fmt.Fprintf(&b, `\u0000lone:%04x\u0000`, v)
		default:
			b.WriteString(raw[i : i+6])
		}
		i += 6
	}
	return b.String()
}

// Submit validates req and creates the job. created is false when job_key
// already named a job with the same request (that job is returned);
// ErrKeyConflict when it named a different request.
func (s *Service) Submit(ctx context.Context, req apitype.SubmitRequest) (job jobq.Job, created bool, err error) {
	p, err := s.ValidateSubmit(req)
	if err != nil {
		return jobq.Job{}, false, err
	}
	if err := s.checkSubmitScope(ctx, p.JobType); err != nil {
		return jobq.Job{}, false, err
	}
	job, created, err = retryV2(ctx, s.retry, "submit", func() (jobq.Job, bool, error) { return s.store.JobSubmit(ctx, p) })
	if err != nil {
		return job, false, err
	}
	switch {
	case !created:
	case job.Status == jobq.StateScheduled:
		if s.wakeAt != nil {
			s.wakeAt(job.RunAt, job.CreateTime)
		}
	case s.wake != nil:
		s.wake()
	}
	return job, created, nil
}

// BatchItem is one job of a batch submit as its transport decoded it: Req,
// or Err (a *ValidationError naming the field) when the job could not be
// decoded.
type BatchItem struct {
	Req apitype.SubmitRequest
	Err error
}

// SubmitMany validates each job of a batch and creates the valid ones with
// one multi-row insert (store.JobSubmitMany) and one commit. Each job gets
// the answer a single Submit would have given it, at its index: created,
// existing (same job_key and request), conflict (same job_key, different
// request; nothing written) or invalid (nothing written; the error names
// the field). A job_key repeated within the batch is submitted once: a
// later copy with the same request is existing, with another request a
// conflict. The whole call fails (nothing is reported as written) only
// when items is empty or longer than apitype.MaxBatchJobs
// (*ValidationError on "jobs") or the database is unavailable; the insert
// is atomic, so a retry after such an error is safe.
func (s *Service) SubmitMany(ctx context.Context, items []BatchItem) (apitype.SubmitBatchResponse, error) {
	var resp apitype.SubmitBatchResponse
	if len(items) == 0 || len(items) > apitype.MaxBatchJobs {
		return resp, invalid("jobs", "must hold 1–%d jobs, got %d", apitype.MaxBatchJobs, len(items))
	}
	if CallerFrom(ctx).Worker != nil {
		// A worker token submits only within its scope: one job outside it
		// refuses the whole batch, and nothing is written.
		for _, it := range items {
			if it.Err == nil {
				if err := s.checkSubmitScope(ctx, it.Req.JobType); err != nil {
					return resp, err
				}
			}
		}
	}
	resp.Results = make([]apitype.SubmitBatchResult, len(items))
	var ps []jobq.SubmitParams
	var at []int                           // at[k]: the item index of ps[k]
	first := map[string]int{}              // job_key → k
	repeats := map[int]jobq.SubmitParams{} // item index → params of a repeated job_key
	for i, it := range items {
		err := it.Err
		var p jobq.SubmitParams
		if err == nil {
			p, err = s.ValidateSubmit(it.Req)
		}
		if err != nil {
			resp.Results[i] = invalidResult(err)
			continue
		}
		if _, ok := first[p.JobKey]; ok {
			repeats[i] = p
			continue
		}
		first[p.JobKey] = len(ps)
		ps = append(ps, p)
		at = append(at, i)
	}
	var outs []jobq.SubmitOutcome
	if len(ps) > 0 {
		var err error
		outs, err = retryV(ctx, s.retry, "submit batch", func() ([]jobq.SubmitOutcome, error) { return s.store.JobSubmitMany(ctx, ps) })
		if err != nil {
			return apitype.SubmitBatchResponse{}, err
		}
	}
	created := false
	for k, o := range outs {
		resp.Results[at[k]] = outcomeResult(o)
		created = created || o.Created
	}
	for i, p := range repeats {
		k := first[p.JobKey]
		o := outs[k]
		switch {
		case !o.Conflict && p.RequestHash == ps[k].RequestHash:
			o.Created = false
		case !o.Conflict:
			o.Conflict = true
		default:
			// The stored job differs from the first copy; this copy may
			// match it: ask as a single submit would.
			job, _, err := s.store.JobSubmit(ctx, p)
			switch {
			case errors.Is(err, jobq.ErrKeyConflict):
				o = jobq.SubmitOutcome{ID: job.ID, Conflict: true}
			case err != nil:
				return apitype.SubmitBatchResponse{}, err
			default:
				o = jobq.SubmitOutcome{ID: job.ID}
			}
		}
		resp.Results[i] = outcomeResult(o)
	}
	resp.Count()
	if created && s.wake != nil {
		s.wake()
	}
	if created && s.wakeAt != nil && slices.ContainsFunc(ps, func(p jobq.SubmitParams) bool { return p.RunAt != nil }) {
		// Some jobs may be SCHEDULED: the promoter reads the earliest run_at
		// at once and sleeps until it, rather than until its next interval.
		now := time.Now()
		s.wakeAt(now, now)
	}
	return resp, nil
}

func outcomeResult(o jobq.SubmitOutcome) apitype.SubmitBatchResult {
	switch {
	case o.Conflict:
		return apitype.SubmitBatchResult{Status: apitype.BatchConflict, ID: o.ID, Error: &apitype.ErrorDetail{Code: "conflict", Field: "job_key",
			Message: fmt.Sprintf("job_key: already used by job %d with a different request", o.ID)}}
	case o.Created:
		return apitype.SubmitBatchResult{Status: apitype.BatchCreated, ID: o.ID}
	default:
		return apitype.SubmitBatchResult{Status: apitype.BatchExisting, ID: o.ID}
	}
}

// tooMany is the error for an envelope's array (field) longer than max: it
// counts the rest of the array (the body is bounded by the route's body
// limit) so the caller learns how many it sent.
func tooMany(body []byte, dec *json.Decoder, field string, max, n int) error {
	for dec.More() {
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return invalid(field, "must hold at most %d %s, got more than %d (then %s)", max, field, n, jsonRule(body, err))
		}
		n++
	}
	return invalid(field, "must hold at most %d %s, got %d", max, field, n)
}

func invalidResult(err error) apitype.SubmitBatchResult {
	d := &apitype.ErrorDetail{Code: "invalid_argument", Message: err.Error()}
	var ve *ValidationError
	if errors.As(err, &ve) {
		d.Field = ve.Field
	}
	return apitype.SubmitBatchResult{Status: apitype.BatchInvalid, Error: d}
}

// DecodeSubmitBatch parses a POST /v1/jobs:batch body: a JSON object with
// exactly one field, "jobs", an array of 1–apitype.MaxBatchJobs submit
// bodies. An envelope error fails the whole request (*ValidationError on
// "body" or "jobs"); a job that does not decode is an invalid item carrying
// DecodeSubmit's error (results are positional, so it names the field alone).
func DecodeSubmitBatch(body []byte) ([]BatchItem, error) {
	raws, err := decodeEnvelope(body, "jobs", "submit objects", apitype.MaxBatchJobs)
	if err != nil {
		return nil, err
	}
	items := make([]BatchItem, len(raws))
	for i, raw := range raws {
		items[i].Req, items[i].Err = DecodeSubmit(raw)
	}
	return items, nil
}

// decodeEnvelope parses a batch body: a JSON object with exactly one
// field, an array of 1–max JSON values (what names them in errors), and
// returns the values undecoded. Errors are *ValidationError on "body" or
// field.
func decodeEnvelope(body []byte, field, what string, max int) ([]json.RawMessage, error) {
	shape := fmt.Sprintf(`must be a JSON object {"%s": [ … ]}`, field)
	if !utf8.Valid(body) {
		return nil, invalid("body", "must be valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err == io.EOF {
		return nil, invalid("body", "is empty; %s", shape)
	} else if err != nil {
		return nil, invalid("body", "%s; %s", jsonRule(body, err), shape)
	} else if tok != json.Delim('{') {
		return nil, invalid("body", "%s, got %s", shape, tokenKind(tok))
	}
	var raws []json.RawMessage
	seen := false
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, invalid("body", "%s", jsonRule(body, err))
		}
		if key, _ := kt.(string); key != field {
			return nil, invalid(fieldName(key), `unknown field (the only field is "%s")`, field)
		}
		if seen {
			return nil, invalid(field, "is given more than once")
		}
		seen = true
		tok, err := dec.Token()
		if err != nil || tok != json.Delim('[') {
			return nil, invalid(field, "must be a JSON array of %s", what)
		}
		for dec.More() {
			if len(raws) == max {
				return nil, tooMany(body, dec, field, max, len(raws))
			}
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return nil, invalid(field, "must be a JSON array of %s; %s", what, jsonRule(body, err))
			}
			raws = append(raws, raw)
		}
		if _, err := dec.Token(); err != nil { // ']'
			return nil, invalid(field, "must be a JSON array of %s; %s", what, jsonRule(body, err))
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, invalid("body", "%s", jsonRule(body, err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, invalid("body", "must hold exactly one JSON object and nothing after it")
	}
	if !seen || len(raws) == 0 {
		return nil, invalid(field, "is required: 1–%d %s", max, what)
	}
	return raws, nil
}

// ParseID parses a job id path parameter.
func ParseID(v string) (uint64, error) {
	id, err := strconv.ParseUint(v, 10, 64)
	if err != nil || id == 0 {
		return 0, invalid("id", "must be a positive integer, got %q", v)
	}
	return id, nil
}

// Get returns one job.
func (s *Service) Get(ctx context.Context, id uint64) (jobq.Job, error) {
	j, err := retryV(ctx, s.retry, "get", func() (jobq.Job, error) { return s.store.JobGet(ctx, id) })
	if err == nil {
		if ferr := s.checkReadScope(ctx, j.JobType); ferr != nil {
			return jobq.Job{}, ferr
		}
	}
	return j, err
}

// ListRequest filters GET /v1/jobs. Cursor is the next_cursor of the
// previous page ("" for the first).
type ListRequest struct {
	Status    string
	JobType   string
	KeyPrefix string // jobs whose job_key starts with it; "" for any
	Limit     string
	Cursor    string
}

// List validates the filters and returns one page of jobs, newest first,
// and the cursor of the next page ("" on the last page).
func (s *Service) List(ctx context.Context, req ListRequest) (jobs []jobq.Job, nextCursor string, err error) {
	p := jobq.ListParams{Status: jobq.JobState(req.Status), JobType: req.JobType, KeyPrefix: req.KeyPrefix, Limit: ListLimitDefault}
	if p.Status != "" {
		if !p.Status.Valid() {
			return nil, "", invalid("status", "must be one of %s, got %q", joinStates(Statuses), p.Status)
		}
	}
	if p.JobType != "" {
		if err := checkText("job_type", p.JobType, MaxJobTypeRunes); err != nil {
			return nil, "", err
		}
	}
	if p.KeyPrefix != "" {
		if err := checkText("key_prefix", p.KeyPrefix, MaxJobKeyRunes); err != nil {
			return nil, "", err
		}
	}
	if req.Limit != "" {
		n, err := strconv.Atoi(req.Limit)
		if err != nil || n < 1 || n > MaxListLimit {
			return nil, "", invalid("limit", "must be an integer in [1, %d], got %q", MaxListLimit, req.Limit)
		}
		p.Limit = n
	}
	if req.Cursor != "" {
		c, err := strconv.ParseUint(req.Cursor, 10, 64)
		if err != nil || c == 0 {
			return nil, "", invalid("cursor", "must be a next_cursor value returned by a previous page, got %q", req.Cursor)
		}
		p.BeforeID = c
	}
	var next uint64
	jobs, next, err = retryV2(ctx, s.retry, "list", func() ([]jobq.Job, uint64, error) { return s.store.JobList(ctx, p) })
	if err != nil {
		return nil, "", err
	}
	if next != 0 {
		nextCursor = strconv.FormatUint(next, 10)
	}
	return jobs, nextCursor, nil
}

// Cancel cancels a WAITING or SCHEDULED job at once, or requests cancellation of a
// RUNNING one (CANCELED when its handler returns, whatever it returns). A
// job in another status is a *StateError (OpCancel).
func (s *Service) Cancel(ctx context.Context, id uint64) (jobq.Job, error) {
	j, err := retryV(ctx, s.retry, "cancel", func() (jobq.Job, error) { return s.store.JobCancel(ctx, id) })
	return j, stateError(OpCancel, id, j, err)
}

// Retry re-queues a FAILED or CANCELED job with a fresh retry budget. A job
// in another status is a *StateError (OpRetry).
func (s *Service) Retry(ctx context.Context, id uint64) (jobq.Job, error) {
	j, err := retryV(ctx, s.retry, "retry", func() (jobq.Job, error) { return s.store.JobRetry(ctx, id) })
	err = stateError(OpRetry, id, j, err)
	if err == nil && s.wake != nil {
		s.wake()
	}
	return j, err
}

// Executions lists a job's attempts.
func (s *Service) Executions(ctx context.Context, id uint64) ([]jobq.Execution, error) {
	if CallerFrom(ctx).Worker != nil {
		if _, err := s.Get(ctx, id); err != nil {
			return nil, err
		}
	}
	ex, err := retryV(ctx, s.retry, "executions", func() ([]jobq.Execution, error) { return s.store.JobExecutions(ctx, id) })
	if ex == nil && err == nil {
		ex = []jobq.Execution{}
	}
	return ex, err
}

func joinStates(states []jobq.JobState) string {
	out := make([]string, len(states))
	for i, st := range states {
		out[i] = string(st)
	}
	return strings.Join(out, ", ")
}
