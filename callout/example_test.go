package callout_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/callout"
)

// endpoint is the sample endpoint of docs/workers.md: it verifies the
// signature before it trusts the body, and answers 401 otherwise.
func endpoint(secret []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		if err := callout.Verify(secret, r.Header, body, time.Now(), callout.MaxSkewDefault); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		// The job (callout.Request) is in body: do the work, then answer its
		// output — or 202 and complete it later with its task_token.
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
}

func post(t *testing.T, url string, body []byte, ts, sig string) int {
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set(callout.HeaderTimestamp, ts)
	req.Header.Set(callout.HeaderSignature, sig)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestSampleEndpointVerifies: the sample endpoint takes a signed request
// and refuses a bad signature, a tampered body, another secret and a stale
// timestamp.
func TestSampleEndpointVerifies(t *testing.T) {
	secret := []byte("callout-secret-0123456789")
	srv := httptest.NewServer(endpoint(secret))
	defer srv.Close()
	body := []byte(`{"job_id":1,"attempt":1}`)
	now := strconv.FormatInt(time.Now().Unix(), 10)
	old := strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10)
	for _, tc := range []struct {
		name     string
		body     []byte
		ts, sig  string
		wantCode int
	}{
		{"signed", body, now, callout.Sign(secret, now, body), 200},
		{"bad signature", body, now, "v1=" + fmt.Sprintf("%064x", 7), 401},
		{"tampered body", []byte(`{"job_id":2,"attempt":1}`), now, callout.Sign(secret, now, body), 401},
		{"other secret", body, now, callout.Sign([]byte("another-secret-0123456789"), now, body), 401},
		{"stale timestamp", body, old, callout.Sign(secret, old, body), 401},
		{"no signature", body, now, "", 401},
	} {
		if got := post(t, srv.URL, tc.body, tc.ts, tc.sig); got != tc.wantCode {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.wantCode)
		}
	}
}

// ExampleSign: the same value as Python's
// hmac.new(secret, b"1764547200." + body, hashlib.sha256).hexdigest().
func ExampleSign() {
	body := []byte(`{"job_id":17}`)
	fmt.Println(callout.Sign([]byte("callout-secret-0123456789"), "1764547200", body))
	// Output: v1=e26bfd79749451956e259ede6617ebac730e2533f5d38abd71f404d0a0bdcf64
}

// TestPythonSampleVerifies: the Python snippet of docs/workers.md
// (testdata/verify.py) accepts what Sign produces and refuses a bad
// signature and a tampered body.
func TestPythonSampleVerifies(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	secret := "callout-secret-0123456789"
	body := []byte(`{"job_id":1,"attempt":1}`)
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	good := callout.Sign([]byte(secret), ts, body)
	for _, tc := range []struct {
		name, sig string
		body      []byte
		want      string
	}{
		{"signed", good, body, "ok"},
		{"bad signature", "v1=" + fmt.Sprintf("%064x", 7), body, "bad"},
		{"tampered body", good, []byte(`{"job_id":2,"attempt":1}`), "bad"},
	} {
		out, err := exec.Command(py, "testdata/verify.py", secret, ts, tc.sig, hex.EncodeToString(tc.body)).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != tc.want {
			t.Errorf("%s: %q, %v; want %s", tc.name, out, err, tc.want)
		}
	}
}
