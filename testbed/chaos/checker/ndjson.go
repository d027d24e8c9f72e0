package checker

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"
)

// FormatVersion names the NDJSON history format in its meta line.
const FormatVersion = "jobq-history/1"

// Event types of the NDJSON history format (docs/chaos.md, "Checking
// another scheduler's history"). One JSON object per line; every line has
// "type" and "t" (RFC 3339, UTC on one clock — the database's for jobq).
const (
	// EventMeta is the first line: format, lease, rescue interval, the
	// run's start (t) and end ("end": when the final state was read).
	EventMeta = "meta"
	// EventSubmit is a client's submit request (t = intended send time).
	EventSubmit = "submit"
	// EventAck is the scheduler's acknowledgement of a submit: the job id
	// it answered (t = when the answer arrived).
	EventAck = "ack"
	// EventClaim is an attempt's claim: the lease granted to owner, which
	// is also when the attempt's execution starts (t). due_at, when given,
	// is the time the job was due at the claim.
	EventClaim = "claim"
	// EventFinish closes an attempt (t): its outcome is SUCCESS, FAILED or
	// CANCELED for a completion the scheduler accepted, STALE for one it
	// refused (the attempt had lost its lease), LEASE_EXPIRED for a rescue
	// and RELEASED for a return at shutdown.
	EventFinish = "finish"
	// EventEffect is a side effect of an attempt (kind tx: committed with
	// the completion — exactly once; non_tx: outside it — at least once;
	// end: the attempt's work ended).
	EventEffect = "effect"
	// EventJob is a job's final state when the history was read.
	EventJob = "job"
	// EventFault is an injected fault, from t to "end".
	EventFault = "fault"
	// EventSlowRenewal and EventStall are the replicas' own evidence of a
	// loaded machine (see History.SlowRenewals and History.Stalls).
	EventSlowRenewal = "slow_renewal"
	EventStall       = "stall"
	// EventStop is when the harness began stopping every replica at the
	// end of the run: releases at shutdown from then on are explained.
	EventStop = "stop"
	// EventCompletion is a completion a remote worker (owner) sent for an
	// attempt (t: when it arrived) and the scheduler's answer: http_status
	// and result ("applied": accepted; "stale", "conflict" …: refused),
	// delivered false when the answer never reached the worker, duplicate
	// for the first copy of a completion sent twice.
	EventCompletion = "completion"
	// EventRenewal is a remote worker's renewed lease (t: the lease_until
	// the scheduler gave it).
	EventRenewal = "renewal"
	// EventEdge is a workflow dependency (History.Edges): child waits for
	// parent, on_parent_failure "cancel" (the default) or "run"; t is when
	// the history was read, as for job lines. The workflow checks judge a
	// history by its edges: one without edge lines has none to judge.
	EventEdge = "edge"
	// EventSchedule is a periodic schedule (History.Schedules): name, cron,
	// overlap; t is its first instant and "end" the end of the window whose
	// every instant must have a ledger row (fire_missing).
	EventSchedule = "schedule"
	// EventFire is one row of a schedule's fire ledger: t is the instant,
	// name the schedule, fate fired, late or skipped, reason (skipped)
	// misfire or overlap, job_id the fired job, covers the instants a
	// summary row stands for, record_time when the row was written.
	EventFire = "fire"
	// EventRateLimit is a job type's rate limit during the run
	// (History.RateLimits): at most "starts" claims of "job_type" (of each
	// "rate_key" of its jobs when "per_key") in any
	// window of "period_ms"; t is when the history was read.
	EventRateLimit = "rate_limit"
)

// Event is one line of an NDJSON history. Which fields a type uses is
// documented on the Event* constants and in docs/chaos.md.
type Event struct {
	Type string    `json:"type"`
	T    time.Time `json:"t"`

	// meta
	Format           string `json:"format,omitempty"`
	LeaseMS          int64  `json:"lease_ms,omitempty"`
	RescueIntervalMS int64  `json:"rescue_interval_ms,omitempty"`

	JobID   uint64 `json:"job_id,omitempty"`
	Key     string `json:"key,omitempty"`
	JobType string `json:"job_type,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	Owner   string `json:"owner,omitempty"`
	Replica string `json:"replica,omitempty"`
	Tries   int    `json:"tries,omitempty"`
	Outcome string `json:"outcome,omitempty"`
	Kind    string `json:"kind,omitempty"`
	Target  string `json:"target,omitempty"`
	Detail  string `json:"detail,omitempty"`
	Error   string `json:"error,omitempty"`

	// job
	Status     string     `json:"status,omitempty"`
	RetryTimes int        `json:"retry_times,omitempty"`
	MaxRetry   *int       `json:"max_retry,omitempty"`
	LeaseUntil *time.Time `json:"lease_until,omitempty"`
	CreateTime *time.Time `json:"create_time,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// ConcurrencyKey and ConcurrencyLimit: the job's concurrency key and its
	// key's limit (CheckKeyOverlap).
	ConcurrencyKey   string `json:"concurrency_key,omitempty"`
	ConcurrencyLimit int    `json:"concurrency_limit,omitempty"`
	// RateKey: the job's rate key (CheckRateLimitExceeded, per-key limits).
	RateKey string `json:"rate_key,omitempty"`

	// completion
	HTTPStatus int    `json:"http_status,omitempty"`
	Result     string `json:"result,omitempty"`
	Delivered  *bool  `json:"delivered,omitempty"`
	Duplicate  bool   `json:"duplicate,omitempty"`

	// edge
	Parent          uint64 `json:"parent,omitempty"`
	Child           uint64 `json:"child,omitempty"`
	OnParentFailure string `json:"on_parent_failure,omitempty"`

	// schedule, fire
	Name       string     `json:"name,omitempty"`
	Cron       string     `json:"cron,omitempty"`
	Overlap    string     `json:"overlap,omitempty"`
	Fate       string     `json:"fate,omitempty"`
	Reason     string     `json:"reason,omitempty"`
	Covers     int64      `json:"covers,omitempty"`
	RecordTime *time.Time `json:"record_time,omitempty"`
	// rate_limit
	Starts   int     `json:"starts,omitempty"`
	PeriodMS float64 `json:"period_ms,omitempty"`
	PerKey   bool    `json:"per_key,omitempty"`

	DueAt          *time.Time `json:"due_at,omitempty"`
	End            *time.Time `json:"end,omitempty"`
	RunningAtStart int        `json:"running_at_start,omitempty"`
}

// Events turns h into the NDJSON history's events: the meta line first,
// then every event in time order (ties keep submit, ack, claim, effect,
// finish order), final job states and workflow edges last.
func Events(h History) []Event {
	end := h.End
	ev := []Event{}
	for _, s := range h.Submits {
		ev = append(ev, Event{Type: EventSubmit, T: s.SentAt, Key: s.Key, JobType: s.Type, Replica: s.Replica, Tries: s.Tries, Error: s.Err})
		if s.Acked() {
			ev = append(ev, Event{Type: EventAck, T: s.AckedAt, Key: s.Key, JobID: s.JobID, Replica: s.Replica})
		}
	}
	for _, e := range h.Executions {
		ev = append(ev, Event{Type: EventClaim, T: e.StartedAt, JobID: e.JobID, Attempt: e.Attempt, Owner: e.Owner, DueAt: e.DueAt})
		if e.FinishedAt != nil {
			// An attempt recorded as finished before it started — a job row
			// completed by another attempt's unfenced write whose NOW(6) was
			// taken while it waited for the claim's lock (only a sabotaged
			// build writes one) — is exported finishing at its start, so the
			// history stays readable and the checks judge the run.
			t := *e.FinishedAt
			if t.Before(e.StartedAt) {
				t = e.StartedAt
			}
			ev = append(ev, Event{Type: EventFinish, T: t, JobID: e.JobID, Attempt: e.Attempt, Owner: e.Owner, Outcome: e.Outcome, Error: e.Error})
		}
	}
	for _, e := range h.Effects {
		ev = append(ev, Event{Type: EventEffect, T: e.CreatedAt, JobID: e.JobID, Attempt: e.Attempt, Owner: e.Owner, Kind: e.Kind})
	}
	for _, f := range h.Faults {
		fe := f.End
		ev = append(ev, Event{Type: EventFault, T: f.Start, End: &fe, Kind: f.Kind, Target: f.Target, Owner: f.Owner,
			RunningAtStart: f.RunningAtStart, Detail: f.Detail, Error: f.Err})
	}
	for _, s := range h.SlowRenewals {
		ev = append(ev, Event{Type: EventSlowRenewal, T: s.At, Owner: s.Owner})
	}
	for _, s := range h.Stalls {
		to := s.To
		ev = append(ev, Event{Type: EventStall, T: s.From, End: &to, Owner: s.Owner})
	}
	if !h.Stopped.IsZero() {
		ev = append(ev, Event{Type: EventStop, T: h.Stopped})
	}
	for _, a := range h.Acks {
		d := a.Delivered
		ev = append(ev, Event{Type: EventCompletion, T: a.SentAt, Owner: a.Worker, Replica: a.Replica, JobID: a.JobID, Attempt: a.Attempt,
			Outcome: a.Outcome, HTTPStatus: a.Status, Result: a.Result, Delivered: &d, Duplicate: a.Duplicate})
	}
	for _, r := range h.Renewals {
		ev = append(ev, Event{Type: EventRenewal, T: r.LeaseUntil, Owner: r.Worker, JobID: r.JobID, Attempt: r.Attempt})
	}
	slices.SortStableFunc(ev, func(a, b Event) int { return a.T.Compare(b.T) })
	for _, j := range h.Jobs {
		mr, ct := j.MaxRetry, j.CreateTime
		ev = append(ev, Event{Type: EventJob, T: end, JobID: j.ID, Key: j.Key, JobType: j.Type, Status: j.Status, Attempt: j.Attempt,
			RetryTimes: j.RetryTimes, MaxRetry: &mr, Owner: j.Owner, LeaseUntil: j.LeaseUntil, CreateTime: &ct, FinishedAt: j.FinishedAt, Error: j.LastError,
			ConcurrencyKey: j.ConcurrencyKey, ConcurrencyLimit: j.ConcurrencyLimit, RateKey: j.RateKey})
	}
	for _, e := range h.Edges {
		ev = append(ev, Event{Type: EventEdge, T: end, Parent: e.Parent, Child: e.Child, OnParentFailure: e.OnParentFailure})
	}
	for _, sc := range h.Schedules {
		to := sc.To
		ev = append(ev, Event{Type: EventSchedule, T: sc.From, End: &to, Name: sc.Name, Cron: sc.Cron, Overlap: sc.Overlap})
		for _, f := range sc.Fires {
			rt := f.RecordTime
			ev = append(ev, Event{Type: EventFire, T: f.Instant, Name: sc.Name, Fate: f.Fate, Reason: f.Reason, JobID: f.JobID,
				Covers: f.Covers, RecordTime: &rt})
		}
	}
	for _, l := range h.RateLimits {
		ev = append(ev, Event{Type: EventRateLimit, T: end, JobType: l.JobType, Starts: l.Starts, PeriodMS: float64(l.Period) / float64(time.Millisecond), PerKey: l.PerKey})
	}
	meta := Event{Type: EventMeta, T: h.Start, End: &end, Format: FormatVersion, LeaseMS: h.Lease.Milliseconds(), RescueIntervalMS: h.RescueInterval.Milliseconds()}
	return append([]Event{meta}, ev...)
}

// WriteNDJSON writes h as an NDJSON history (see Events).
func WriteNDJSON(w io.Writer, h History) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, e := range Events(h) {
		if err := enc.Encode(e); err != nil {
			return fmt.Errorf("write history: %w", err)
		}
	}
	return bw.Flush()
}

// WriteNDJSONFile writes h to path as an NDJSON history.
func WriteNDJSONFile(path string, h History) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := WriteNDJSON(f, h); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadNDJSONFile reads an NDJSON history from path.
func ReadNDJSONFile(path string) (History, error) {
	f, err := os.Open(path)
	if err != nil {
		return History{}, err
	}
	defer f.Close()
	h, err := ReadNDJSON(f)
	if err != nil {
		return History{}, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}

// ErrHistory is wrapped by every error ReadNDJSON returns for a line that
// breaks the format; the message names the line and the rule.
var ErrHistory = errors.New("invalid history")

// ReadNDJSON reads an NDJSON history into the History that Check judges.
// Lines may come in any order except that an ack follows its submit and a
// finish its claim; blank lines are skipped. A history without a meta line
// uses Lease 30s, RescueInterval 1s, Start = the earliest and End = the
// latest time seen. A history without job lines has its final job states
// derived (DeriveJobs).
func ReadNDJSON(r io.Reader) (History, error) {
	var h History
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	execIdx := map[[2]uint64]int{}
	unacked := map[string][]int{} // key → indexes of submits without an ack
	var meta bool
	var first, last time.Time
	fires := map[string][]Fire{}
	seen := func(t time.Time) {
		if t.IsZero() {
			return
		}
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(bytes.TrimSpace(b)) == 0 || b[0] == '#' {
			continue
		}
		var e Event
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return History{}, fmt.Errorf("%w: line %d: %v", ErrHistory, line, err)
		}
		bad := func(rule string) error {
			return fmt.Errorf("%w: line %d (%s): %s", ErrHistory, line, e.Type, rule)
		}
		if e.T.IsZero() {
			return History{}, bad(`"t" is required (RFC 3339 time)`)
		}
		e.T = e.T.UTC()
		if e.Type != EventMeta && e.Type != EventJob && e.Type != EventEdge && e.Type != EventSchedule && e.Type != EventFire && e.Type != EventRateLimit {
			seen(e.T)
		}
		switch e.Type {
		case EventMeta:
			if e.Format != FormatVersion {
				return History{}, bad(fmt.Sprintf("format %q, want %q", e.Format, FormatVersion))
			}
			meta = true
			h.Start = e.T
			if e.End != nil {
				h.End = e.End.UTC()
			}
			h.Lease = time.Duration(e.LeaseMS) * time.Millisecond
			h.RescueInterval = time.Duration(e.RescueIntervalMS) * time.Millisecond
		case EventSubmit:
			if e.Key == "" {
				return History{}, bad(`"key" is required`)
			}
			h.Submits = append(h.Submits, Submit{Key: e.Key, Type: e.JobType, Replica: e.Replica, SentAt: e.T, Tries: e.Tries, Err: e.Error})
			unacked[e.Key] = append(unacked[e.Key], len(h.Submits)-1)
		case EventAck:
			q := unacked[e.Key]
			if e.JobID == 0 || len(q) == 0 {
				return History{}, bad(`needs "job_id" > 0 and an earlier submit with the same "key"`)
			}
			s := &h.Submits[q[0]]
			unacked[e.Key] = q[1:]
			s.JobID, s.AckedAt = e.JobID, e.T
			if e.Replica != "" {
				s.Replica = e.Replica
			}
		case EventClaim:
			if e.JobID == 0 || e.Attempt <= 0 {
				return History{}, bad(`needs "job_id" > 0 and "attempt" ≥ 1`)
			}
			k := [2]uint64{e.JobID, uint64(e.Attempt)}
			if _, dup := execIdx[k]; dup {
				return History{}, bad(fmt.Sprintf("job %d attempt %d claimed twice; number a job's attempts 1, 2, 3 … in claim order", e.JobID, e.Attempt))
			}
			execIdx[k] = len(h.Executions)
			h.Executions = append(h.Executions, Execution{JobID: e.JobID, Attempt: e.Attempt, Owner: e.Owner, StartedAt: e.T, DueAt: utcp(e.DueAt)})
		case EventFinish:
			i, ok := execIdx[[2]uint64{e.JobID, uint64(e.Attempt)}]
			if !ok {
				return History{}, bad(fmt.Sprintf("no earlier claim of job %d attempt %d", e.JobID, e.Attempt))
			}
			x := &h.Executions[i]
			if x.FinishedAt != nil {
				return History{}, bad(fmt.Sprintf("job %d attempt %d finished twice", e.JobID, e.Attempt))
			}
			switch e.Outcome {
			case OutcomeSuccess, OutcomeFailed, OutcomeCanceled, OutcomeLeaseExpired, OutcomeReleased, OutcomeStale:
			default:
				return History{}, bad(fmt.Sprintf("outcome %q: want SUCCESS, FAILED, CANCELED, STALE, LEASE_EXPIRED or RELEASED", e.Outcome))
			}
			t := e.T
			x.FinishedAt, x.Outcome, x.Error = &t, e.Outcome, e.Error
		case EventEffect:
			if e.JobID == 0 || (e.Kind != EffectTx && e.Kind != EffectNonTx && e.Kind != EffectEnd) {
				return History{}, bad(`needs "job_id" > 0 and "kind" tx, non_tx or end`)
			}
			h.Effects = append(h.Effects, Effect{JobID: e.JobID, Attempt: e.Attempt, Kind: e.Kind, Owner: e.Owner, CreatedAt: e.T})
		case EventJob:
			if e.JobID == 0 || e.Status == "" {
				return History{}, bad(`needs "job_id" > 0 and "status"`)
			}
			j := Job{ID: e.JobID, Key: e.Key, Type: e.JobType, Status: e.Status, Attempt: e.Attempt, RetryTimes: e.RetryTimes,
				Owner: e.Owner, LeaseUntil: utcp(e.LeaseUntil), FinishedAt: utcp(e.FinishedAt), LastError: e.Error,
				ConcurrencyKey: e.ConcurrencyKey, ConcurrencyLimit: e.ConcurrencyLimit, RateKey: e.RateKey}
			if e.MaxRetry != nil {
				j.MaxRetry = *e.MaxRetry
			}
			if e.CreateTime != nil {
				j.CreateTime = e.CreateTime.UTC()
			}
			h.Jobs = append(h.Jobs, j)
		case EventFault:
			if e.Kind == "" || e.End == nil {
				return History{}, bad(`needs "kind" and "end"`)
			}
			h.Faults = append(h.Faults, Fault{Kind: e.Kind, Target: e.Target, Owner: e.Owner, Start: e.T, End: e.End.UTC(),
				RunningAtStart: e.RunningAtStart, Detail: e.Detail, Err: e.Error})
			seen(e.End.UTC())
		case EventSlowRenewal:
			h.SlowRenewals = append(h.SlowRenewals, SlowRenewal{Owner: e.Owner, At: e.T})
		case EventStall:
			if e.End == nil {
				return History{}, bad(`needs "end"`)
			}
			h.Stalls = append(h.Stalls, Stall{Owner: e.Owner, From: e.T, To: e.End.UTC()})
		case EventStop:
			h.Stopped = e.T
		case EventCompletion:
			if e.JobID == 0 || e.Attempt <= 0 || e.Outcome == "" || e.Result == "" || e.Delivered == nil {
				return History{}, bad(`needs "job_id" > 0, "attempt" ≥ 1, "outcome", "result" and "delivered"`)
			}
			h.Acks = append(h.Acks, Ack{Worker: e.Owner, Replica: e.Replica, JobID: e.JobID, Attempt: e.Attempt, Outcome: e.Outcome,
				SentAt: e.T, Status: e.HTTPStatus, Result: e.Result, Delivered: *e.Delivered, Duplicate: e.Duplicate})
		case EventRenewal:
			if e.JobID == 0 || e.Attempt <= 0 {
				return History{}, bad(`needs "job_id" > 0 and "attempt" ≥ 1`)
			}
			h.Renewals = append(h.Renewals, Renewal{Worker: e.Owner, JobID: e.JobID, Attempt: e.Attempt, LeaseUntil: e.T})
		case EventEdge:
			if e.Parent == 0 || e.Child == 0 || e.Parent == e.Child {
				return History{}, bad(`needs "parent" > 0 and "child" > 0, two different jobs`)
			}
			switch e.OnParentFailure {
			case "":
				e.OnParentFailure = "cancel"
			case "cancel", "run":
			default:
				return History{}, bad(fmt.Sprintf(`on_parent_failure %q: want "cancel" or "run"`, e.OnParentFailure))
			}
			h.Edges = append(h.Edges, Edge{Parent: e.Parent, Child: e.Child, OnParentFailure: e.OnParentFailure})
		case EventSchedule:
			if e.Name == "" || e.Cron == "" || e.End == nil {
				return History{}, bad(`needs "name", "cron" and "end"`)
			}
			h.Schedules = append(h.Schedules, Schedule{Name: e.Name, Cron: e.Cron, Overlap: e.Overlap, From: e.T, To: e.End.UTC()})
		case EventFire:
			if e.Name == "" || (e.Fate != FateFired && e.Fate != FateLate && e.Fate != FateSkipped) {
				return History{}, bad(`needs "name" and "fate" fired, late or skipped`)
			}
			f := Fire{Instant: e.T, Fate: e.Fate, Reason: e.Reason, JobID: e.JobID, Covers: e.Covers}
			if e.RecordTime != nil {
				f.RecordTime = e.RecordTime.UTC()
			}
			fires[e.Name] = append(fires[e.Name], f)
		case EventRateLimit:
			if e.JobType == "" || e.Starts <= 0 || e.PeriodMS <= 0 {
				return History{}, bad(`needs "job_type", "starts" > 0 and "period_ms" > 0`)
			}
			h.RateLimits = append(h.RateLimits, RateLimit{JobType: e.JobType, Starts: e.Starts,
				Period: time.Duration(e.PeriodMS * float64(time.Millisecond)), PerKey: e.PerKey})
		default:
			return History{}, bad("unknown type; want meta, submit, ack, claim, finish, effect, job, fault, slow_renewal, stall, stop, completion, renewal, edge, schedule, fire or rate_limit")
		}
	}
	if err := sc.Err(); err != nil {
		return History{}, fmt.Errorf("read history: %w", err)
	}
	if !meta {
		h.Lease, h.RescueInterval, h.Start, h.End = 30*time.Second, time.Second, first, last
	}
	for i := range h.Schedules {
		h.Schedules[i].Fires = fires[h.Schedules[i].Name]
		delete(fires, h.Schedules[i].Name)
	}
	for name := range fires {
		return History{}, fmt.Errorf("%w: fire lines of schedule %q, which has no schedule line", ErrHistory, name)
	}
	if len(h.Jobs) == 0 {
		h.Jobs = DeriveJobs(h)
	}
	return h, nil
}

// DeriveJobs builds the final job states a history without job lines
// implies, for schedulers that log events only: one job per acknowledged
// job id, its key from the ack, created at the ack, at attempt = its
// highest claimed attempt, its status from its last attempt — none or a
// RELEASED or STALE one: WAITING; open: RUNNING (lease until claim +
// Lease); SUCCESS, FAILED or CANCELED as it says; LEASE_EXPIRED: FAILED
// when the job has no further attempt. Jobs claimed but never acknowledged
// are derived too (they will be phantoms). MaxRetry is the number of
// attempts less one (a derived history does not know the real limit).
func DeriveJobs(h History) []Job {
	type acc struct {
		j    Job
		last *Execution
	}
	byID := map[uint64]*acc{}
	var order []uint64
	get := func(id uint64) *acc {
		a, ok := byID[id]
		if !ok {
			a = &acc{j: Job{ID: id, Key: fmt.Sprintf("job-%d", id), Status: StatusWaiting}}
			byID[id] = a
			order = append(order, id)
		}
		return a
	}
	for _, s := range h.Submits {
		if !s.Acked() {
			continue
		}
		a := get(s.JobID)
		a.j.Key, a.j.Type, a.j.CreateTime = s.Key, s.Type, s.AckedAt
	}
	for i := range h.Executions {
		e := &h.Executions[i]
		a := get(e.JobID)
		if a.j.CreateTime.IsZero() {
			a.j.CreateTime = e.StartedAt
		}
		if a.last == nil || e.Attempt >= a.last.Attempt {
			a.last = e
		}
	}
	out := make([]Job, 0, len(order))
	for _, id := range order {
		a := byID[id]
		j := a.j
		if x := a.last; x != nil {
			j.Attempt, j.MaxRetry, j.Owner = x.Attempt, x.Attempt-1, x.Owner
			switch {
			case x.FinishedAt == nil:
				j.Status = StatusRunning
				lu := x.StartedAt.Add(h.Lease)
				j.LeaseUntil = &lu
			case x.Outcome == OutcomeSuccess, x.Outcome == OutcomeFailed, x.Outcome == OutcomeCanceled:
				j.Status = x.Outcome
			case x.Outcome == OutcomeLeaseExpired:
				j.Status, j.LastError = StatusFailed, "lease expired"
			default:
				j.Status = StatusWaiting
			}
			if j.Terminal() {
				j.FinishedAt = x.FinishedAt
			}
		}
		out = append(out, j)
	}
	return out
}

func utcp(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
