//go:build !testbed

package main

import (
	"database/sql"
	"log/slog"
	"net/http"
)

// SabotageFlags is empty in the product build: it has no --sabotage flag,
// so no production replica can be told to break its guarantees (the
// testbed build adds it, sabotage_testbed.go).
type SabotageFlags struct{}

func (SabotageFlags) switches() []string { return nil }

func (SabotageFlags) wrapHandler(*slog.Logger) func(http.Handler, *sql.DB) http.Handler { return nil }
