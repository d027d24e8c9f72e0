package testdb

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/go-sql-driver/mysql"
	"github.com/rs/zerolog"
)

// Link is a TCP proxy (toxiproxy, in process) between a test and the
// database server, on which a test adds latency: a slow replica's link.
type Link struct {
	proxy *toxiproxy.Proxy
	mu    sync.Mutex
	n     int
}

// SlowLink starts a proxy to dsn's server and returns it with dsn rewritten
// to go through it. The proxy stops at cleanup.
func SlowLink(t testing.TB, dsn string) (*Link, string) {
	t.Helper()
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, fmt.Sprintf("link-%d", time.Now().UnixNano()), "127.0.0.1:0", c.Addr)
	if err := p.Start(); err != nil {
		t.Fatalf("proxy: %v", err)
	}
	t.Cleanup(p.Stop)
	c.Net, c.Addr = "tcp", p.Listen
	return &Link{proxy: p}, c.FormatDSN()
}

// Latency adds d each way (2d per round trip) until the returned func is
// called.
func (l *Link) Latency(t testing.TB, d time.Duration) (undo func()) {
	t.Helper()
	l.mu.Lock()
	l.n++
	base := fmt.Sprintf("latency-%d", l.n)
	l.mu.Unlock()
	var names []string
	for _, stream := range []string{"upstream", "downstream"} {
		name := base + "-" + stream
		body := fmt.Sprintf(`{"name":%q,"type":"latency","stream":%q,"toxicity":1,"attributes":{"latency":%s,"jitter":0}}`,
			name, stream, strconv.FormatInt(d.Milliseconds(), 10))
		if _, err := l.proxy.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
			t.Fatalf("add latency: %v", err)
		}
		names = append(names, name)
	}
	var once sync.Once
	undo = func() {
		once.Do(func() {
			for _, n := range names {
				_ = l.proxy.Toxics.RemoveToxic(context.Background(), n)
			}
		})
	}
	t.Cleanup(undo)
	return undo
}
