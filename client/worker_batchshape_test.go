package client

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq/apitype"
)

// TestWorkerBatchAnswerWithoutResultsSendsAlone: the handler reads the
// fetched job's parents; a 200 answer to a batch
// completion that holds no result per completion (a proxy that rewrote the
// body, a replica that answered another shape) cannot be matched to the
// completions sent; each is sent again alone by the single route, where a
// repeat of an applied outcome answers "applied".
func TestWorkerBatchAnswerWithoutResultsSendsAlone(t *testing.T) {
	var mu sync.Mutex
	var batches int
	var singles []map[string]any
	done := make(chan struct{})
	quit := make(chan struct{}) // closed when the test ends, whatever its result
	fetched := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/workers/fetch" {
			mu.Lock()
			again := fetched
			fetched = true
			mu.Unlock()
			if again {
				select {
				case <-done:
				case <-quit:
				case <-r.Context().Done():
				}
				_, _ = io.WriteString(w, `{"jobs":[]}`)
				return
			}
			_, _ = io.WriteString(w, `{"jobs":[{"id":7,"job_key":"k7","job_type":"t","params":{},"attempt":1,`+
				`"lease_ms":30000,"heartbeat_ms":10000,"task_token":"jqt1.7.1.secret",`+
				`"parents":[{"job_id":5,"job_key":"build","status":"SUCCESS","output":{"image":"app:1"}}]}]}`)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		switch r.URL.Path {
		case "/v1/workers/complete:batch":
			batches++
			_, _ = io.WriteString(w, `{"results":[]}`)
		case "/v1/workers/complete":
			var body map[string]any
			_ = json.NewDecoder(r.Body).Decode(&body)
			singles = append(singles, body)
			_, _ = io.WriteString(w, `{"result":"applied","job_id":7,"attempt":1,"status":"SUCCESS"}`)
			close(done)
		default:
			_, _ = io.WriteString(w, `{"results":[]}`)
		}
	}))
	defer srv.Close()
	defer close(quit) // before srv.Close: no long poll outlives a failed test
	w, err := NewWorker(WorkerConfig{Server: srv.URL, WorkerID: "w1", PollWait: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	parents := make(chan []apitype.ParentOutput, 1)
	w.Register("t", func(ctx context.Context, job *WorkerJob) (any, error) {
		parents <- job.Parents
		return map[string]int{"n": 1}, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // before srv.Close: a failing test stops the worker first
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the completion was never sent alone")
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if ps := <-parents; len(ps) != 1 || ps[0].JobKey != "build" || ps[0].Status != "SUCCESS" || string(ps[0].Output) != `{"image":"app:1"}` {
		t.Fatalf("handler saw parents %+v, want build SUCCESS with its output", ps)
	}
	mu.Lock()
	defer mu.Unlock()
	if batches != 1 || len(singles) != 1 {
		t.Fatalf("%d batch calls and %d single calls, want 1 and 1", batches, len(singles))
	}
	if got := singles[0]; got["outcome"] != "success" || got["task_token"] != "jqt1.7.1.secret" {
		t.Fatalf("single completion %v, want the success with its token", got)
	}
}
