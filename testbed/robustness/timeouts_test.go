package robustness

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/jobq/jobq/app"
	"github.com/jobq/jobq/internal/testdb"
)

// TestServerTimeoutsCloseSlowClients: a client that never finishes its
// headers (slow loris), one that sends headers but never its body, and an
// idle keep-alive connection are each cut off by the API server's
// ReadHeaderTimeout, ReadTimeout and IdleTimeout, and nothing is written.
func TestServerTimeoutsCloseSlowClients(t *testing.T) {
	t.Parallel()
	dsn := testdb.DSN(t)
	const (
		header = 300 * time.Millisecond
		read   = 600 * time.Millisecond
		idle   = 400 * time.Millisecond
	)
	r, err := app.Start(context.Background(), app.Config{
		DSN: dsn, Listen: "127.0.0.1:0", NoScheduler: true, Logger: quiet(),
		ReadHeaderTimeout: header, ReadTimeout: read, IdleTimeout: idle,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop(context.Background())

	// closedWithin dials, sends prefix, then waits for the server to close
	// the connection; it returns how long that took after the write.
	closedWithin := func(t *testing.T, prefix string, limit time.Duration) time.Duration {
		t.Helper()
		c, err := net.Dial("tcp", r.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, prefix); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_ = c.SetReadDeadline(time.Now().Add(limit))
		buf := make([]byte, 4096)
		for {
			_, err := c.Read(buf)
			if err == nil {
				continue // a response (e.g. 408) before the close is fine
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("connection still open %s after %q", limit, prefix)
			}
			return time.Since(start)
		}
	}
	t.Run("slow headers", func(t *testing.T) {
		d := closedWithin(t, "POST /v1/jobs HTTP/1.1\r\nHost: localhost\r\n", 5*time.Second)
		t.Logf("closed after %s (ReadHeaderTimeout %s)", d, header)
	})
	t.Run("missing body", func(t *testing.T) {
		d := closedWithin(t, "POST /v1/jobs HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"job_key\":", 5*time.Second)
		t.Logf("closed after %s (ReadTimeout %s)", d, read)
	})
	t.Run("idle keep-alive", func(t *testing.T) {
		d := closedWithin(t, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n", 5*time.Second)
		t.Logf("closed after %s (IdleTimeout %s)", d, idle)
	})
	var n int
	if err := r.Store.DB().QueryRow("SELECT COUNT(*) FROM job_queue").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("job_queue rows = %d, want 0", n)
	}
}
