package client

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestWorkerMovesToTheNextServer: a worker whose first replica refuses
// connections fetches from the next one of Servers.
func TestWorkerMovesToTheNextServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	fetched := make(chan struct{}, 1)
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/workers/fetch" {
			select {
			case fetched <- struct{}{}:
			default:
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jobs":[]}`)
	}))
	defer live.Close()
	w, err := NewWorker(WorkerConfig{Server: dead, Servers: []string{live.URL}, WorkerID: "w1", PollWait: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	w.Register("t", func(ctx context.Context, job *WorkerJob) (any, error) { return nil, nil })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case <-fetched:
	case <-time.After(10 * time.Second):
		t.Fatal("no fetch reached the second server")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
