//go:build testbed

package main

import (
	"database/sql"
	"log/slog"
	"net/http"
	"slices"

	"github.com/jobq/jobq/testbed/sabotage"
)

// SabotageFlags is --sabotage, compiled only into the testbed build
// (go build -tags testbed; make chaos-sabotage builds bin/jobq-testbed).
type SabotageFlags struct {
	Sabotage []string `help:"Testbed build only: disable a guarantee (on this replica; with chaos, on every replica) to prove the checker catches it: fencing, cas-guard, rescuer, deadlock-retry, lease-cancel, outcome-retry, remote-fencing." enum:"fencing,cas-guard,rescuer,deadlock-retry,lease-cancel,outcome-retry,remote-fencing" sep:","`
}

func (f SabotageFlags) switches() []string { return f.Sabotage }

// wrapHandler is the API decorator of the HTTP-level switches
// (remote-fencing: testbed/sabotage.RemoteCompletionUnfenced), nil when
// none is on.
func (f SabotageFlags) wrapHandler(log *slog.Logger) func(http.Handler, *sql.DB) http.Handler {
	if !slices.Contains(f.Sabotage, sabotage.RemoteFencing) {
		return nil
	}
	return func(h http.Handler, db *sql.DB) http.Handler { return sabotage.RemoteCompletionUnfenced(h, db, log) }
}
