package main

import "github.com/jobq/jobq/demo"

// DemoCmd runs the demo.
type DemoCmd struct {
	Jobs     int  `help:"Jobs to submit." default:"1000"`
	Replicas int  `help:"jobq serve processes." default:"3"`
	NoKill   bool `help:"Do not SIGKILL a replica."`
	Keep     bool `help:"Keep the demo database (and print its DSN)."`
}

// Run runs the demo; it fails when any job is lost or left non-terminal.
func (c *DemoCmd) Run(g *Globals) error {
	return demo.Run(g.Ctx, demo.Options{Jobs: c.Jobs, Replicas: c.Replicas, Kill: !c.NoKill, Keep: c.Keep})
}
