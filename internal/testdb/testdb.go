// Package testdb gives each test its own freshly migrated database on one
// shared server from dbprovider (JOBQ_DSN, Docker, or a throwaway local
// mariadbd), dropped at cleanup, so tests can run in parallel.
package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/jobq/jobq/store"
	"github.com/jobq/jobq/testbed/dbprovider"
)

var (
	once   sync.Once
	srv    *dbprovider.Server
	srvErr error
)

// Main runs the package's tests and stops a server the provider started,
// then exits with the tests' code. Call it from TestMain; a TestMain with
// its own cleanup calls Run instead (deferred calls do not run past
// os.Exit). Goroutine leaks are checked (goleak) after the tests pass.
func Main(m *testing.M, leakOpts ...goleak.Option) {
	os.Exit(Run(m, leakOpts...))
}

// Run is Main without the exit: it returns the exit code for TestMain to
// pass to os.Exit once its own cleanup is done.
func Run(m *testing.M, leakOpts ...goleak.Option) int {
	return finish(m.Run(), leakOpts)
}

// finish stops a server the provider started and, when the tests passed,
// checks for leaked goroutines; it returns the exit code.
func finish(code int, leakOpts []goleak.Option) int {
	if srv != nil {
		_ = srv.Close()
	}
	if code == 0 {
		if err := goleak.Find(leakOpts...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	return code
}

// Server returns the shared server, failing the test when there is none.
func Server(t testing.TB) *dbprovider.Server {
	t.Helper()
	if _, err := provide(); err != nil {
		t.Fatalf("database provider: %v", err)
	}
	return srv
}

func provide() (*dbprovider.Server, error) {
	once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		srv, srvErr = dbprovider.Provide(ctx, dbprovider.Options{})
	})
	return srv, srvErr
}

// MainWithExampleDB is Main for a package whose Example functions read
// their database from JOBQ_DSN, as a user's program would: it creates an
// empty database jobq_example_<random> on the shared server, points
// JOBQ_DSN at it (the provider ignores a DSN's database name, so the tests'
// server is unchanged), runs the tests and examples, and drops it.
func MainWithExampleDB(m *testing.M, leakOpts ...goleak.Option) {
	s, err := provide()
	if err != nil {
		fmt.Fprintf(os.Stderr, "database provider: %v\n", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	dsn, drop, err := s.CreateDatabase(ctx, "jobq_example")
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "create example database: %v\n", err)
		os.Exit(1)
	}
	os.Setenv("JOBQ_DSN", dsn)
	code := m.Run()
	if err := drop(); err != nil {
		fmt.Fprintf(os.Stderr, "drop example database: %v\n", err)
	}
	os.Exit(finish(code, leakOpts))
}

// DSN creates a fresh database jobq_test_<random>, applies every
// migration, drops it at cleanup and returns its DSN.
func DSN(t testing.TB) string {
	t.Helper()
	s := Server(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn, drop, err := s.CreateDatabase(ctx, "jobq_test")
	if err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Logf("drop test database: %v", err)
		}
	})
	st, err := store.Open(ctx, dsn, store.PoolConfig{MaxOpen: 4})
	if err != nil {
		t.Fatalf("open test database: %v", err)
	}
	defer st.Close()
	if _, err := st.MigrateUp(ctx); err != nil {
		t.Fatalf("migrate test database: %v", err)
	}
	return dsn
}

// Store opens a store on a fresh database (see DSN), closed at cleanup.
func Store(t testing.TB) *store.Store {
	t.Helper()
	dsn := DSN(t)
	st, err := store.Open(context.Background(), dsn, store.PoolConfig{MaxOpen: 40})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// ServerWide serializes the tests, in every package and process sharing
// the test server, that hold a transaction idle on purpose and watch the
// server's own transaction tables (information_schema.INNODB_TRX joined to
// PROCESSLIST) for it: run at the same time, two of them each stopped
// seeing their own held transaction (seen with the idle-transaction reaper
// test and the overlapping-batch test in one `make test`). It takes the
// server's advisory lock name (GET_LOCK, on a connection of its own, for
// up to 5 minutes) and releases it at cleanup.
func ServerWide(t testing.TB, st *store.Store, name string) {
	t.Helper()
	ctx := context.Background()
	conn, err := st.DB().Conn(ctx)
	if err != nil {
		t.Fatalf("server-wide lock %s: %v", name, err)
	}
	var got int
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 300)", name).Scan(&got); err != nil || got != 1 {
		conn.Close()
		t.Fatalf("server-wide lock %s: GET_LOCK = %d, %v", name, got, err)
	}
	t.Cleanup(func() {
		_, _ = conn.ExecContext(context.Background(), "DO RELEASE_LOCK(?)", name)
		conn.Close()
	})
}

// HandlerReads sums the session's Handler_read_* counters: on a *sql.Conn,
// or on a *sql.DB whose pool holds one connection.
func HandlerReads(t testing.TB, conn interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}) int64 {
	t.Helper()
	rows, err := conn.QueryContext(context.Background(), "SHOW SESSION STATUS LIKE 'Handler_read%'")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var sum int64
	for rows.Next() {
		var name string
		var v int64
		if err := rows.Scan(&name, &v); err != nil {
			t.Fatal(err)
		}
		sum += v
	}
	return sum
}
