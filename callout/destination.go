package callout

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
)

// DestinationError is a call-out destination the allow-list refuses; Rule
// says which rule.
type DestinationError struct {
	Rule string
}

func (e *DestinationError) Error() string { return "url: " + e.Rule }

// Refusal rules.
const (
	RuleScheme    = "must be an http or https URL with a host"
	RuleMetadata  = "cloud metadata addresses are refused (169.254.169.254, fd00:ec2::254, 100.100.100.200, metadata.google.internal)"
	RuleLinkLocal = "link-local addresses are refused (169.254.0.0/16, fe80::/10)"
	RuleLoopback  = "loopback addresses are refused unless the replica runs with --callout-allow-loopback"
	RuleUnspec    = "unspecified and multicast addresses are refused"
	RuleResolve   = "the host does not resolve"
	RuleUserinfo  = "must not carry credentials (user:password@)"
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

// CheckIP applies the allow-list to one address.
func CheckIP(ip netip.Addr, allowLoopback bool) error {
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
		return &DestinationError{Rule: RuleLoopback}
	case ip.IsUnspecified() || ip.IsMulticast() || ip.IsLinkLocalMulticast():
		return &DestinationError{Rule: RuleUnspec}
	}
	return nil
}

// CheckURL applies the allow-list to a binding's URL: scheme http or https,
// no credentials, no metadata host name, and every address its host
// resolves to (with r; nil is net.DefaultResolver) allowed by CheckIP. The
// same addresses are checked again on every connection (DialControl), so a
// name that later resolves elsewhere (DNS rebinding) is refused then.
func CheckURL(ctx context.Context, raw string, allowLoopback bool, r *net.Resolver) error {
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
		return CheckIP(ip, allowLoopback)
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		if !allowLoopback {
			return &DestinationError{Rule: RuleLoopback}
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
		if err := CheckIP(ip, allowLoopback); err != nil {
			return err
		}
	}
	return nil
}

// DialControl is a net.Dialer Control that refuses a connection to an
// address CheckIP refuses: it runs after the name was resolved, on the
// address actually dialled.
func DialControl(allowLoopback bool) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return err
		}
		ip, err := netip.ParseAddr(host)
		if err != nil {
			return fmt.Errorf("callout: dial %s: not an IP address", address)
		}
		if err := CheckIP(ip, allowLoopback); err != nil {
			return fmt.Errorf("callout: connection to %s refused: %w", address, err)
		}
		return nil
	}
}
