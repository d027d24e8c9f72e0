// Package egress is what every outgoing HTTP request of a replica obeys —
// the call-out executor's calls (package callout) and alert webhooks
// (package alert): the destination allow-list (CheckURL, checked again on
// every connection by DialControl) and the request signature (Sign,
// Verify). It imports only the standard library.
package egress

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
)

// DestinationError is a destination the allow-list refuses; Rule says
// which rule.
type DestinationError struct {
	Rule string
}

func (e *DestinationError) Error() string { return "url: " + e.Rule }

// Refusal rules.
const (
	RuleScheme    = "must be an http or https URL with a host"
	RuleMetadata  = "cloud metadata addresses are refused (169.254.169.254, fd00:ec2::254, 100.100.100.200, metadata.google.internal)"
	RuleLinkLocal = "link-local addresses are refused (169.254.0.0/16, fe80::/10)"
	// RuleLoopbackPrefix starts the loopback rule; the flag that allows
	// loopback follows (Policy.AllowFlag).
	RuleLoopbackPrefix = "loopback addresses are refused unless the replica runs with "
	RuleUnspec         = "unspecified and multicast addresses are refused"
	RuleResolve        = "the host does not resolve"
	RuleUserinfo       = "must not carry credentials (user:password@)"
)

var metadataHosts = map[string]bool{
	"metadata.google.internal": true, "metadata.goog": true, "metadata": true,
	"instance-data": true, "instance-data.ec2.internal": true, "metadata.azure.com": true,
}

var metadataIPs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("100.100.100.200"), netip.MustParseAddr("169.254.170.2"),
}

var linkLocal4 = netip.MustParsePrefix("169.254.0.0/16")

// Policy is one user's allow-list: the call-out executor's, the alerts'.
type Policy struct {
	// AllowLoopback lets destinations be loopback addresses (127.0.0.0/8,
	// ::1, localhost). Defaults to false.
	AllowLoopback bool
	// AllowFlag is the operator flag that sets AllowLoopback, named in the
	// loopback rule (e.g. "--callout-allow-loopback").
	AllowFlag string
	// Resolver resolves destination hosts (nil: net.DefaultResolver).
	Resolver *net.Resolver
}

// LoopbackRule is the loopback rule's text for flag.
func LoopbackRule(flag string) string { return RuleLoopbackPrefix + flag }

// CheckIP applies the allow-list to one address.
func (p Policy) CheckIP(ip netip.Addr) error {
	allowLoopback := p.AllowLoopback
	ip = ip.Unmap()
	for _, m := range metadataIPs {
		if ip == m {
			return &DestinationError{Rule: RuleMetadata}
		}
	}
	switch {
	case linkLocal4.Contains(ip) || ip.IsLinkLocalUnicast():
		return &DestinationError{Rule: RuleLinkLocal}
	case ip.IsLoopback() && !allowLoopback:
		return &DestinationError{Rule: LoopbackRule(p.AllowFlag)}
	case ip.IsUnspecified() || ip.IsMulticast() || ip.IsLinkLocalMulticast():
		return &DestinationError{Rule: RuleUnspec}
	}
	return nil
}

// CheckURL applies the allow-list to a destination URL: scheme http or
// https, no credentials, no metadata host name, and every address its host
// resolves to (with p.Resolver) allowed by CheckIP. The same addresses are
// checked again on every connection (DialControl), so a name that later
// resolves elsewhere (DNS rebinding) is refused then. A refusal is a
// *DestinationError.
func (p Policy) CheckURL(ctx context.Context, raw string) error {
	allowLoopback, r := p.AllowLoopback, p.Resolver
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.Opaque != "" {
		return &DestinationError{Rule: RuleScheme}
	}
	if u.User != nil {
		return &DestinationError{Rule: RuleUserinfo}
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if metadataHosts[host] {
		return &DestinationError{Rule: RuleMetadata}
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return p.CheckIP(ip)
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		if !allowLoopback {
			return &DestinationError{Rule: LoopbackRule(p.AllowFlag)}
		}
	}
	if r == nil {
		r = net.DefaultResolver
	}
	ips, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return &DestinationError{Rule: RuleResolve}
	}
	for _, ip := range ips {
		if err := p.CheckIP(ip); err != nil {
			return err
		}
	}
	return nil
}

// DialControl is a net.Dialer Control that refuses a connection to an
// address CheckIP refuses: it runs after the name was resolved, on the
// address actually dialled.
func (p Policy) DialControl() func(network, address string, c syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return err
		}
		ip, err := netip.ParseAddr(host)
		if err != nil {
			return fmt.Errorf("dial %s: not an IP address", address)
		}
		if err := p.CheckIP(ip); err != nil {
			return fmt.Errorf("connection to %s refused: %w", address, err)
		}
		return nil
	}
}
