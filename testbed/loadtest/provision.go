package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jobq/jobq/internal/redact"
	"github.com/jobq/jobq/store"
	"github.com/jobq/jobq/testbed/dbprovider"
	"github.com/jobq/jobq/testbed/replica"
)

// ProvisionConfig configures a self-provisioned setup.
type ProvisionConfig struct {
	// Replicas is how many `jobq serve` processes to start. Defaults to 3.
	Replicas int
	// Binary is the jobq executable. Defaults to this process's.
	Binary string
	// ServeArgs are extra `jobq serve` flags for every replica.
	ServeArgs []string
	// DSN is a server-level DSN (the --dsn flag); empty lets dbprovider
	// choose (JOBQ_DSN, Docker, a local server).
	DSN string
	// Keep keeps the database (its DSN is printed to Log) and the replica
	// logs (their folder too).
	Keep bool
	// Log receives what was provisioned. Defaults to os.Stderr.
	Log io.Writer
}

// Cluster is a provisioned database with replicas serving it.
type Cluster struct {
	DSN      string   // the jobq database
	Targets  []string // the replicas' API base URLs
	Server   string   // which database server (provider description)
	LogDir   string   // replica logs: removed by Close unless ProvisionConfig.Keep
	replicas []*replica.Replica
	keepLogs bool
	log      io.Writer
	srv      *dbprovider.Server
	drop     func() error
}

// Provision gets a server from dbprovider (JOBQ_DSN, Docker, or a local
// mariadbd), creates and migrates a fresh database jobq_loadtest_<random>
// and starts cfg.Replicas `jobq serve` processes on free loopback ports.
// Close stops them and drops the database.
func Provision(ctx context.Context, cfg ProvisionConfig) (c *Cluster, err error) {
	if cfg.Replicas <= 0 {
		cfg.Replicas = 3
	}
	if cfg.Log == nil {
		cfg.Log = os.Stderr
	}
	if cfg.Binary == "" {
		if cfg.Binary, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	c = &Cluster{keepLogs: cfg.Keep, log: cfg.Log}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if c.srv, err = dbprovider.Provide(ctx, dbprovider.Options{DSN: cfg.DSN, Log: cfg.Log}); err != nil {
		return nil, err
	}
	c.Server = c.srv.Description
	if c.DSN, c.drop, err = c.srv.CreateDatabase(ctx, "jobq_loadtest"); err != nil {
		return nil, err
	}
	if cfg.Keep {
		fmt.Fprintf(cfg.Log, "loadtest database kept: %s\n", redact.DSN(c.DSN))
		c.drop = nil
	}
	st, err := store.Open(ctx, c.DSN, store.PoolConfig{MaxOpen: 2})
	if err != nil {
		return nil, err
	}
	_, err = st.MigrateUp(ctx)
	st.Close()
	if err != nil {
		return nil, err
	}
	if c.LogDir, err = os.MkdirTemp("", "jobq-loadtest-"); err != nil {
		return nil, err
	}
	for i := 1; i <= cfg.Replicas; i++ {
		r, err := replica.Start(ctx, replica.Spec{Binary: cfg.Binary, DSN: c.DSN, Name: fmt.Sprintf("replica-%d", i),
			LogDir: c.LogDir, Args: cfg.ServeArgs})
		if err != nil {
			return nil, err
		}
		c.replicas = append(c.replicas, r)
		c.Targets = append(c.Targets, r.URL())
	}
	fmt.Fprintf(cfg.Log, "provisioned: %s; %d replicas %v (logs in %s)\n", c.Server, len(c.replicas), c.Targets, c.LogDir)
	return c, nil
}

// Close stops the replicas (SIGTERM, SIGKILL after 15 s), drops the
// database and removes the replica logs unless kept (--keep: it says where
// they are), and releases the server.
func (c *Cluster) Close() error {
	for _, r := range c.replicas {
		r.Stop(15 * time.Second)
	}
	var errs []error
	if c.drop != nil {
		errs = append(errs, c.drop())
	}
	if c.srv != nil {
		errs = append(errs, c.srv.Close())
	}
	if c.LogDir != "" {
		if c.keepLogs {
			fmt.Fprintf(c.log, "replica logs kept in %s\n", c.LogDir)
		} else {
			errs = append(errs, os.RemoveAll(c.LogDir))
		}
	}
	return errors.Join(errs...)
}
