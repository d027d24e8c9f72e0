package console_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/jobq/jobq/alert"
	"github.com/jobq/jobq/app"
)

// TestConsoleAlertsPage lists the alert rules (none, then the one created
// through the API) and says when no delivery was made yet.
func TestConsoleAlertsPage(t *testing.T) {
	base := startReplica(t, app.Config{Alerts: alert.Config{AllowLoopback: true,
		Secrets: map[string][]byte{alert.SecretDefault: []byte("alert-secret-0123456789")}}})
	resp, body := call(t, "GET", base+"/ui/alerts", nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="no-alert-rules"`) {
		t.Fatalf("empty alerts page: %d\n%s", resp.StatusCode, body)
	}
	req, _ := http.NewRequest("POST", base+"/v1/alerts", strings.NewReader(
		`{"name":"boom-failed","job_type":"boom","condition":"job_failed","url":"http://127.0.0.1:9/hook","preset":"feishu"}`))
	r, err := http.DefaultClient.Do(req)
	if err != nil || r.StatusCode != http.StatusCreated {
		t.Fatalf("create rule: %v %v", r, err)
	}
	r.Body.Close()
	resp, body = call(t, "GET", base+"/ui/alerts", nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `data-rule="boom-failed"`) || !strings.Contains(body, "feishu") ||
		!strings.Contains(body, `id="no-alert-deliveries"`) || !strings.Contains(body, `href="/ui/alerts" class="on"`) {
		t.Fatalf("alerts page: %d\n%s", resp.StatusCode, body)
	}
}
