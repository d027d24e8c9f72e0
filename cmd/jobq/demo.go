package main

import "github.com/jobq/jobq/testbed/demo"

// DemoCmd runs the demo.
type DemoCmd struct {
	DSN        string `help:"Server-level DSN to create the demo database on, e.g. root@tcp(127.0.0.1:3306)/. Without it: $JOBQ_DSN, else a Docker engine (mysql:8.4 through testcontainers), else a throwaway local mariadbd/mysqld." placeholder:"DSN"`
	Jobs       int    `help:"Jobs to submit." default:"1000"`
	Replicas   int    `help:"jobq serve processes." default:"3"`
	NoKill     bool   `help:"Do not SIGKILL a replica."`
	Keep       bool   `help:"Keep the demo database (and print its DSN)."`
	NoProgress bool   `help:"No progress bars (they are drawn only when stderr is a terminal)."`
	Console    bool   `help:"After the summary, submit a job that fails twice then succeeds and one that fails, print the web console's URLs (/ui/) and keep the replicas running until Ctrl-C."`
}

// Run runs the demo; it fails when any job is lost or left non-terminal, or
// a transactional effect is duplicated.
func (c *DemoCmd) Run(g *Globals) error {
	return demo.Run(g.Ctx, demo.Options{Jobs: c.Jobs, Replicas: c.Replicas, Kill: !c.NoKill, Keep: c.Keep, DSN: c.DSN, NoProgress: c.NoProgress, Console: c.Console})
}
