package httpapi

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/auth"
)

// HostPolicy decides which Host headers a replica answers. A web page can
// point a name it controls at 127.0.0.1 (DNS rebinding): the browser then
// sends the page's own name as Host and treats the replica as that page's
// origin, so the cross-origin check passes. Refusing every Host that is not
// one of the replica's own names closes that door.
type HostPolicy struct {
	any   bool
	names map[string]bool // lower case, no trailing dot
	ips   []net.IP
	sufx  []string // ".example.com" for "*.example.com" or ".example.com"
}

// NewHostPolicy returns the Host headers a replica listening on listen
// (the --listen address; host "" or an unspecified address means every
// interface) answers: "localhost" and names under ".localhost", loopback
// addresses, the listen host (a name or an address; with every interface,
// each interface's address and this machine's host name) and the names in
// allowed (--allowed-host: a name, "*.example.com" or ".example.com" for
// the names under example.com, or "*" for any Host). An entry of allowed
// that is not a host name fails.
func NewHostPolicy(listen string, allowed []string) (*HostPolicy, error) {
	p := &HostPolicy{names: map[string]bool{"localhost": true}}
	host := listen
	if h, _, err := net.SplitHostPort(listen); err == nil {
		host = h
	}
	host = normHost(host)
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok {
					p.ips = append(p.ips, n.IP)
				}
			}
		}
		if hn, err := os.Hostname(); err == nil && hn != "" {
			p.names[normHost(hn)] = true
		}
	} else if ip != nil {
		p.ips = append(p.ips, ip)
	} else {
		p.names[host] = true
	}
	for _, a := range allowed {
		a = normHost(strings.TrimSpace(a))
		switch {
		case a == "*":
			p.any = true
		case strings.HasPrefix(a, "*.") || strings.HasPrefix(a, "."):
			s := a[strings.IndexByte(a, '.'):]
			if !validHostName(s[1:]) {
				return nil, fmt.Errorf("allowed host %q: not a host name", a)
			}
			p.sufx = append(p.sufx, s)
		case net.ParseIP(a) != nil:
			p.ips = append(p.ips, net.ParseIP(a))
		case validHostName(a):
			p.names[a] = true
		default:
			return nil, fmt.Errorf("allowed host %q: not a host name, address, *.domain or *", a)
		}
	}
	return p, nil
}

// Allows reports whether a request whose Host header is hostport (with or
// without a port) may be answered. An empty Host (HTTP/1.0 clients) is
// allowed: browsers always send one.
func (p *HostPolicy) Allows(hostport string) bool {
	if p.any || hostport == "" {
		return true
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = normHost(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	if ip := net.ParseIP(host); ip != nil {
		if ip.IsLoopback() {
			return true
		}
		for _, a := range p.ips {
			if a.Equal(ip) {
				return true
			}
		}
		return false
	}
	if p.names[host] || strings.HasSuffix(host, ".localhost") {
		return true
	}
	for _, s := range p.sufx {
		if strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

func normHost(h string) string {
	if i := strings.IndexByte(h, '%'); i >= 0 && strings.Contains(h, ":") {
		h = h[:i] // an IPv6 zone
	}
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

func validHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// RequireHost wraps next (the replica's whole handler: HTTP API, gRPC,
// gRPC-Web, Connect, console and /metrics) so that a request whose Host
// header p does not allow gets 403 forbidden naming Host, in the API's
// error format, and reaches nothing. /healthz and /readyz stay open, as
// they do without a token: probes address a replica by whatever name their
// platform gives it, and the answers reveal nothing.
func RequireHost(p *HostPolicy, log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.Allows(r.Host) || auth.ProbePath(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		log.Warn("request for a foreign Host refused", "method", r.Method, "path", r.URL.Path, "host", r.Host, "remote", r.RemoteAddr)
		writeJSON(w, http.StatusForbidden, apitype.ErrorBody{Error: apitype.ErrorDetail{Code: "forbidden", Field: "Host",
			Message: fmt.Sprintf("Host: %q is not a name this replica serves (loopback names and addresses, the --listen address, and --allowed-host names are)", r.Host)}})
	})
}
