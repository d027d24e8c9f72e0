//go:build !testbed

package main

import (
	"log/slog"

	"github.com/jobq/jobq/app"
	"github.com/jobq/jobq/testbed/chaos"
)

// TestbedFlags is empty in the product build: it has no --sabotage flag,
// so no production replica can be told to break its guarantees (the
// testbed build adds it, sabotage_testbed.go).
type TestbedFlags struct{}

func (TestbedFlags) switches() []string { return nil }

// applyServe leaves a product replica as it is.
func (TestbedFlags) applyServe(*app.Config, *slog.Logger) error { return nil }

// applyChaos leaves the chaos replicas unsabotaged.
func (TestbedFlags) applyChaos(*chaos.Config) {}
