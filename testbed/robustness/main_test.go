// Package robustness holds jobq's fault tests that need more than one
// package: database outages on a throwaway mariadbd, lease renewal failing,
// a connection pool smaller than the worker pool, server detection, time
// zones and large tables. See docs/robustness.md.
package robustness

import (
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/jobq/jobq/internal/testdb"
)

func TestMain(m *testing.M) {
	if os.Getenv(replicaEnv) != "" {
		os.Exit(runReplica())
	}
	testdb.Main(m)
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
