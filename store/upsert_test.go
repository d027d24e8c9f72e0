package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
)

// The upserts take their new values from repeated parameters, the one
// spelling MySQL 8 (VALUES() deprecated) and MariaDB (no row alias) both
// take: a second write updates the row, and a periodic schedule keeps its
// cursor while its cron expression is unchanged and restarts it when the
// expression changes. (`make test` runs this in the MySQL dialect too.)
func TestUpsertsUpdateTheExistingRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testdb.Store(t)
	for _, paused := range []bool{true, false, true} {
		tc, err := st.TypeSetPaused(ctx, "ty", paused)
		if err != nil || tc.Paused != paused {
			t.Fatalf("TypeSetPaused(%v) = %+v, %v", paused, tc, err)
		}
	}
	for _, limit := range []int{3, 7} {
		tc, err := st.TypeSetLimit(ctx, "ty", limit)
		if err != nil || tc.MaxRunning != limit || !tc.Paused {
			t.Fatalf("TypeSetLimit(%d) = %+v, %v; want the limit and paused kept", limit, tc, err)
		}
	}
	first := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	spec := jobq.PeriodicSpec{Name: "p", Cron: "* * * * *", JobType: "noop", Params: `{"a":1}`, Priority: 1, MaxRetry: 2,
		TimeoutMs: 100, Misfire: jobq.MisfireSkip, Source: jobq.PeriodicSourceAPI}
	p, created, err := st.PeriodicUpsert(ctx, spec, func(time.Time) time.Time { return first })
	if err != nil || !created || !p.NextRunAt.Equal(first) {
		t.Fatalf("create: %+v created %v, %v", p, created, err)
	}
	spec.Params, spec.Priority = `{"a":2}`, 5
	p, created, err = st.PeriodicUpsert(ctx, spec, func(time.Time) time.Time { return first.Add(time.Hour) })
	if err != nil || created || !p.NextRunAt.Equal(first) || string(p.Params) != `{"a":2}` || p.Priority != 5 {
		t.Fatalf("same cron: %+v created %v, %v; want params and priority updated, cursor kept", p, created, err)
	}
	spec.Cron = "*/5 * * * *"
	p, created, err = st.PeriodicUpsert(ctx, spec, func(time.Time) time.Time { return first.Add(2 * time.Hour) })
	if err != nil || created || !p.NextRunAt.Equal(first.Add(2*time.Hour)) || p.Cron != "*/5 * * * *" {
		t.Fatalf("new cron: %+v created %v, %v; want the cursor restarted", p, created, err)
	}
}
