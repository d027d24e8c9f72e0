package httpapi_test

import (
	"net"
	"os"
	"strings"
	"testing"

	"github.com/jobq/jobq/httpapi"
)

// Which Host headers a replica answers, by --listen and --allowed-host.
func TestHostPolicy(t *testing.T) {
	hn, _ := os.Hostname()
	var ifaceIP string
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() {
				ifaceIP = n.IP.String()
				break
			}
		}
	}
	cases := []struct {
		listen  string
		allowed []string
		host    string
		want    bool
	}{
		{"127.0.0.1:8080", nil, "127.0.0.1:8080", true},
		{"127.0.0.1:8080", nil, "127.9.9.9", true},
		{"127.0.0.1:8080", nil, "[::1]:8080", true},
		{"127.0.0.1:8080", nil, "localhost:8080", true},
		{"127.0.0.1:8080", nil, "LocalHost.", true},
		{"127.0.0.1:8080", nil, "x.localhost:8080", true},
		{"127.0.0.1:8080", nil, "", true}, // HTTP/1.0, no browser
		{"127.0.0.1:8080", nil, "evil.example:8080", false},
		{"127.0.0.1:8080", nil, "localhost.evil.example", false},
		{"127.0.0.1:8080", nil, "10.1.2.3:8080", false},
		{"10.1.2.3:8080", nil, "10.1.2.3:8080", true},
		{"10.1.2.3:8080", nil, "10.1.2.4:8080", false},
		{"jobq.corp:8080", nil, "JOBQ.corp:8080", true},
		{"jobq.corp:8080", nil, "other.corp:8080", false},
		{"127.0.0.1:8080", []string{"jobq-1"}, "jobq-1:8080", true},
		{"127.0.0.1:8080", []string{"*.svc.example"}, "a.b.svc.example", true},
		{"127.0.0.1:8080", []string{"*.svc.example"}, "svc.example", false},
		{"127.0.0.1:8080", []string{".svc.example"}, "x.svc.example", true},
		{"127.0.0.1:8080", []string{"*"}, "anything.example", true},
		{"127.0.0.1:8080", []string{"192.0.2.7"}, "192.0.2.7:8080", true},
		{"0.0.0.0:8080", nil, strings.ToUpper(hn) + ":8080", hn != ""},
		{"0.0.0.0:8080", nil, "evil.example", false},
		{":8080", nil, "evil.example", false},
	}
	if ifaceIP != "" {
		cases = append(cases, struct {
			listen  string
			allowed []string
			host    string
			want    bool
		}{"0.0.0.0:8080", nil, net.JoinHostPort(ifaceIP, "8080"), true})
	}
	for _, c := range cases {
		p, err := httpapi.NewHostPolicy(c.listen, c.allowed)
		if err != nil {
			t.Fatalf("NewHostPolicy(%q, %q): %v", c.listen, c.allowed, err)
		}
		if got := p.Allows(c.host); got != c.want {
			t.Errorf("listen %s allowed %q: Host %q allowed = %v, want %v", c.listen, c.allowed, c.host, got, c.want)
		}
	}
	for _, bad := range []string{"a b", "http://x", "x..y", "-x"} {
		if _, err := httpapi.NewHostPolicy("127.0.0.1:8080", []string{bad}); err == nil {
			t.Errorf("--allowed-host %q accepted", bad)
		}
	}
}
