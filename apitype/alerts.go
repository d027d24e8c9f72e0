package apitype

import (
	"encoding/json"
	"time"
)

// AlertRuleRequest is the body of POST /v1/alerts: a rule for a job type
// (conditions job_failed, job_running_longer) or a periodic schedule
// (schedule_missed, schedule_skipped) and its webhook.
type AlertRuleRequest struct {
	// Name is unique: 1–64 characters of letters, digits, '.', '_' and '-'.
	Name string `json:"name"`
	// JobType is the watched job type (job conditions only).
	JobType string `json:"job_type,omitempty"`
	// Schedule is the watched periodic schedule's name (schedule conditions only).
	Schedule string `json:"schedule,omitempty"`
	// Condition is job_failed, job_running_longer, schedule_missed or schedule_skipped.
	Condition string `json:"condition"`
	// ThresholdMs is job_running_longer's running time in milliseconds
	// (1 ms to 30 days); 0 for the other conditions.
	ThresholdMs int64 `json:"threshold_ms,omitempty"`
	// URL is the webhook (http or https; loopback, link-local and cloud
	// metadata addresses refused, loopback allowed by --alert-allow-loopback).
	URL string `json:"url"`
	// Preset is the body shape: webhook (default; jobq's JSON), slack,
	// dingtalk, wecom or feishu.
	Preset string `json:"preset,omitempty"`
	// Secret names the signing secret (--alert-secret-file). Defaults to "alerts".
	Secret string `json:"secret,omitempty"`
}

// AlertRule is a stored rule (GET /v1/alerts). The secret itself is never
// shown, only its name.
type AlertRule struct {
	ID          uint64    `json:"id"`
	Name        string    `json:"name"`
	JobType     string    `json:"job_type,omitempty"`
	Schedule    string    `json:"schedule,omitempty"`
	Condition   string    `json:"condition"`
	ThresholdMs int64     `json:"threshold_ms,omitempty"`
	URL         string    `json:"url"`
	Preset      string    `json:"preset"`
	Secret      string    `json:"secret"`
	CreateTime  time.Time `json:"create_time"`
}

// AlertDelivery is one incident's message (GET /v1/alerts/{id}/deliveries).
type AlertDelivery struct {
	ID        uint64 `json:"id"`
	RuleID    uint64 `json:"rule_id"`
	DedupeKey string `json:"dedupe_key"`
	// Status is PENDING, SENDING, DELIVERED or FAILED (given up).
	Status        string          `json:"status"`
	Attempts      int             `json:"attempts"`
	NextAttemptAt time.Time       `json:"next_attempt_at"`
	LastStatus    int             `json:"last_status,omitempty"`
	LastError     string          `json:"last_error,omitempty"`
	Incident      json.RawMessage `json:"incident"`
	CreateTime    time.Time       `json:"create_time"`
	DeliveredAt   *time.Time      `json:"delivered_at,omitempty"`
}
