// Package alert is jobq's alert notifications (docs/operations.md,
// "Alerts"): rules stored in the database (alert_rule) name a job type or a
// periodic schedule, a condition and a webhook; every replica detects
// incidents and delivers them through one outbox table (alert_delivery),
// claimed with FOR UPDATE SKIP LOCKED, so however many replicas run, an
// incident is one row and one message.
//
// Detection: job_failed by a scan of job_execution after a cursor, locked by
// one replica per pass, whose outbox rows and new cursor commit in one
// transaction; job_running_longer by a read of the type's RUNNING jobs;
// schedule_missed and schedule_skipped from the replica's own periodic fires
// (scheduler.EventPeriodicFired). Each incident has a dedupe key (rule and
// job and attempt, or rule and schedule and first missed instant).
//
// Delivery: a claimed row is POSTed, signed like a call-out (package
// egress: Jobq-Timestamp, Jobq-Signature), to a destination allowed by the
// same allow-list (loopback, link-local and metadata addresses refused,
// loopback allowed by --alert-allow-loopback), checked again on every
// connection. 5xx, 408, 429 and network errors are retried with exponential
// backoff (BackoffBase·2^(attempt−1), capped at BackoffMax) up to
// MaxAttempts; other answers and refused destinations end the delivery
// FAILED with the last error.
package alert

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/egress"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/storeerr"
)

// Defaults of Config.
const (
	ScanIntervalDefault    = 2 * time.Second
	DeliverIntervalDefault = time.Second
	IdleIntervalDefault    = 30 * time.Second
	SettleDefault          = 10 * time.Second
	ChunkDefault           = 5000
	LeaseDefault           = 30 * time.Second
	TimeoutDefault         = 10 * time.Second
	MaxAttemptsDefault     = 8
	BackoffBaseDefault     = time.Second
	BackoffMaxDefault      = 5 * time.Minute
	RetentionDefault       = 30 * 24 * time.Hour
	// purgeEvery is how often a replica deletes finished deliveries older
	// than Retention.
	purgeEvery = time.Hour
	// SecretDefault is the secret a rule names when its request names none.
	SecretDefault = "alerts"
)

// AllowLoopbackFlag is the operator flag that lets alert destinations be
// loopback addresses.
const AllowLoopbackFlag = "--alert-allow-loopback"

// SecretsEnv holds alert signing secrets as NAME=SECRET entries separated by ";".
const SecretsEnv = "JOBQ_ALERT_SECRETS"

// LoadSecrets reads alert signing secrets (egress.LoadSecrets): file, and
// env's NAME=SECRET entries (SecretsEnv).
func LoadSecrets(file, env string) (map[string][]byte, error) {
	return egress.LoadSecrets("alert secrets", SecretsEnv, file, env)
}

// Outcomes of a delivery attempt, as OutcomeFunc and the metrics name them.
const (
	OutcomeDelivered = "delivered" // 2xx
	OutcomeRetried   = "retried"   // 5xx, 408, 429 or a network error: tried again later
	OutcomeFailed    = "failed"    // given up: attempts exhausted, another answer, or a refused destination
	OutcomeRefused   = "refused"   // the destination is not allowed (counted once more as failed)
)

// Config configures a replica's alerts.
type Config struct {
	// Owner names this replica in a claimed delivery's owner.
	Owner string
	// Secrets are the signing secrets by name (--alert-secret-file).
	Secrets map[string][]byte
	// AllowLoopback lets rules and deliveries reach loopback addresses.
	// Defaults to false.
	AllowLoopback bool
	// Resolver resolves destination hosts (nil: net.DefaultResolver).
	Resolver *net.Resolver
	// ScanInterval is how often incidents are detected. Defaults to 2s.
	ScanInterval time.Duration
	// DeliverInterval is how soon the sender probes for due deliveries
	// again after a probe or claim failed, or found due deliveries held by
	// peers' claims. Otherwise it probes (one index-only read; it claims
	// only when one is due) when this replica wrote a delivery (Wake), when
	// the earliest pending delivery falls due, and every IdleInterval: a
	// delivery another replica wrote is that replica's to send at once
	// (its own Wake), and is sent by any replica within IdleInterval of
	// falling due when its writer cannot (it died, or its send's lease
	// ran out). Defaults to 1s.
	DeliverInterval time.Duration
	// IdleInterval replaces ScanInterval while no rule exists (a rule
	// created through this replica wakes it at once; one created through
	// another is seen within it), and the sender does not probe at all
	// then: a replica with no rules reads alert_rule once per interval and
	// nothing else. While rules exist it is how long detection uses the
	// rules it read (a rule created or deleted through this replica is
	// read again at once; through another, seen within IdleInterval plus
	// one ScanInterval) and the longest the sender waits between probes
	// (see DeliverInterval). Defaults to 30s: with one job_failed rule on
	// an idle database the alerts sent 4.1 statements/s (a rules read and
	// a detection transaction per pass, a probe per second), now 0.52/s
	// (the unlocked cursor peek per ScanInterval; in-process, 21s window).
	IdleInterval time.Duration
	// Settle is how long an execution may commit after its finished_at and
	// still be read by the scan (jobq.AlertDetectParams). Defaults to 10s.
	Settle time.Duration
	// Chunk is the most executions one scan pass reads. Defaults to 5,000.
	Chunk int
	// Lease is how long a claimed delivery is this replica's before another
	// may send it again. Defaults to 30s (longer than Timeout).
	Lease time.Duration
	// Timeout bounds one send, connection to answer. Defaults to 10s.
	Timeout time.Duration
	// MaxAttempts is how many sends a delivery gets before it is given up.
	// Defaults to 8.
	MaxAttempts int
	// BackoffBase and BackoffMax shape the wait before a retry:
	// BackoffBase·2^(attempt−1), at most BackoffMax. Default to 1s and 5m.
	BackoffBase, BackoffMax time.Duration
	// Retention is how long finished deliveries (DELIVERED, FAILED) are
	// kept: each replica deletes older ones hourly. Defaults to 30 days.
	Retention time.Duration
	// OutcomeFunc, if set, is called with each attempt's outcome (the
	// Outcome* constants): the Prometheus counter.
	OutcomeFunc func(outcome string)
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	c.ScanInterval = cmp.Or(c.ScanInterval, ScanIntervalDefault)
	c.DeliverInterval = cmp.Or(c.DeliverInterval, DeliverIntervalDefault)
	c.IdleInterval = cmp.Or(c.IdleInterval, IdleIntervalDefault)
	c.Settle = cmp.Or(c.Settle, SettleDefault)
	c.Chunk = cmp.Or(c.Chunk, ChunkDefault)
	c.Timeout = cmp.Or(c.Timeout, TimeoutDefault)
	c.Lease = cmp.Or(c.Lease, max(LeaseDefault, 2*c.Timeout))
	c.MaxAttempts = cmp.Or(c.MaxAttempts, MaxAttemptsDefault)
	c.BackoffBase = cmp.Or(c.BackoffBase, BackoffBaseDefault)
	c.BackoffMax = cmp.Or(c.BackoffMax, BackoffMaxDefault)
	c.Retention = cmp.Or(c.Retention, RetentionDefault)
	c.Owner = cmp.Or(c.Owner, "alerts")
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Store is what alerts need from the database (*store.Store implements it).
type Store interface {
	AlertRuleCreate(ctx context.Context, r jobq.AlertRule) (jobq.AlertRule, error)
	AlertRules(ctx context.Context) ([]jobq.AlertRule, error)
	AlertRuleGet(ctx context.Context, id uint64) (jobq.AlertRule, error)
	AlertRuleDelete(ctx context.Context, id uint64) error
	AlertDetect(ctx context.Context, p jobq.AlertDetectParams) (jobq.AlertDetectResult, error)
	AlertEnqueue(ctx context.Context, ens []jobq.AlertEnqueue) (int, error)
	AlertRunningLonger(ctx context.Context, jobType string, threshold time.Duration) ([]jobq.AlertRunningJob, error)
	AlertDeliveryClaim(ctx context.Context, owner string, lease time.Duration, limit int) ([]jobq.AlertDelivery, error)
	AlertDeliveryDone(ctx context.Context, d jobq.AlertDelivery, status int) (bool, error)
	AlertDeliveryRetry(ctx context.Context, d jobq.AlertDelivery, status int, msg string, backoff time.Duration) (bool, error)
	AlertDeliveryGiveUp(ctx context.Context, d jobq.AlertDelivery, status int, msg string) (bool, error)
	AlertDeliveries(ctx context.Context, ruleID uint64, limit int) ([]jobq.AlertDelivery, error)
	AlertDeliveryPurge(ctx context.Context, olderThan time.Duration) (int64, error)
	AlertDeliveryNextWait(ctx context.Context) (time.Duration, bool, error)
}

// Service is one replica's alerts: the rules' API (Create, List, Get,
// Delete, Deliveries), the observer of its periodic fires (Observe), and,
// once started, the detection and delivery loops.
type Service struct {
	st     Store
	cfg    Config
	policy egress.Policy
	sender *sender
	log    *slog.Logger

	wake       chan struct{}
	wakeDetect chan struct{}
	fires      chan scheduler.Event
	// hasRules is whether the last read of the rules found any.
	hasRules atomic.Bool

	// rulesMu guards the rules detection last read (rules), when (rulesAt)
	// and whether a local create or delete made them stale.
	rulesMu    sync.Mutex
	rules      []jobq.AlertRule
	rulesAt    time.Time
	rulesStale bool

	mu     sync.Mutex
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// passes counts finished detection passes (tests wait on it).
	passes chan struct{}
}

// New returns the alerts of a replica over st; Start runs the loops.
func New(st Store, cfg Config) *Service {
	cfg = cfg.withDefaults()
	p := egress.Policy{AllowLoopback: cfg.AllowLoopback, AllowFlag: AllowLoopbackFlag, Resolver: cfg.Resolver}
	s := &Service{st: st, cfg: cfg, policy: p, log: cfg.Logger.With("component", "alert"),
		wake: make(chan struct{}, 1), wakeDetect: make(chan struct{}, 1), fires: make(chan scheduler.Event, 256), passes: make(chan struct{}, 1)}
	s.sender = newSender(cfg, p)
	return s
}

// Observe takes the replica's periodic fires that found missed instants
// (scheduler.EventPeriodicFired with Misfire.Missed > 0) for the schedule
// rules; it never blocks (a fire arriving while 256 wait is dropped and
// logged). Install it as a scheduler observer.
func (s *Service) Observe(e scheduler.Event) {
	if e.Kind != scheduler.EventPeriodicFired || e.Err != nil || e.Misfire.Missed == 0 {
		return
	}
	select {
	case s.fires <- e:
	default:
		s.log.Warn("alert: periodic misfire dropped (the queue of fires to check is full)", "name", e.Name)
	}
}

// Start runs detection and delivery until Stop.
func (s *Service) Start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		return
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.wg.Add(3)
	go func() { defer s.wg.Done(); s.detectLoop(ctx) }()
	go func() { defer s.wg.Done(); s.deliverLoop(ctx) }()
	go func() { defer s.wg.Done(); s.firesLoop(ctx) }()
}

// Stop ends the loops and waits for sends in flight.
func (s *Service) Stop() {
	s.mu.Lock()
	c := s.cancel
	s.mu.Unlock()
	if c != nil {
		c()
	}
	s.wg.Wait()
}

// Wake makes the sender claim due deliveries now; it never blocks.
func (s *Service) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (s *Service) detectLoop(ctx context.Context) {
	var purged time.Time
	for {
		if err := s.Detect(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("alert detection failed; retrying at the next pass", "err", err)
		}
		if time.Since(purged) >= purgeEvery {
			purged = time.Now()
			if n, err := s.st.AlertDeliveryPurge(ctx, s.cfg.Retention); err != nil && ctx.Err() == nil {
				s.log.Warn("alert delivery purge failed; retrying in an hour", "err", err)
			} else if n > 0 {
				s.log.Info("finished alert deliveries purged", "deliveries", n, "older_than", s.cfg.Retention)
			}
		}
		select {
		case s.passes <- struct{}{}:
		default:
		}
		interval := s.cfg.IdleInterval
		if s.hasRules.Load() {
			interval = s.cfg.ScanInterval
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-s.wakeDetect:
		case <-t.C:
		}
		t.Stop()
	}
}

// loadRules returns the rules: those read less than IdleInterval ago when
// some were found and no local create or delete came since, else a new
// read (every pass reads while there are none: it runs only every
// IdleInterval then).
func (s *Service) loadRules(ctx context.Context) ([]jobq.AlertRule, error) {
	s.rulesMu.Lock()
	defer s.rulesMu.Unlock()
	if len(s.rules) > 0 && !s.rulesStale && time.Since(s.rulesAt) < s.cfg.IdleInterval {
		return s.rules, nil
	}
	at := time.Now()
	rules, err := s.st.AlertRules(ctx)
	if err != nil {
		return nil, err
	}
	s.rules, s.rulesAt, s.rulesStale = rules, at, false
	return rules, nil
}

// rulesChanged makes the next detection read the rules again (a local
// create or delete) and wakes it; it never blocks.
func (s *Service) rulesChanged() {
	s.rulesMu.Lock()
	s.rulesStale = true
	s.rulesMu.Unlock()
	select {
	case s.wakeDetect <- struct{}{}:
	default:
	}
}

// Detect runs one detection pass: job_failed over the executions after the
// cursor (chunk after chunk while they come back full), then
// job_running_longer.
// New outbox rows wake the sender.
func (s *Service) Detect(ctx context.Context) error {
	rules, err := s.loadRules(ctx)
	if err != nil {
		return err
	}
	if had := s.hasRules.Swap(len(rules) > 0); !had && len(rules) > 0 {
		s.Wake() // the sender leaves its idle cadence now
	}
	if len(rules) == 0 {
		return nil
	}
	var failed, running []jobq.AlertRule
	for _, r := range rules {
		switch r.Condition {
		case jobq.AlertJobFailed:
			failed = append(failed, r)
		case jobq.AlertJobRunningLonger:
			running = append(running, r)
		}
	}
	inserted := 0
	if len(failed) > 0 {
		var after uint64
		for {
			res, err := s.st.AlertDetect(ctx, jobq.AlertDetectParams{Chunk: s.cfg.Chunk, Settle: s.cfg.Settle, After: after,
				PlanFunc: func(execs []jobq.AlertExecution, now time.Time) []jobq.AlertEnqueue {
					return planFailed(failed, execs, now)
				}})
			if err != nil {
				return err
			}
			inserted += res.Inserted
			// A full chunk: read on after it (the cursor stays before the
			// executions younger than Settle, read again next pass).
			if res.Skipped || res.Read < s.cfg.Chunk {
				break
			}
			after = res.LastRead
		}
	}
	for _, r := range running {
		jobs, err := s.st.AlertRunningLonger(ctx, r.JobType, time.Duration(r.ThresholdMs)*time.Millisecond)
		if err != nil {
			return err
		}
		ens := make([]jobq.AlertEnqueue, 0, len(jobs))
		now := time.Now().UTC()
		for _, j := range jobs {
			in := Incident{RuleID: r.ID, Rule: r.Name, Condition: r.Condition, JobType: r.JobType, JobID: j.ID, JobKey: j.JobKey,
				Attempt: j.Attempt, StartedAt: ptr(j.StartedAt), ThresholdMs: r.ThresholdMs, Owner: j.Owner,
				DedupeKey: fmt.Sprintf("%d:running:%d:%d", r.ID, j.ID, j.Attempt), DetectedAt: now}
			ens = append(ens, in.enqueue(r))
		}
		n, err := s.st.AlertEnqueue(ctx, ens)
		if err != nil {
			return err
		}
		inserted += n
	}
	if inserted > 0 {
		s.log.Info("alert incidents detected", "incidents", inserted)
		s.Wake()
	}
	return nil
}

// planFailed is the job_failed plan: one incident per rule of the job's
// type and attempt that ended the job FAILED after the rule was created.
func planFailed(rules []jobq.AlertRule, execs []jobq.AlertExecution, now time.Time) []jobq.AlertEnqueue {
	var out []jobq.AlertEnqueue
	for _, e := range execs {
		if !e.JobFailed {
			continue
		}
		for _, r := range rules {
			if r.JobType != e.JobType || e.FinishedAt.Before(r.CreateTime) {
				continue
			}
			in := Incident{RuleID: r.ID, Rule: r.Name, Condition: r.Condition, JobType: e.JobType, JobID: e.JobID, JobKey: e.JobKey,
				Attempt: e.Attempt, Outcome: string(e.Outcome), Error: e.Error, FinishedAt: ptr(e.FinishedAt),
				DedupeKey: fmt.Sprintf("%d:job:%d:%d", r.ID, e.JobID, e.Attempt), DetectedAt: now}
			out = append(out, in.enqueue(r))
		}
	}
	return out
}

// firesLoop turns the replica's misfires into schedule incidents: one per
// rule of the schedule and first missed instant (peers firing the same
// cursor write the same key).
func (s *Service) firesLoop(ctx context.Context) {
	for {
		var e scheduler.Event
		select {
		case <-ctx.Done():
			return
		case e = <-s.fires:
		}
		if err := s.enqueueMisfire(ctx, e); err != nil && ctx.Err() == nil {
			s.log.Warn("alert: schedule incident not written", "name", e.Name, "err", err)
		}
	}
}

func (s *Service) enqueueMisfire(ctx context.Context, e scheduler.Event) error {
	rules, err := s.loadRules(ctx)
	if err != nil {
		return err
	}
	m := e.Misfire
	var ens []jobq.AlertEnqueue
	for _, r := range rules {
		if r.Schedule != e.Name || !(r.Condition == jobq.AlertScheduleMissed || (r.Condition == jobq.AlertScheduleSkipped && m.Skipped > 0)) {
			continue
		}
		in := Incident{RuleID: r.ID, Rule: r.Name, Condition: r.Condition, Schedule: e.Name, Missed: m.Missed, Skipped: m.Skipped,
			From: ptr(m.From.UTC()), To: ptr(m.To.UTC()), Policy: m.Policy,
			DedupeKey: fmt.Sprintf("%d:schedule:%s:%s", r.ID, e.Name, m.From.UTC().Format(jobq.PeriodicInstantLayout)), DetectedAt: time.Now().UTC()}
		ens = append(ens, in.enqueue(r))
	}
	if len(ens) == 0 {
		return nil
	}
	n, err := s.st.AlertEnqueue(ctx, ens)
	if n > 0 {
		s.Wake()
	}
	return err
}

func ptr[T any](v T) *T { return &v }

// deliverLoop probes for due deliveries (one index-only read) on Wake, when
// the earliest pending one falls due and every IdleInterval (DeliverInterval
// after a failure or due rows held by peers; not at all while no rule
// exists), and claims and sends them only when one is due.
func (s *Service) deliverLoop(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-t.C:
		}
		if !s.hasRules.Load() {
			// No rule, nothing to send: Detect wakes this loop when one
			// appears (and new outbox rows do).
			t.Reset(s.cfg.IdleInterval)
			continue
		}
		// Nothing pending: this replica's next delivery wakes it, a peer's
		// is the peer's to send; the probe every IdleInterval catches those
		// a peer wrote and could not send.
		next := s.cfg.IdleInterval
		for ctx.Err() == nil {
			wait, any, err := s.st.AlertDeliveryNextWait(ctx)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("alert delivery probe failed; retrying", "err", err)
				}
				next = s.cfg.DeliverInterval
				break
			}
			if !any {
				break
			}
			if wait > 0 {
				next = min(next, wait)
				break
			}
			n, err := s.DeliverDue(ctx)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("alert delivery claim failed; retrying", "err", err)
				}
				next = s.cfg.DeliverInterval
				break
			}
			if n == 0 {
				next = s.cfg.DeliverInterval // due rows held by peers' claims
				break
			}
		}
		t.Reset(max(next, 10*time.Millisecond))
	}
}

// claimBatch is the most deliveries one claim takes (and sends at once).
const claimBatch = 16

// DeliverDue claims up to 16 due deliveries, sends them at once and
// records each outcome; it returns how many it claimed.
func (s *Service) DeliverDue(ctx context.Context) (int, error) {
	ds, err := s.st.AlertDeliveryClaim(ctx, s.cfg.Owner, s.cfg.Lease, claimBatch)
	if err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	for _, d := range ds {
		wg.Add(1)
		go func() { defer wg.Done(); s.deliver(ctx, d) }()
	}
	wg.Wait()
	return len(ds), nil
}

// deliver sends d and records the outcome, fenced by its attempts.
func (s *Service) deliver(ctx context.Context, d jobq.AlertDelivery) {
	res := s.sender.send(ctx, d)
	// Deadlocks and lost connections are retried for up to the lease: the
	// row is this replica's until then.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.Lease)
	defer cancel()
	log := s.log.With("delivery_id", d.ID, "rule_id", d.RuleID, "dedupe_key", d.DedupeKey, "attempt", d.Attempts)
	var write func() (bool, error)
	outcome := OutcomeFailed
	switch {
	case res.ok():
		outcome = OutcomeDelivered
		write = func() (bool, error) { return s.st.AlertDeliveryDone(wctx, d, res.status) }
		log.Info("alert delivered", "status", res.status)
	case res.retryable && d.Attempts < s.cfg.MaxAttempts:
		outcome = OutcomeRetried
		backoff := min(s.cfg.BackoffBase<<min(d.Attempts-1, 30), s.cfg.BackoffMax)
		write = func() (bool, error) { return s.st.AlertDeliveryRetry(wctx, d, res.status, res.err, backoff) }
		log.Warn("alert delivery failed; retrying", "status", res.status, "err", res.err, "backoff", backoff)
	default:
		if res.refused {
			s.count(OutcomeRefused)
		}
		write = func() (bool, error) { return s.st.AlertDeliveryGiveUp(wctx, d, res.status, res.err) }
		log.Error("alert delivery given up", "status", res.status, "err", res.err, "attempts", d.Attempts)
	}
	_, err := storeerr.DoV(wctx, storeerr.RetryPolicy{}, "alert.outcome", write)
	s.count(outcome)
	if err != nil {
		log.Warn("alert delivery outcome not written; the delivery is sent again after its lease", "err", err)
	}
}

func (s *Service) count(outcome string) {
	if s.cfg.OutcomeFunc != nil {
		s.cfg.OutcomeFunc(outcome)
	}
}

// Incident is what one alert reports: the webhook preset's JSON body, and
// the source of the chat presets' text. Fields not of the condition are
// left out.
type Incident struct {
	RuleID    uint64 `json:"rule_id"`
	Rule      string `json:"rule"`
	Condition string `json:"condition"`
	// DedupeKey names the incident: also the request's Idempotency-Key.
	DedupeKey string `json:"dedupe_key"`
	// The job's (job_failed, job_running_longer).
	JobType     string     `json:"job_type,omitempty"`
	JobID       uint64     `json:"job_id,omitempty"`
	JobKey      string     `json:"job_key,omitempty"`
	Attempt     int        `json:"attempt,omitempty"`
	Outcome     string     `json:"outcome,omitempty"`
	Error       string     `json:"error,omitempty"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
	StartedAt   *time.Time `json:"started_at,omitempty"`
	ThresholdMs int64      `json:"threshold_ms,omitempty"`
	Owner       string     `json:"owner,omitempty"`
	// The schedule's (schedule_missed, schedule_skipped): instants missed
	// from From to To, Skipped of them never to run under Policy.
	Schedule string     `json:"schedule,omitempty"`
	Missed   int        `json:"missed,omitempty"`
	Skipped  int        `json:"skipped,omitempty"`
	From     *time.Time `json:"from,omitempty"`
	To       *time.Time `json:"to,omitempty"`
	Policy   string     `json:"misfire,omitempty"`
	// DetectedAt is when a replica found it (its clock, UTC).
	DetectedAt time.Time `json:"detected_at"`
	// Text is the one line the chat presets send.
	Text string `json:"text"`
}

func (in Incident) enqueue(r jobq.AlertRule) jobq.AlertEnqueue {
	in.Text = in.text()
	b, _ := json.Marshal(in)
	return jobq.AlertEnqueue{Rule: r, DedupeKey: in.DedupeKey, Incident: b}
}

// text is the incident in one line.
func (in Incident) text() string {
	const ts = time.RFC3339
	switch in.Condition {
	case jobq.AlertJobFailed:
		msg := fmt.Sprintf("[jobq] %s: job %d (type %s, key %s) FAILED at attempt %d", in.Rule, in.JobID, in.JobType, in.JobKey, in.Attempt)
		if in.Error != "" {
			msg += ": " + in.Error
		}
		return msg
	case jobq.AlertJobRunningLonger:
		return fmt.Sprintf("[jobq] %s: job %d (type %s, key %s) has been RUNNING since %s, longer than %s (attempt %d, owner %s)",
			in.Rule, in.JobID, in.JobType, in.JobKey, in.StartedAt.Format(ts), time.Duration(in.ThresholdMs)*time.Millisecond, in.Attempt, in.Owner)
	case jobq.AlertScheduleMissed:
		return fmt.Sprintf("[jobq] %s: schedule %s missed %d instant(s) from %s to %s (misfire %s: %d will not run)",
			in.Rule, in.Schedule, in.Missed, in.From.Format(ts), in.To.Format(ts), in.Policy, in.Skipped)
	default:
		return fmt.Sprintf("[jobq] %s: schedule %s skipped %d instant(s) from %s to %s (misfire %s)",
			in.Rule, in.Schedule, in.Skipped, in.From.Format(ts), in.To.Format(ts), in.Policy)
	}
}
