package demo

import (
	"context"
	"testing"

	"github.com/jobq/jobq/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// TestRescuedExample: the console showcase names the lowest-id job whose
// LEASE_EXPIRED attempt was followed by a SUCCESS one, with both replicas;
// a job rescued but not (yet) succeeded is not an example.
func TestRescuedExample(t *testing.T) {
	ctx := context.Background()
	db := testdb.Store(t).DB()

	got, err := RescuedExample(ctx, db)
	if err != nil || got != nil {
		t.Fatalf("empty table: got %+v, %v; want nil, nil", got, err)
	}

	rows := []struct {
		job     int
		attempt int
		owner   string
		outcome string
	}{
		{5, 1, "replica-2", "LEASE_EXPIRED"}, // rescued, then failed: not an example
		{5, 2, "replica-1", "FAILED"},
		{7, 1, "replica-1", "FAILED"},
		{7, 2, "replica-2", "LEASE_EXPIRED"},
		{7, 3, "replica-3", "SUCCESS"},
		{9, 1, "replica-2", "LEASE_EXPIRED"},
		{9, 2, "replica-1", "SUCCESS"},
	}
	for _, r := range rows {
		if _, err := db.ExecContext(ctx, `INSERT INTO job_execution (job_id, attempt, owner, started_at, finished_at, outcome)
			VALUES (?, ?, ?, NOW(6), NOW(6), ?)`, r.job, r.attempt, r.owner, r.outcome); err != nil {
			t.Fatal(err)
		}
	}
	got, err = RescuedExample(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	want := Rescued{JobID: 7, Attempt: 2, Killed: "replica-2", Survivor: "replica-3"}
	if got == nil || *got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}
