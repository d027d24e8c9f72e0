package loadtest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/httpapi"
	"github.com/jobq/jobq/service"
)

// k6Call is `http.METHOD(` followed by a template literal URL.
var k6Call = regexp.MustCompile("http\\.(get|post|put|patch|del)\\(\\s*`([^`]+)`")

var templateExpr = regexp.MustCompile(`\$\{[^}]*\}`)

// k6Requests returns "METHOD /path" for every request a script makes, with
// the base URL dropped, the query cut and ${…} path segments set to 1.
func k6Requests(t *testing.T, src string) []string {
	var out []string
	for _, m := range k6Call.FindAllStringSubmatch(src, -1) {
		u := m[2]
		if !strings.HasPrefix(u, "${") {
			t.Fatalf("request URL %q does not start with a ${target} base", u)
		}
		u = u[strings.Index(u, "}")+1:]
		u, _, _ = strings.Cut(u, "?")
		method := map[string]string{"get": "GET", "post": "POST", "put": "PUT", "patch": "PATCH", "del": "DELETE"}[m[1]]
		out = append(out, method+" "+templateExpr.ReplaceAllString(u, "1"))
	}
	return out
}

// TestK6Scripts checks every script under k6/ parses as an ES module
// (node --check on an .mjs copy: k6 scripts are ES modules) and that every
// request it makes hits a route jobq's HTTP API serves: the real handler
// must answer, not the router's "no such route" 404 or 405.
func TestK6Scripts(t *testing.T) {
	scripts, _ := filepath.Glob("k6/*.js")
	if len(scripts) == 0 {
		t.Fatal("no k6 scripts under loadtest/k6")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is required to check the k6 scripts parse: ", err)
	}
	st := testdbStore(t)
	h := httpapi.New(service.New(service.Options{Store: st, KnownTypeFunc: func(string) bool { return true }}), httpapi.Options{ReadyFunc: st.Ping})
	for _, path := range scripts {
		t.Run(filepath.Base(path), func(t *testing.T) {
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			mjs := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(path), ".js")+".mjs")
			if err := os.WriteFile(mjs, src, 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(node, "--check", mjs).CombinedOutput(); err != nil {
				t.Fatalf("node --check %s: %v\n%s", path, err, out)
			}
			reqs := k6Requests(t, string(src))
			if !contains(strings.Join(reqs, "\n"), "POST /v1/jobs") {
				t.Errorf("requests %v: the script must submit (POST /v1/jobs)", reqs)
			}
			for _, r := range reqs {
				method, p, _ := strings.Cut(r, " ")
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(method, p, strings.NewReader("{}")))
				if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") || unrouted(rec) {
					t.Errorf("%s: no such route in httpapi (HTTP %d, %s: %q)", r, rec.Code, ct, rec.Body.String())
				}
			}
			t.Logf("%s: parses; requests %v all routed", path, reqs)
		})
	}
}

// TestK6RequestsNegative makes sure the route check can fail.
func TestK6RequestsNegative(t *testing.T) {
	reqs := k6Requests(t, "http.get(`${t}/v1/nope/${id}?x=1`); http.post(`${base}/v1/jobs`, body)")
	if strings.Join(reqs, ",") != "GET /v1/nope/1,POST /v1/jobs" {
		t.Fatalf("k6Requests = %v", reqs)
	}
	h := httpapi.New(nil, httpapi.Options{})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/nope/1", nil))
	if !unrouted(rec) {
		t.Fatalf("unknown route not told apart (%d %q): the route check would pass anything", rec.Code, rec.Body.String())
	}
}

// unrouted reports whether the API answered that it has no such route
// (404 "no such route" or 405 method_not_allowed, in its JSON error format)
// rather than a handler's own answer (a 404 for a job that does not exist
// is routed).
func unrouted(rec *httptest.ResponseRecorder) bool {
	var eb apitype.ErrorBody
	if json.Unmarshal(rec.Body.Bytes(), &eb) != nil {
		return false
	}
	return eb.Error.Code == "method_not_allowed" ||
		(rec.Code == http.StatusNotFound && strings.Contains(eb.Error.Message, "no such route"))
}
