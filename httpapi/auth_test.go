package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/jobq/jobq/httpapi"
)

const (
	tokenA = "tokA-0123456789abcdef"
	tokenB = "tokB-fedcba9876543210=="
)

// TestBearerAuth checks the optional bearer-token middleware: every /v1
// request needs one of the tokens, probes stay open, a refused request
// writes nothing and says how to authenticate.
func TestBearerAuth(t *testing.T) {
	h, st := newRobustAPI(t, httpapi.Options{AuthTokens: []string{tokenA, tokenB}})
	body := []byte(`{"job_key":"auth-1","job_type":"noop"}`)
	hdr := func(v string) http.Header { return http.Header{"Authorization": {v}} }
	refused := []struct {
		name    string
		header  http.Header
		invalid bool // a token was given (error="invalid_token")
	}{
		{"no header", nil, false},
		{"empty bearer", hdr("Bearer "), false},
		{"basic scheme", hdr("Basic " + tokenA), false},
		{"token without scheme", hdr(tokenA), false},
		{"wrong token", hdr("Bearer tokC-0123456789abcdef"), true},
		{"prefix of a token", hdr("Bearer " + tokenA[:len(tokenA)-1]), true},
		{"token plus a byte", hdr("Bearer " + tokenA + "x"), true},
		{"two tokens", hdr("Bearer " + tokenA + " " + tokenB), true},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			for _, req := range []struct{ method, path string }{{"POST", "/v1/jobs"}, {"GET", "/v1/jobs"}, {"GET", "/v1/jobs/1"}, {"GET", "/metrics"}} {
				rec := do(h, req.method, req.path, body, c.header)
				if rec.Code != http.StatusUnauthorized {
					t.Fatalf("%s %s: status %d, want 401", req.method, req.path, rec.Code)
				}
				ch := rec.Header().Get("WWW-Authenticate")
				if !strings.HasPrefix(ch, "Bearer ") || strings.Contains(ch, "invalid_token") != c.invalid {
					t.Errorf("WWW-Authenticate = %q (token given: %v)", ch, c.invalid)
				}
				e := decodeError(t, rec)
				if e.Code != "unauthenticated" || e.Field != "Authorization" || !strings.HasPrefix(e.Message, "Authorization:") {
					t.Errorf("error = %+v", e)
				}
				if strings.Contains(rec.Body.String(), "0123456789") || strings.Contains(rec.Body.String(), "fedcba") {
					t.Errorf("the 401 body echoes a token: %s", rec.Body.String())
				}
			}
			if n := jobRows(t, st); n != 0 {
				t.Fatalf("a refused request wrote %d rows", n)
			}
		})
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if rec := do(h, "GET", p, nil, nil); rec.Code != http.StatusOK {
			t.Errorf("GET %s without a token: status %d, want 200 (probes stay open)", p, rec.Code)
		}
	}
	if rec := do(h, "POST", "/v1/jobs", body, hdr("Bearer "+tokenA)); rec.Code != http.StatusCreated {
		t.Fatalf("first token: status %d, want 201: %s", rec.Code, rec.Body.String())
	}
	// The second token works too (rotation), and the scheme is case-insensitive.
	if rec := do(h, "POST", "/v1/jobs", body, hdr("bearer "+tokenB)); rec.Code != http.StatusOK {
		t.Fatalf("second token, same request: status %d, want 200: %s", rec.Code, rec.Body.String())
	}
	if n := jobRows(t, st); n != 1 {
		t.Fatalf("job_queue has %d rows, want 1", n)
	}
}

// TestNoAuthByDefault checks that without tokens the API is open (and so
// must listen on loopback, the default).
func TestNoAuthByDefault(t *testing.T) {
	h, _ := newRobustAPI(t, httpapi.Options{})
	if rec := do(h, "GET", "/v1/jobs", nil, nil); rec.Code != http.StatusOK {
		t.Fatalf("GET /v1/jobs without tokens configured: %d", rec.Code)
	}
}
