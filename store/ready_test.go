package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/store"
)

// TestSchemaCheck: serve and /readyz accept exactly this binary's set of
// migrations and name the fix otherwise.
func TestSchemaCheck(t *testing.T) {
	ctx := context.Background()
	st := testdb.Store(t)
	if err := st.SchemaCheck(ctx); err != nil {
		t.Fatalf("fully migrated: %v", err)
	}
	if err := st.Ready(ctx); err != nil {
		t.Fatalf("Ready on a writable, migrated server: %v", err)
	}
	exec := func(q string) {
		t.Helper()
		if _, err := st.DB().ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(what, want string) {
		t.Helper()
		err := st.SchemaCheck(ctx)
		if !errors.Is(err, store.ErrSchemaMismatch) || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: err = %v, want ErrSchemaMismatch naming %q", what, err, want)
		}
		var nr *store.NotReadyError
		if rerr := st.Ready(ctx); !errors.As(rerr, &nr) || nr.Check != "schema" {
			t.Fatalf("%s: Ready = %v, want the schema check to fail", what, rerr)
		}
	}
	all, err := store.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	// A gap in the middle (not only the newest) counts: the sets must be equal.
	exec("DELETE FROM jobq_schema_migrations WHERE version = 2")
	expect("one migration missing", "002_operations are not applied; run `jobq migrate up`")
	exec("INSERT INTO jobq_schema_migrations (version, name, applied_at) VALUES (2, 'operations', NOW(6)), (999, 'future', NOW(6))")
	expect("a migration this binary does not know", "migrations 999 that this binary does not know; run the newer jobq binary")
	exec("DELETE FROM jobq_schema_migrations WHERE version = 999")
	if err := st.SchemaCheck(ctx); err != nil {
		t.Fatalf("restored (%d migrations): %v", len(all), err)
	}
	exec("DROP TABLE jobq_schema_migrations")
	expect("no schema", "the database has no jobq schema; run `jobq migrate up`")
}
