package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
)

// A session holds an every-second schedule's row for 4 s (as a replica
// frozen inside its fire, or an operator's open transaction, would) while
// two healthy replicas fire it: every instant, during the hold too, is
// enqueued and run exactly once — none is lost as a misfire because the
// replicas waited on the lock.
func TestOpsPeriodicHeldRowLosesNoInstant(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	ctx := context.Background()
	next := mustCron(t, "* * * * * *")
	p, created, err := st.PeriodicUpsert(ctx, jobq.PeriodicSpec{Name: "tick", Cron: "* * * * * *", JobType: "noop",
		Params: "{}", MaxRetry: 3, Misfire: jobq.MisfireSkip, Source: jobq.PeriodicSourceAPI}, next)
	if err != nil || !created {
		t.Fatalf("upsert: created=%v err=%v", created, err)
	}
	first := p.NextRunAt
	reg := scheduler.NewRegistry()
	reg.Register("noop", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error { return nil }))
	var reps []*scheduler.Scheduler
	for _, owner := range []string{"p1", "p2"} {
		reps = append(reps, startScheduler(t, st, reg, fastConfig(owner)))
	}
	events(t).WaitUntil(t, "the first instant run", func(evs []scheduler.Event) bool {
		return succeededKeys(evs)[jobq.PeriodicKey("tick", first)]
	}, slowWait)

	// The holder: a separate session that locks the schedule row and keeps
	// it for 4 s.
	conn, err := st.DB().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var heldFrom time.Time
	if err := tx.QueryRowContext(ctx, "SELECT UTC_TIMESTAMP(6) FROM periodic_job WHERE name = 'tick' FOR UPDATE").Scan(&heldFrom); err != nil {
		t.Fatalf("lock the schedule row: %v", err)
	}
	<-time.After(4 * time.Second) // the fault: the row stays locked this long
	var heldTo time.Time
	if err := tx.QueryRowContext(ctx, "SELECT UTC_TIMESTAMP(6)").Scan(&heldTo); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	t.Logf("row held %s – %s", heldFrom.Format(time.RFC3339Nano), heldTo.Format(time.RFC3339Nano))

	end := heldTo.Truncate(time.Second).Add(3 * time.Second) // two instants after the release
	events(t).WaitUntil(t, "an instant 3 s after the release run", func(evs []scheduler.Event) bool {
		return succeededKeys(evs)[jobq.PeriodicKey("tick", end)]
	}, slowWait)
	for _, s := range reps {
		if err := s.Stop(); err != nil {
			t.Fatalf("stop: %v", err)
		}
	}
	instants := periodicInstantsOf(t, st, "tick", false) // each run at most once
	var lost []string
	i := 0
	for at := first; !at.After(end); at = at.Add(time.Second) {
		for i < len(instants) && instants[i].Before(at) {
			i++
		}
		if i == len(instants) || !instants[i].Equal(at) {
			lost = append(lost, at.Format(time.RFC3339))
		}
	}
	if len(lost) > 0 {
		t.Fatalf("%d instants between %s and %s have no job (lost while the row was held): %v",
			len(lost), first.Format(time.RFC3339), end.Format(time.RFC3339), lost)
	}
}
