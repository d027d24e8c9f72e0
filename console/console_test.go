package console_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/jobq/jobq/app"
	"github.com/jobq/jobq/internal/testdb"
)

// startReplica runs an in-process replica (API and console, no scheduler)
// on a fresh database.
func startReplica(t *testing.T, cfg app.Config) string {
	t.Helper()
	cfg.DSN, cfg.Listen, cfg.NoScheduler = testdb.DSN(t), "127.0.0.1:0", true
	r, err := app.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start replica: %v", err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	return "http://" + r.Addr
}

// noRedirect is a client that returns redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func call(t *testing.T, method, u string, form url.Values, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	t.Cleanup(noRedirect.CloseIdleConnections)
	return resp, string(b)
}

// TestConsoleAnswersBadInputInThePage checks that bad ids, filters, form
// values, unknown types, schedules and paths get an HTML page with the
// API's status code and a message, never a blank page or a 500.
func TestConsoleAnswersBadInputInThePage(t *testing.T) {
	base := startReplica(t, app.Config{})
	cases := []struct {
		method, path string
		form         url.Values
		status       int
		says         string
	}{
		{"GET", "/ui/jobs/abc", nil, 400, `id: must be a positive integer, got &#34;abc&#34;`},
		{"GET", "/ui/jobs/0", nil, 400, `id: must be a positive integer`},
		{"GET", "/ui/jobs/42", nil, 404, `job 42 not found`},
		{"GET", "/ui/jobs?status=DONE", nil, 400, `status: must be one of BLOCKED, PARKED, SCHEDULED, WAITING, HELD, RUNNING, SUCCESS, FAILED, CANCELED, got &#34;DONE&#34;`},
		{"GET", "/ui/jobs?limit=0", nil, 400, `limit: must be an integer in [1, 1000], got &#34;0&#34;`},
		{"GET", "/ui/jobs?cursor=x", nil, 400, `cursor: must be a next_cursor value returned by a previous page`},
		{"GET", "/ui/jobs?key_prefix=%20x", nil, 400, `key_prefix: must not start or end with whitespace`},
		{"POST", "/ui/jobs/42/retry", url.Values{}, 404, `job 42 not found`},
		{"POST", "/ui/jobs/42/cancel", url.Values{}, 404, `job 42 not found`},
		{"POST", "/ui/types/nope/pause", url.Values{}, 400, `job_type: &#34;nope&#34; is not a registered job type`},
		{"POST", "/ui/types/noop/limit", url.Values{"max_running": {"many"}}, 400, `max_running: must be an integer in [0, 100000]`},
		{"POST", "/ui/types/noop/limit", url.Values{}, 400, `max_running: is required`},
		{"POST", "/ui/periodic", url.Values{"name": {"a b"}, "cron": {"@every 1m"}, "job_type": {"noop"}}, 400, `name: must hold only letters, digits`},
		{"POST", "/ui/periodic", url.Values{"name": {"n"}, "cron": {"@every 1m"}, "job_type": {"noop"}, "params": {"[1]"}}, 400, `params: must be a JSON object`},
		{"POST", "/ui/periodic", url.Values{"name": {"n"}, "cron": {"@every 1m"}, "job_type": {"noop"}, "priority": {"high"}}, 400, `priority: must be an integer, got &#34;high&#34;`},
		{"POST", "/ui/periodic", url.Values{"name": {"n"}, "cron": {"@every 1m"}, "job_type": {"noop"}, "overlap": {"sometimes"}}, 400, `overlap: must be one of allow, skip, queue_one, cancel_previous, got &#34;sometimes&#34;`},
		{"GET", "/ui/periodic/nightly", nil, 404, `schedule nightly not found and no ledger for it`},
		{"GET", "/ui/periodic/nightly?before=yesterday", nil, 400, `before:`},
		{"POST", "/ui/periodic/nightly/delete", url.Values{}, 404, `schedule &#34;nightly&#34; not found (removed meanwhile?)`},
		{"POST", "/ui/periodic/nightly/delete", url.Values{"confirm": {"yes"}}, 404, `schedule &#34;nightly&#34; not found (removed meanwhile?)`},
		{"GET", "/ui/nope", nil, 404, `There is no console page at /ui/nope.`},
	}
	for _, c := range cases {
		resp, body := call(t, c.method, base+c.path, c.form, nil)
		if resp.StatusCode != c.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
			!strings.Contains(body, `id="answer"`) || !strings.Contains(body, c.says) {
			t.Errorf("%s %s: status %d (%s), want %d with %q in the answer; body:\n%s", c.method, c.path,
				resp.StatusCode, resp.Header.Get("Content-Type"), c.status, c.says, body)
		}
	}
	// A reload of an action's URL goes back to the job.
	if resp, _ := call(t, "GET", base+"/ui/jobs/42/cancel", nil, nil); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/jobs/42" {
		t.Errorf("GET of an action: %d to %q, want 303 to /ui/jobs/42", resp.StatusCode, resp.Header.Get("Location"))
	}
	// Adding a schedule asks for confirmation first and writes nothing.
	resp, body := call(t, "POST", base+"/ui/periodic", url.Values{"name": {"n"}, "cron": {"@every 1m"}, "job_type": {"noop"}}, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Create schedule n?") {
		t.Errorf("add without confirm: %d, body:\n%s", resp.StatusCode, body)
	}
	if resp, _ := call(t, "GET", base+"/v1/periodic/n", nil, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("schedule written before confirmation: GET /v1/periodic/n = %d", resp.StatusCode)
	}
}

// TestConsoleAuthAndCrossOrigin checks sign-in with the API's tokens, the
// session cookie, the redirect target kept inside /ui/, and that cross-origin
// posts are refused.
func TestConsoleAuthAndCrossOrigin(t *testing.T) {
	const token = "console-unit-token-0123456789"
	base := startReplica(t, app.Config{AuthTokens: []string{token}})
	if resp, body := call(t, "GET", base+"/ui/types", nil, nil); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `name="token"`) ||
		!strings.Contains(body, `name="next" value="/ui/types"`) {
		t.Fatalf("no token: %d, want 401 with the sign-in form; body:\n%s", resp.StatusCode, body)
	}
	if resp, _ := call(t, "GET", base+"/ui/types", nil, map[string]string{"Authorization": "Bearer " + token}); resp.StatusCode != http.StatusOK {
		t.Fatalf("bearer header: %d, want 200", resp.StatusCode)
	}
	if resp, body := call(t, "POST", base+"/ui/login", url.Values{"token": {"wrong-token-wrong-token"}, "next": {"/ui/types"}}, nil); resp.StatusCode != http.StatusUnauthorized ||
		!strings.Contains(body, "This token is not accepted.") || len(resp.Cookies()) != 0 {
		t.Fatalf("wrong token: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	resp, _ := call(t, "POST", base+"/ui/login", url.Values{"token": {token}, "next": {"//evil.example/"}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("sign-in with an outside next: %d to %q, want 303 to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "jobq_console_token" {
			session = c
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.Path != "/ui/" {
		t.Fatalf("session cookie %+v, want HttpOnly, SameSite=Strict, Path=/ui/", session)
	}
	withCookie := map[string]string{"Cookie": session.Name + "=" + session.Value}
	if resp, body := call(t, "GET", base+"/ui/", nil, withCookie); resp.StatusCode != http.StatusOK || !strings.Contains(body, "Queue overview") {
		t.Fatalf("with the session cookie: %d", resp.StatusCode)
	}
	// The cookie opens the console, not the API.
	if resp, _ := call(t, "GET", base+"/v1/jobs", nil, withCookie); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("API with the console cookie: %d, want 401", resp.StatusCode)
	}
	crossSite := map[string]string{"Cookie": withCookie["Cookie"], "Sec-Fetch-Site": "cross-site"}
	if resp, _ := call(t, "POST", base+"/ui/types/noop/pause", url.Values{}, crossSite); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site pause: %d, want 403", resp.StatusCode)
	}
	if resp, body := call(t, "POST", base+"/ui/types/noop/pause", url.Values{}, withCookie); resp.StatusCode != http.StatusOK ||
		!strings.Contains(body, "type noop is paused") {
		t.Fatalf("same-site pause: %d", resp.StatusCode)
	}
}

// TestConsoleOff checks --no-ui: /ui/ is not served.
func TestConsoleOff(t *testing.T) {
	base := startReplica(t, app.Config{NoUI: true})
	if resp, body := call(t, "GET", base+"/ui/", nil, nil); resp.StatusCode != http.StatusNotFound || strings.Contains(body, "Queue overview") {
		t.Fatalf("--no-ui: GET /ui/ = %d", resp.StatusCode)
	}
}
