package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/store"
)

// A DSN without a database gets an error that says so, not a misleading
// "lock held" from GET_LOCK(CONCAT(NULL, …)).
func TestMigrateWithoutDatabaseSaysSo(t *testing.T) {
	srv := testdb.Server(t)
	st, err := store.Open(context.Background(), srv.DSN, store.PoolConfig{MaxOpen: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for name, run := range map[string]func() error{
		"up":     func() error { _, err := st.MigrateUp(context.Background()); return err },
		"status": func() error { _, err := st.MigrateStatus(context.Background()); return err },
	} {
		err := run()
		if !errors.Is(err, store.ErrNoDatabase) || !strings.Contains(err.Error(), "names no database") {
			t.Errorf("migrate %s on %q: err = %v, want ErrNoDatabase", name, srv.DSN, err)
		}
	}
}
