package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/egress"
)

// Request headers of an alert beside egress's signature headers.
const (
	// HeaderIdempotencyKey carries the incident's dedupe key: a receiver
	// that saw it already has seen the incident (a send repeated after a
	// replica died between the answer and its record).
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderDeliveryID is the outbox row's id.
	HeaderDeliveryID = "Jobq-Alert-Delivery"
)

// maxAnswerBytes bounds what is read of an answer (for its error text).
const maxAnswerBytes = 4096

type sender struct {
	cfg    Config
	policy egress.Policy
	http   *http.Client
}

func newSender(cfg Config, p egress.Policy) *sender {
	d := &net.Dialer{Timeout: cfg.Timeout, Control: p.DialControl()}
	return &sender{cfg: cfg, policy: p, http: &http.Client{
		Transport: &http.Transport{DialContext: d.DialContext, Proxy: nil, IdleConnTimeout: 30 * time.Second,
			TLSHandshakeTimeout: cfg.Timeout, ResponseHeaderTimeout: cfg.Timeout},
		// A redirect could lead anywhere: it is an answer like any other non-2xx.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// result is one send's outcome.
type result struct {
	status    int // the answer's HTTP status; 0 without one
	err       string
	retryable bool
	refused   bool // the destination is not allowed
}

func (r result) ok() bool { return r.status >= 200 && r.status < 300 && r.err == "" }

// send POSTs d's body in its preset, signed with its secret.
func (s *sender) send(ctx context.Context, d jobq.AlertDelivery) result {
	secret, ok := s.cfg.Secrets[d.Secret]
	if !ok {
		// Another replica may hold it: retried like a network error.
		return result{err: fmt.Sprintf("signing secret %q is not loaded on this replica (--alert-secret-file)", d.Secret), retryable: true}
	}
	if err := s.policy.CheckURL(ctx, d.URL); err != nil {
		return refusal(err)
	}
	body, err := Body(d.Preset, d.Incident)
	if err != nil {
		return result{err: err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(body))
	if err != nil {
		return result{err: "request: " + err.Error()}
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "jobq-alert/1")
	req.Header.Set(egress.HeaderTimestamp, ts)
	req.Header.Set(egress.HeaderSignature, egress.Sign(secret, ts, body))
	req.Header.Set(HeaderIdempotencyKey, d.DedupeKey)
	req.Header.Set(HeaderDeliveryID, strconv.FormatUint(d.ID, 10))
	resp, err := s.http.Do(req)
	if err != nil {
		if u := errors.Unwrap(err); u != nil {
			err = u // *url.Error's text repeats the URL, and a chat webhook's URL carries its token
		}
		var de *egress.DestinationError
		if errors.As(err, &de) {
			return refusal(err)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return result{err: "no answer within " + s.cfg.Timeout.String(), retryable: true}
		}
		return result{err: err.Error(), retryable: true}
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	r := result{status: resp.StatusCode}
	if r.ok() {
		return r
	}
	r.err = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(answer))
	r.retryable = resp.StatusCode >= 500 || resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusTooManyRequests
	return r
}

func refusal(err error) result {
	return result{err: "destination refused, not contacted: " + err.Error(), refused: true}
}

// Presets are the payload presets, by name.
var Presets = []string{jobq.AlertPresetWebhook, jobq.AlertPresetSlack, jobq.AlertPresetDingTalk, jobq.AlertPresetWeCom, jobq.AlertPresetFeishu}

// Body renders an incident (its JSON, as stored) in a preset's shape:
// webhook the incident itself; slack {"text": TEXT}; dingtalk and wecom
// {"msgtype":"text","text":{"content": TEXT}}; feishu
// {"msg_type":"text","content":{"text": TEXT}} — TEXT the incident's text.
func Body(preset string, incident json.RawMessage) ([]byte, error) {
	if preset == jobq.AlertPresetWebhook {
		return incident, nil
	}
	var in struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(incident, &in); err != nil {
		return nil, fmt.Errorf("incident: %w", err)
	}
	type text struct {
		Text string `json:"text"`
	}
	type content struct {
		Content string `json:"content"`
	}
	switch preset {
	case jobq.AlertPresetSlack:
		return json.Marshal(text{Text: in.Text})
	case jobq.AlertPresetDingTalk, jobq.AlertPresetWeCom:
		return json.Marshal(struct {
			MsgType string  `json:"msgtype"`
			Text    content `json:"text"`
		}{"text", content{in.Text}})
	case jobq.AlertPresetFeishu:
		return json.Marshal(struct {
			MsgType string `json:"msg_type"`
			Content text   `json:"content"`
		}{"text", text{in.Text}})
	}
	return nil, fmt.Errorf("preset %q: unknown", preset)
}
