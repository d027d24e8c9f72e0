// Package callout is jobq's HTTP call-out executor: a job type bound to an
// HTTP endpoint is run by POSTing the job to it (docs/workers.md, "HTTP
// call-out"). A 2xx answer with a body completes the job with that output;
// 202 Accepted means the endpoint took the work and will heartbeat and
// complete it later through the worker protocol with the job's task token;
// any other answer, a timeout or a refused connection fails the attempt,
// retried under the job's retry policy.
//
// The executor claims jobs exactly as a remote worker's fetch does (the
// task token is the lease) and writes outcomes through the same fenced
// path (scheduler.Remote): leases, heartbeats, rescue and metrics are the
// scheduler's. Requests are signed (Sign, Verify), answers bounded, and
// destinations allow-listed (CheckURL, checked again on every connection).
package callout

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Request headers of a call-out.
const (
	// HeaderTimestamp is the request's Unix time in seconds.
	HeaderTimestamp = "Jobq-Timestamp"
	// HeaderSignature is "v1=<hex>": HMAC-SHA256 with the binding's secret
	// over "<timestamp>.<body>".
	HeaderSignature = "Jobq-Signature"
	signatureScheme = "v1="
)

// MaxSkewDefault is how far a request's timestamp may be from the
// endpoint's clock before Verify refuses it (a replayed request).
const MaxSkewDefault = 5 * time.Minute

// Sign returns the HeaderSignature value of body sent at timestamp
// (HeaderTimestamp's value) with secret.
func Sign(secret []byte, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(timestamp))
	m.Write([]byte("."))
	m.Write(body)
	return signatureScheme + hex.EncodeToString(m.Sum(nil))
}

// ErrBadSignature is returned by Verify for a missing, malformed, stale
// or wrong signature.
var ErrBadSignature = errors.New("callout: bad signature")

// Verify checks a call-out's signature: h's HeaderTimestamp within maxSkew
// of now and HeaderSignature equal to Sign(secret, timestamp, body) (a
// constant-time comparison). It is what an endpoint written in Go runs
// before it trusts a request.
func Verify(secret []byte, h http.Header, body []byte, now time.Time, maxSkew time.Duration) error {
	ts := h.Get(HeaderTimestamp)
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errors.Join(ErrBadSignature, errors.New("timestamp: not a Unix time in seconds"))
	}
	if d := now.Sub(time.Unix(sec, 0)); d > maxSkew || d < -maxSkew {
		return errors.Join(ErrBadSignature, errors.New("timestamp: too far from now"))
	}
	got := h.Get(HeaderSignature)
	if !strings.HasPrefix(got, signatureScheme) {
		return errors.Join(ErrBadSignature, errors.New("signature: want v1=<hex>"))
	}
	if !hmac.Equal([]byte(got), []byte(Sign(secret, ts, body))) {
		return ErrBadSignature
	}
	return nil
}
