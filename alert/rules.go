package alert

import (
	"cmp"
	"context"
	"errors"
	"net/url"
	"regexp"
	"slices"
	"strconv"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/egress"
)

// ValidationError is a rule refused: Field names what, Rule why. Nothing
// was written.
type ValidationError struct{ Field, Rule string }

func (e *ValidationError) Error() string { return e.Field + ": " + e.Rule }

// Conditions are the rule conditions, by name.
var Conditions = []string{jobq.AlertJobFailed, jobq.AlertJobRunningLonger, jobq.AlertScheduleMissed, jobq.AlertScheduleSkipped}

// MaxThresholdMs is the longest job_running_longer threshold: 30 days.
const MaxThresholdMs = 30 * 24 * 3600 * 1000

var namePattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Validate checks req and returns the rule to store, or a
// *ValidationError naming the field and the rule. The URL is checked with
// the replica's allow-list (a name is resolved).
func (s *Service) Validate(ctx context.Context, req apitype.AlertRuleRequest) (jobq.AlertRule, error) {
	r := jobq.AlertRule{Name: req.Name, JobType: req.JobType, Schedule: req.Schedule, Condition: req.Condition,
		ThresholdMs: req.ThresholdMs, URL: req.URL, Preset: cmp.Or(req.Preset, jobq.AlertPresetWebhook), Secret: cmp.Or(req.Secret, SecretDefault)}
	bad := func(field, rule string) (jobq.AlertRule, error) {
		return jobq.AlertRule{}, &ValidationError{Field: field, Rule: rule}
	}
	if !namePattern.MatchString(r.Name) {
		return bad("name", "must be 1-64 characters of letters, digits, '.', '_' and '-'")
	}
	if !slices.Contains(Conditions, r.Condition) {
		return bad("condition", "must be one of job_failed, job_running_longer, schedule_missed, schedule_skipped")
	}
	jobCond := r.Condition == jobq.AlertJobFailed || r.Condition == jobq.AlertJobRunningLonger
	switch {
	case jobCond && (r.JobType == "" || len(r.JobType) > 64):
		return bad("job_type", "is required (1-64 characters) for condition "+r.Condition)
	case jobCond && r.Schedule != "":
		return bad("schedule", "must be empty for condition "+r.Condition+" (it watches a job type)")
	case !jobCond && (r.Schedule == "" || len(r.Schedule) > 64):
		return bad("schedule", "is required (1-64 characters, a periodic schedule's name) for condition "+r.Condition)
	case !jobCond && r.JobType != "":
		return bad("job_type", "must be empty for condition "+r.Condition+" (it watches a schedule)")
	case r.Condition == jobq.AlertJobRunningLonger && (r.ThresholdMs <= 0 || r.ThresholdMs > MaxThresholdMs):
		return bad("threshold_ms", "must be 1 to "+strconv.Itoa(MaxThresholdMs)+" milliseconds (30 days) for job_running_longer")
	case r.Condition != jobq.AlertJobRunningLonger && r.ThresholdMs != 0:
		return bad("threshold_ms", "applies only to job_running_longer")
	case len(r.URL) > 2048:
		return bad("url", "must be at most 2048 bytes")
	}
	if err := s.policy.CheckURL(ctx, r.URL); err != nil {
		var de *egress.DestinationError
		if errors.As(err, &de) {
			return bad("url", de.Rule)
		}
		return jobq.AlertRule{}, err
	}
	if !slices.Contains(Presets, r.Preset) {
		return bad("preset", "must be one of webhook, slack, dingtalk, wecom, feishu")
	}
	if _, ok := s.cfg.Secrets[r.Secret]; !ok {
		return bad("secret", "must name a secret of --alert-secret-file or "+SecretsEnv+" (default \""+SecretDefault+"\"; known: "+strconv.Itoa(len(s.cfg.Secrets))+")")
	}
	return r, nil
}

// Create validates req and stores the rule: a *ValidationError, or
// jobq.ErrKeyConflict when a rule of that name exists.
func (s *Service) Create(ctx context.Context, req apitype.AlertRuleRequest) (apitype.AlertRule, error) {
	r, err := s.Validate(ctx, req)
	if err != nil {
		return apitype.AlertRule{}, err
	}
	r, err = s.st.AlertRuleCreate(ctx, r)
	if err != nil {
		return apitype.AlertRule{}, err
	}
	s.hasRules.Store(true)
	s.rulesChanged() // detect with the new rule now, not after an idle interval
	// The host only: a chat webhook's URL carries its access token.
	host := ""
	if u, err := url.Parse(r.URL); err == nil {
		host = u.Host
	}
	s.log.Info("alert rule created", "rule_id", r.ID, "name", r.Name, "condition", r.Condition, "host", host)
	return RuleOut(r), nil
}

// List returns every rule by id.
func (s *Service) List(ctx context.Context) ([]apitype.AlertRule, error) {
	rs, err := s.st.AlertRules(ctx)
	out := make([]apitype.AlertRule, len(rs))
	for i, r := range rs {
		out[i] = RuleOut(r)
	}
	return out, err
}

// Get returns one rule; jobq.ErrNotFound if none.
func (s *Service) Get(ctx context.Context, id uint64) (apitype.AlertRule, error) {
	r, err := s.st.AlertRuleGet(ctx, id)
	return RuleOut(r), err
}

// Delete deletes a rule (its deliveries stay); jobq.ErrNotFound if none.
// This replica's detection stops using it at once, its peers' within
// IdleInterval plus one ScanInterval (Config.IdleInterval).
func (s *Service) Delete(ctx context.Context, id uint64) error {
	err := s.st.AlertRuleDelete(ctx, id)
	s.rulesChanged()
	return err
}

// Deliveries returns the newest limit (1-1000, default 100) deliveries of
// rule id (0: of every rule), newest first.
func (s *Service) Deliveries(ctx context.Context, id uint64, limit int) ([]apitype.AlertDelivery, error) {
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	ds, err := s.st.AlertDeliveries(ctx, id, limit)
	out := make([]apitype.AlertDelivery, len(ds))
	for i, d := range ds {
		out[i] = apitype.AlertDelivery{ID: d.ID, RuleID: d.RuleID, DedupeKey: d.DedupeKey, Status: d.Status, Attempts: d.Attempts,
			NextAttemptAt: d.NextAttemptAt, LastStatus: d.LastStatus, LastError: d.LastError, Incident: d.Incident,
			CreateTime: d.CreateTime, DeliveredAt: d.DeliveredAt}
	}
	return out, err
}

// RuleOut is r in the API's shape.
func RuleOut(r jobq.AlertRule) apitype.AlertRule {
	return apitype.AlertRule{ID: r.ID, Name: r.Name, JobType: r.JobType, Schedule: r.Schedule, Condition: r.Condition,
		ThresholdMs: r.ThresholdMs, URL: r.URL, Preset: r.Preset, Secret: r.Secret, CreateTime: r.CreateTime}
}
