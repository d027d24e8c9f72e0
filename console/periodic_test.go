package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/app"
	"github.com/jobq/jobq/cronplan"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/store"
)

// The add form sets a schedule's overlap policy (confirmed first), the
// schedules table shows it, and the schedule's page lists its fire ledger
// newest first: the instants a fire skipped as misfires and the one it
// fired, linked to its job.
func TestConsolePeriodicOverlapAndLedger(t *testing.T) {
	ctx := context.Background()
	dsn := testdb.DSN(t)
	r, err := app.Start(ctx, app.Config{DSN: dsn, Listen: "127.0.0.1:0", NoScheduler: true})
	if err != nil {
		t.Fatalf("start replica: %v", err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	base := "http://" + r.Addr

	form := url.Values{"name": {"nightly"}, "cron": {"@every 1s"}, "job_type": {"noop"}, "overlap": {jobq.OverlapQueueOne}}
	if resp, body := call(t, "POST", base+"/ui/periodic", form, nil); resp.StatusCode != http.StatusOK ||
		!strings.Contains(body, "overlap queue_one") || !strings.Contains(body, `name="overlap" value="queue_one"`) {
		t.Fatalf("review: %d, want the confirmation with overlap queue_one; body:\n%s", resp.StatusCode, body)
	}
	form.Set("confirm", "yes")
	if resp, body := call(t, "POST", base+"/ui/periodic", form, nil); resp.StatusCode != http.StatusOK ||
		!strings.Contains(body, `<a href="/ui/periodic/nightly"`) || !strings.Contains(body, "<td>queue_one</td>") {
		t.Fatalf("create: %d, want the schedule listed with overlap queue_one; body:\n%s", resp.StatusCode, body)
	}

	// Fire it once from a cursor 5 s back with a 1 s threshold: the old
	// instants are skipped (misfire), the newest due ones fire.
	st, err := store.Open(ctx, dsn, store.PoolConfig{MaxOpen: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now, err := st.DBNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cursor := now.UTC().Truncate(time.Second).Add(-5 * time.Second)
	if _, err := st.DB().ExecContext(ctx, `UPDATE periodic_job SET next_run_at = ? WHERE name = 'nightly'`, cursor); err != nil {
		t.Fatal(err)
	}
	res, err := st.PeriodicFire(ctx, "nightly", func(p jobq.Periodic, now time.Time) jobq.PeriodicPlan {
		sched, _ := cronplan.Parse(p.Cron)
		return cronplan.PlanFire(sched, p.Misfire, time.Second, p.NextRunAt, now)
	})
	if err != nil || len(res.Inserted) == 0 || res.Skipped == 0 {
		t.Fatalf("fire: %+v, %v; want skipped and fired instants", res, err)
	}
	entries, err := st.FireHistory(ctx, jobq.FireHistoryParams{Name: "nightly", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	resp, body := call(t, "GET", base+"/ui/periodic/nightly", nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="fire-ledger"`) || !strings.Contains(body, "overlap queue_one") {
		t.Fatalf("schedule page: %d; body:\n%s", resp.StatusCode, body)
	}
	if got := strings.Count(body, `data-fate="`); got != len(entries) {
		t.Fatalf("schedule page lists %d ledger rows, the ledger has %d; body:\n%s", got, len(entries), body)
	}
	newest := entries[0]
	if !strings.Contains(body, `href="/ui/jobs/`) || !strings.Contains(body, `data-fate="skipped"`) ||
		strings.Index(body, `data-fate="`+newest.Fate+`"`) != strings.Index(body, `data-fate="`) {
		t.Fatalf("schedule page: want fired rows linked to their jobs, skipped rows, newest (%s) first; body:\n%s", newest.Fate, body)
	}
	if !strings.Contains(body, "misfire") {
		t.Fatalf("schedule page does not say why an instant was skipped; body:\n%s", body)
	}
}

// The job page shows a job's uniqueness window and that a newer job took
// its key.
func TestConsoleJobPageShowsUniquenessWindow(t *testing.T) {
	base := startReplica(t, app.Config{})
	submit := func() uint64 {
		t.Helper()
		resp, err := http.Post(base+"/v1/jobs", "application/json", strings.NewReader(
			`{"job_key":"w","job_type":"noop","run_at":"2099-01-01T00:00:00Z","unique_while":"active","unique_for_ms":3600000}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var j struct{ ID uint64 }
		if err := json.NewDecoder(resp.Body).Decode(&j); err != nil || j.ID == 0 {
			t.Fatalf("submit: %d, %v", resp.StatusCode, err)
		}
		return j.ID
	}
	first := submit()
	if resp, _ := call(t, "POST", fmt.Sprintf("%s/v1/jobs/%d/cancel", base, first), nil, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("cancel: %d", resp.StatusCode)
	}
	if second := submit(); second == first {
		t.Fatalf("resubmit after cancel answered job %d again", first)
	}
	_, body := call(t, "GET", fmt.Sprintf("%s/ui/jobs/%d", base, first), nil, nil)
	if !strings.Contains(body, `id="key-released"`) || !strings.Contains(body, "while not finished") || !strings.Contains(body, `id="unique-window">until `) {
		t.Fatalf("job page of the released job lacks its window or release; body:\n%s", body)
	}
}
