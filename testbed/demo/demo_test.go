package demo

import (
	"context"
	"testing"

	"github.com/jobq/jobq"
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

// TestKillAccount: the summary explains why the leases rescued from the
// killed replica differ from the RUNNING jobs it was counted with, from its
// job_execution rows: of 4 runs counted, 3 were rescued (LEASE_EXPIRED) and
// 1 finished between the count and the kill; 1 run claimed in that gap was
// rescued too. The demo used to print "it held 63 RUNNING jobs" then "62
// leases rescued" with no word on the difference.
func TestKillAccount(t *testing.T) {
	ctx := context.Background()
	db := testdb.Store(t).DB()
	for _, r := range []struct {
		job, attempt   int
		owner, outcome string
	}{
		{1, 1, "replica-2", "LEASE_EXPIRED"},
		{2, 1, "replica-2", "LEASE_EXPIRED"},
		{3, 2, "replica-2", "LEASE_EXPIRED"},
		{4, 1, "replica-2", "SUCCESS"},       // counted RUNNING, finished before the kill
		{5, 1, "replica-2", "LEASE_EXPIRED"}, // claimed after the count
		{6, 1, "replica-2", "SUCCESS"},       // long before the kill
		{7, 1, "replica-1", "LEASE_EXPIRED"}, // another replica's
		{3, 1, "replica-2", "FAILED"},        // an earlier attempt of a counted job
	} {
		if _, err := db.ExecContext(ctx, `INSERT INTO job_execution (job_id, attempt, owner, started_at, finished_at, outcome)
			VALUES (?, ?, ?, NOW(6), NOW(6), ?)`, r.job, r.attempt, r.owner, r.outcome); err != nil {
			t.Fatal(err)
		}
	}
	ki := &killInfo{name: "replica-2", running: 4, held: []jobq.Fence{{ID: 1, Attempt: 1}, {ID: 2, Attempt: 1}, {ID: 3, Attempt: 2}, {ID: 4, Attempt: 1}}}
	if err := ki.account(ctx, db); err != nil {
		t.Fatal(err)
	}
	if ki.heldRescued != 3 || ki.claimedAfter != 1 || len(ki.heldEnded) != 1 || ki.heldEnded["SUCCESS"] != 1 {
		t.Fatalf("account: rescued %d, ended %v, claimed after %d; want 3, map[SUCCESS:1], 1", ki.heldRescued, ki.heldEnded, ki.claimedAfter)
	}
	want := "1 of the 4 ended (1 SUCCESS) between that count and the kill; 1 run claimed between that count and the kill was rescued too"
	if got := ki.difference(); got != want {
		t.Fatalf("difference = %q, want %q", got, want)
	}
	s := &Summary{Jobs: 7, ByStatus: map[string]int{"SUCCESS": 7}, Rescued: 5}
	if got, want := s.Verdict(ki), "HA held: 0 lost, 0 stuck, 0 duplicate effects (transactional); replica-2 SIGKILLed with 4 jobs running, 5 leases rescued ("+want+"); 7 of 7 jobs SUCCESS"; got != want {
		t.Fatalf("verdict:\n got %q\nwant %q", got, want)
	}
	// The same runs counted and rescued: nothing to explain.
	same := &killInfo{name: "replica-2", running: 4, held: []jobq.Fence{{ID: 1, Attempt: 1}, {ID: 2, Attempt: 1}, {ID: 3, Attempt: 2}, {ID: 5, Attempt: 1}}}
	if err := same.account(ctx, db); err != nil {
		t.Fatal(err)
	}
	if d := same.difference(); d != "" || same.heldRescued != 4 {
		t.Fatalf("same runs: difference %q, rescued %d; want \"\", 4", d, same.heldRescued)
	}
}
