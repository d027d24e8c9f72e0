package main

import (
	"fmt"

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
}

// httpSabotage names the switches applied by an API decorator of the
// testbed build (SabotageFlags.wrapHandler), not by the scheduler.
var httpSabotage = map[string]bool{"remote-fencing": true}

// applySabotage turns on the named switches in sb.
func applySabotage(names []string, sb *scheduler.Sabotage) error {
	for _, n := range names {
		if httpSabotage[n] {
			continue
		}
		on, ok := sabotageSwitches[n]
		if !ok {
			return fmt.Errorf("--sabotage: unknown switch %q", n)
		}
		on(sb)
	}
	return nil
}
