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
// destinations allow-listed (CheckURL, checked again on every connection); the allow-list and the
// signature are package egress, shared with alert webhooks.
package callout

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"

	"github.com/jobq/jobq/egress"
)

// The call-out's destination allow-list and request signature are package
// egress's (shared with alert webhooks); these names keep the call-out's
// own spelling of them.

// Request headers of a call-out (egress.HeaderTimestamp, egress.HeaderSignature).
const (
	HeaderTimestamp = egress.HeaderTimestamp
	HeaderSignature = egress.HeaderSignature
)

// MaxSkewDefault is egress.MaxSkewDefault.
const MaxSkewDefault = egress.MaxSkewDefault

// ErrBadSignature is egress.ErrBadSignature.
var ErrBadSignature = egress.ErrBadSignature

// DestinationError is a call-out destination the allow-list refuses.
type DestinationError = egress.DestinationError

// AllowLoopbackFlag is the operator flag that lets call-outs reach loopback.
const AllowLoopbackFlag = "--callout-allow-loopback"

// Refusal rules (egress's, with the call-out's flag in RuleLoopback).
const (
	RuleScheme    = egress.RuleScheme
	RuleMetadata  = egress.RuleMetadata
	RuleLinkLocal = egress.RuleLinkLocal
	RuleLoopback  = egress.RuleLoopbackPrefix + AllowLoopbackFlag
	RuleUnspec    = egress.RuleUnspec
	RuleResolve   = egress.RuleResolve
	RuleUserinfo  = egress.RuleUserinfo
)

func policy(allowLoopback bool, r *net.Resolver) egress.Policy {
	return egress.Policy{AllowLoopback: allowLoopback, AllowFlag: AllowLoopbackFlag, Resolver: r}
}

// Sign is egress.Sign.
func Sign(secret []byte, timestamp string, body []byte) string {
	return egress.Sign(secret, timestamp, body)
}

// Verify is egress.Verify: what an endpoint written in Go runs before it
// trusts a call-out.
func Verify(secret []byte, h http.Header, body []byte, now time.Time, maxSkew time.Duration) error {
	return egress.Verify(secret, h, body, now, maxSkew)
}

// CheckIP applies the call-out's allow-list to one address.
func CheckIP(ip netip.Addr, allowLoopback bool) error { return policy(allowLoopback, nil).CheckIP(ip) }

// CheckURL applies the call-out's allow-list to a binding's URL (see
// egress.Policy.CheckURL); r nil is net.DefaultResolver.
func CheckURL(ctx context.Context, raw string, allowLoopback bool, r *net.Resolver) error {
	return policy(allowLoopback, r).CheckURL(ctx, raw)
}

// DialControl is a net.Dialer Control refusing what CheckIP refuses.
func DialControl(allowLoopback bool) func(network, address string, c syscall.RawConn) error {
	return policy(allowLoopback, nil).DialControl()
}
