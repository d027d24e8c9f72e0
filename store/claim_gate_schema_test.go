package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/store"
)

// Reverting 020 while a claim holds a claim slot waits for that claim's
// COMMIT (the DROP needs the table's metadata lock), then leaves the jobs
// alone; SchemaCheck then refuses the schema naming 020, and a gated claim
// on it fails as a missing table (1146) rather than claiming. Applying 020
// again restores the gate: a gated claim takes the rest of the jobs.
func TestClaimGateMigrateDownAndUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	first, second, held, release := gatePair(t, 20, 1)
	steps := stepsFrom(t, 20)
	down := make(chan error, 1)
	go func() {
		v, err := second.MigrateDown(ctx, steps)
		if err == nil && (len(v) != steps || v[steps-1] != 20) {
			err = fmt.Errorf("reverted %v, want the steps down to and including 20", v)
		}
		down <- err
	}()
	waitMetadataLock(t, first)
	select {
	case err := <-down:
		t.Fatalf("migrate down ended (%v) while a claim held a claim slot", err)
	default:
	}
	release()
	if a := <-held; len(a) != 10 {
		t.Fatalf("held claim got %d jobs, want 10", len(a))
	}
	if err := <-down; err != nil {
		t.Fatalf("migrate down: %v", err)
	}
	err := second.SchemaCheck(ctx)
	if !errors.Is(err, store.ErrSchemaMismatch) || !strings.Contains(err.Error(), "020_claim_gate") {
		t.Fatalf("schema check without 020: %v, want ErrSchemaMismatch naming 020_claim_gate", err)
	}
	if _, err := second.JobClaimSkipLocked(ctx, jobq.ClaimParams{Owner: "b", Limit: 20, Lease: time.Minute, Slots: 1}); store.ErrorNumber(err) != 1146 {
		t.Fatalf("gated claim without claim_gate: %v, want error 1146", err)
	}
	if _, err := second.MigrateUp(ctx); err != nil {
		t.Fatalf("migrate up: %v", err)
	}
	if err := second.SchemaCheck(ctx); err != nil {
		t.Fatalf("schema check after up: %v", err)
	}
	got, err := second.JobClaimSkipLocked(ctx, jobq.ClaimParams{Owner: "b", Limit: 20, Lease: time.Minute, Slots: 64})
	if err != nil || len(got) != 10 {
		t.Fatalf("gated claim after up: %d jobs, %v; want the 10 left", len(got), err)
	}
}

// waitMetadataLock returns once a statement of st's database waits for a
// table's metadata lock (information_schema.PROCESSLIST), failing after
// 30 s.
func waitMetadataLock(t *testing.T, st *store.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		var n int
		err := st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
WHERE DB = DATABASE() AND STATE LIKE 'Waiting for table metadata lock%'`).Scan(&n)
		if err != nil {
			t.Fatalf("waiting for a statement in a metadata lock wait: %v", err)
		}
		if n > 0 {
			return
		}
	}
}
