package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/store"
)

// Opening a database that does not exist says how to create it; nothing
// listening on the address says so.
func TestOpenSaysWhatToDo(t *testing.T) {
	cfg, err := mysql.ParseDSN(testdb.Server(t).DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = "jobq_no_such_database"
	_, err = store.Open(context.Background(), cfg.FormatDSN(), store.PoolConfig{MaxOpen: 1})
	if err == nil || !strings.Contains(err.Error(), `the database "jobq_no_such_database" does not exist: create it first`) ||
		!strings.Contains(err.Error(), "CREATE DATABASE jobq_no_such_database") {
		t.Fatalf("unknown database: err = %v", err)
	}
	_, err = store.Open(context.Background(), "root@tcp(127.0.0.1:1)/jobq", store.PoolConfig{MaxOpen: 1})
	if err == nil || !strings.Contains(err.Error(), "nothing listens on 127.0.0.1:1") {
		t.Fatalf("refused connection: err = %v", err)
	}
}
