//go:build testbed

package main

import (
	"context"
	"database/sql"
	"log/slog"
	"net/http"
	"slices"

	"github.com/jobq/jobq/app"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/store"
	"github.com/jobq/jobq/testbed/chaos"
	"github.com/jobq/jobq/testbed/sabotage"
)

// TestbedFlags is --sabotage, compiled only into the testbed build
// (go build -tags testbed; make chaos-sabotage builds bin/jobq-testbed).
type TestbedFlags struct {
	Sabotage []string `help:"Testbed build only: disable a guarantee (on this replica; with chaos, on every replica) to prove the checker catches it: fencing, cas-guard, rescuer, deadlock-retry, lease-cancel, outcome-retry, remote-fencing, unblock-outside-tx (workflow children unblocked after the parent's completion transaction, unfenced), rate-window (a rate limit counted per replica, not across replicas), key-early-free (a concurrency key's next job admitted at the claim, uncounted)." enum:"fencing,cas-guard,rescuer,deadlock-retry,lease-cancel,outcome-retry,remote-fencing,unblock-outside-tx,rate-window,key-early-free" sep:","`
}

func (f TestbedFlags) switches() []string { return f.Sabotage }

// applyServe runs a sabotaged replica: the scheduler over the sabotage
// decorator of the store; with lease-cancel, handlers deaf to the loss of
// their lease; with remote-fencing, the API decorator that writes a
// refused remote success by job id (testbed/sabotage).
func (f TestbedFlags) applyServe(cfg *app.Config, log *slog.Logger) error {
	names := slices.DeleteFunc(slices.Clone(f.Sabotage), func(n string) bool { return n == sabotage.RemoteFencing })
	if len(names) < len(f.Sabotage) {
		log.Warn("SABOTAGE switches on: this replica breaks jobq's guarantees on purpose", "sabotage", sabotage.RemoteFencing)
		cfg.WrapHandlerFunc = func(h http.Handler, db *sql.DB) http.Handler { return sabotage.RemoteCompletionUnfenced(h, db, log) }
	}
	sw, err := sabotage.Parse(names)
	if err != nil || !sw.Any() {
		return err
	}
	log.Warn("SABOTAGE switches on: this replica breaks jobq's guarantees on purpose", "sabotage", sw.String())
	cfg.WrapStoreFunc = func(st *store.Store) scheduler.Store { return sabotage.Wrap(st, st.DB(), sw) }
	if sw.NoLeaseCancel {
		register := cfg.RegisterFunc
		cfg.RegisterFunc = func(ctx context.Context, reg *scheduler.Registry, db *sql.DB) error {
			if register != nil {
				if err := register(ctx, reg, db); err != nil {
					return err
				}
			}
			sabotage.WrapHandlers(reg)
			return nil
		}
	}
	return nil
}

// applyChaos passes --sabotage to every replica the chaos harness starts.
func (f TestbedFlags) applyChaos(cfg *chaos.Config) { cfg.Sabotage = f.Sabotage }
