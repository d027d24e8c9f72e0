package main

import (
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/jobq/jobq/testbed/faultstore"

	"github.com/jobq/jobq/scheduler"
)

// sabotageSwitches names the scheduler's sabotage switches as
// `--sabotage` spells them. The flag itself exists only in the testbed
// build (sabotage_testbed.go, go build -tags testbed): a production
// `jobq serve` cannot be told to break its guarantees.
var sabotageSwitches = map[string]func(*scheduler.Sabotage){
	"fencing":        func(s *scheduler.Sabotage) { s.NoFencing = true },
	"cas-guard":      func(s *scheduler.Sabotage) { s.NoCASGuard = true },
	"rescuer":        func(s *scheduler.Sabotage) { s.NoRescuer = true },
	"deadlock-retry": func(s *scheduler.Sabotage) { s.NoDeadlockRetry = true },
	"lease-cancel":   func(s *scheduler.Sabotage) { s.NoLeaseCancel = true },
	"outcome-retry":  func(s *scheduler.Sabotage) { s.NoOutcomeRetry = true },
	// unblock-outside-tx is a store decorator (wrapStoreFor), not a
	// scheduler switch.
	"unblock-outside-tx": func(*scheduler.Sabotage) {},
}

// wrapStoreFor returns the store decorator the sabotage switches ask for
// (testbed/faultstore.UnblockOutsideTx), or nil for none.
func wrapStoreFor(names []string) func(scheduler.Store) scheduler.Store {
	if !slices.Contains(names, "unblock-outside-tx") {
		return nil
	}
	return func(st scheduler.Store) scheduler.Store {
		db, ok := st.(interface{ DB() *sql.DB })
		if !ok {
			return st
		}
		return &faultstore.UnblockOutsideTx{Store: st, DB: db.DB(), Gap: 30 * time.Millisecond}
	}
}

// applySabotage turns on the named switches in sb.
func applySabotage(names []string, sb *scheduler.Sabotage) error {
	for _, n := range names {
		on, ok := sabotageSwitches[n]
		if !ok {
			return fmt.Errorf("--sabotage: unknown switch %q", n)
		}
		on(sb)
	}
	return nil
}
