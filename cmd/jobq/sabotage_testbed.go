//go:build testbed

package main

// SabotageFlags is --sabotage, compiled only into the testbed build
// (go build -tags testbed; make chaos-sabotage builds bin/jobq-testbed).
type SabotageFlags struct {
	Sabotage []string `help:"Testbed build only: disable a guarantee (on this replica; with chaos, on every replica) to prove the checker catches it: fencing, cas-guard, rescuer, deadlock-retry, lease-cancel, outcome-retry, unblock-outside-tx (workflow children unblocked after the parent's completion transaction, unfenced)." enum:"fencing,cas-guard,rescuer,deadlock-retry,lease-cancel,outcome-retry,unblock-outside-tx" sep:","`
}

func (f SabotageFlags) switches() []string { return f.Sabotage }
