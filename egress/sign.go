package egress

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

// Request headers of a signed request (a call-out, an alert).
const (
	// HeaderTimestamp is the request's Unix time in seconds.
	HeaderTimestamp = "Jobq-Timestamp"
	// HeaderSignature is "v1=<hex>": HMAC-SHA256 with the sender's secret
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
var ErrBadSignature = errors.New("bad signature")

// Verify checks a request's signature: h's HeaderTimestamp within maxSkew
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
