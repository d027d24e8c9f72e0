package main

import (
	"github.com/jobq/jobq/testbed/chaos/remoteworker"
)

// ChaosWorkerCmd is the chaos testbed's Go worker, started by `jobq chaos
// --executor remote` (hidden: not a product command).
type ChaosWorkerCmd struct {
	Exec bool `help:"Run one job as jobq work's command (the job from JOBQ_JOB_* variables) instead of a worker."`
}

// Run runs the worker until SIGTERM, or one job with --exec.
func (c *ChaosWorkerCmd) Run(g *Globals) error {
	if c.Exec {
		return remoteworker.Exec(g.Ctx)
	}
	return remoteworker.Run(g.Ctx, g.Log)
}
