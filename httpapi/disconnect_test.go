package httpapi_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/jobq/jobq/httpapi"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/service"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A client that goes away before its answer (its request context is
// cancelled) is not a server fault: it is logged at debug as a client
// disconnect, never as ERROR "internal error … context canceled".
func TestClientDisconnectIsNotAnError(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := httpapi.New(service.New(service.Options{Store: st, KnownTypeFunc: func(string) bool { return true }}), httpapi.Options{Logger: log})
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/v1/jobs", ""},
		{"GET", "/v1/jobs/1", ""},
		{"POST", "/v1/jobs", `{"job_key":"gone","job_type":"noop"}`},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // the client hung up
		req := httptest.NewRequestWithContext(ctx, tc.method, tc.path, strings.NewReader(tc.body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code == http.StatusInternalServerError {
			t.Errorf("%s %s with the client gone: 500 %s", tc.method, tc.path, rec.Body)
		}
	}
	out := logs.String()
	if strings.Contains(out, "level=ERROR") {
		t.Errorf("a client disconnect logged as an error:\n%s", out)
	}
	if strings.Count(out, "client disconnected") != 3 || !strings.Contains(out, "level=DEBUG") {
		t.Errorf("want one debug line \"client disconnected\" per request, got:\n%s", out)
	}
}
