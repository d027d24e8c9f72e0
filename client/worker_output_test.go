package client

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestWorkerRefusedOutputFailsWithoutRetry: a success the replica refuses
// with 413 (an output over 64 KiB) is sent again as a failure with retry
// false and the replica's message: every attempt would give the same.
func TestWorkerRefusedOutputFailsWithoutRetry(t *testing.T) {
	const msg = "output: must be at most 65536 bytes of JSON, got 70011"
	var mu sync.Mutex
	var completions []map[string]any
	done := make(chan struct{})
	fetched := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/workers/fetch" {
			mu.Lock()
			again := fetched
			fetched = true
			mu.Unlock()
			if again {
				// A long poll with nothing to give: it answers when the
				// test has what it waits for, or the worker goes away.
				select {
				case <-done:
				case <-r.Context().Done():
				}
				_, _ = io.WriteString(w, `{"jobs":[]}`)
				return
			}
		}
		mu.Lock()
		defer mu.Unlock()
		switch r.URL.Path {
		case "/v1/workers/fetch":
			_, _ = io.WriteString(w, `{"jobs":[{"id":3,"job_key":"k3","job_type":"t","params":{},"attempt":1,`+
				`"lease_ms":30000,"heartbeat_ms":10000,"task_token":"jqt1.3.1.secret"}]}`)
		case "/v1/workers/complete":
			var body map[string]any
			_ = json.NewDecoder(r.Body).Decode(&body)
			completions = append(completions, body)
			if len(completions) == 1 {
				w.WriteHeader(http.StatusRequestEntityTooLarge)
				_, _ = io.WriteString(w, `{"error":{"code":"too_large","field":"output","message":"`+msg+`"}}`)
				return
			}
			_, _ = io.WriteString(w, `{"result":"applied","job_id":3,"attempt":1,"status":"FAILED"}`)
			close(done)
		case "/v1/workers/complete:batch":
			// A replica without the batch route: the worker completes one
			// job per call.
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"no such route"}}`)
		default:
			_, _ = io.WriteString(w, `{"results":[]}`)
		}
	}))
	defer srv.Close()
	w, err := NewWorker(WorkerConfig{Server: srv.URL, WorkerID: "w1", PollWait: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	w.Register("t", func(ctx context.Context, job *WorkerJob) (any, error) {
		return map[string]string{"data": strings.Repeat("x", 70000)}, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("no second completion")
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	got := completions[1]
	if got["outcome"] != "failure" || got["retry"] != false || got["error"] != msg {
		t.Fatalf("second completion %v, want a failure with retry false and error %q", got, msg)
	}
}
