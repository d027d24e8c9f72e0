package console_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	_ "github.com/go-sql-driver/mysql"

	"github.com/jobq/jobq/app"
	"github.com/jobq/jobq/internal/testdb"
)

// A job's page offers only the actions that apply to its status — Cancel
// while it is not finished, Retry when FAILED or CANCELED, neither when
// SUCCESS — and a SUCCESS job's last_error (an earlier attempt's) is shown
// as history, not in the error style.
func TestConsoleJobPageOffersOnlyValidActions(t *testing.T) {
	t.Parallel()
	dsn := testdb.DSN(t)
	r, err := app.Start(context.Background(), app.Config{DSN: dsn, Listen: "127.0.0.1:0", NoScheduler: true, Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const oldErr = "flaky: attempt 1 of the first 1 fails by design"
	ids := map[string]int64{}
	for _, status := range []string{"WAITING", "RUNNING", "SUCCESS", "FAILED", "CANCELED"} {
		res, err := db.Exec(`INSERT INTO job_queue (job_key, job_type, params, request_hash, status, run_at, attempt, last_error, create_time, update_time)
			VALUES (?, 'flaky', '{}', REPEAT('0', 64), ?, NOW(6), 2, ?, NOW(6), NOW(6))`, "k-"+status, status, oldErr)
		if err != nil {
			t.Fatal(err)
		}
		ids[status], _ = res.LastInsertId()
	}
	cancelBtn, retryBtn := regexp.MustCompile(`<button[^>]*id="cancel"`), regexp.MustCompile(`<button[^>]*id="retry"`)
	errStyled := regexp.MustCompile(`<td class="err-text" id="last-error">`)
	for _, tc := range []struct {
		status                    string
		cancel, retry, errorStyle bool
	}{
		{"WAITING", true, false, true},
		{"RUNNING", true, false, true},
		{"SUCCESS", false, false, false},
		{"FAILED", false, true, true},
		{"CANCELED", false, true, true},
	} {
		resp, body := call(t, "GET", fmt.Sprintf("http://%s/ui/jobs/%d", r.Addr, ids[tc.status]), nil, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s job page: %d", tc.status, resp.StatusCode)
		}
		if got := cancelBtn.MatchString(body); got != tc.cancel {
			t.Errorf("%s job: Cancel offered %v, want %v", tc.status, got, tc.cancel)
		}
		if got := retryBtn.MatchString(body); got != tc.retry {
			t.Errorf("%s job: Retry offered %v, want %v", tc.status, got, tc.retry)
		}
		if got := errStyled.MatchString(body); got != tc.errorStyle {
			t.Errorf("%s job: last_error in the error style %v, want %v", tc.status, got, tc.errorStyle)
		}
		if !strings.Contains(body, oldErr) {
			t.Errorf("%s job: last_error not shown", tc.status)
		}
	}
}
