package main

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/alecthomas/kong"
)

// envHints names, for each missing flag in a parse error that an
// environment variable can also give, that variable: "missing flags:
// --dsn=STRING" alone does not tell a user who forgot `export JOBQ_DSN=…`
// that the variable would do.
func envHints(err error, flags []*kong.Flag) []string {
	msg := err.Error()
	if !strings.Contains(msg, "missing flags") {
		return nil
	}
	var hints []string
	for _, f := range flags {
		if len(f.Envs) == 0 || !strings.Contains(msg, "--"+f.Name+"=") {
			continue
		}
		hints = append(hints, fmt.Sprintf("--%s can also come from $%s", f.Name, strings.Join(f.Envs, " or $")))
	}
	return hints
}

// serverHint explains a refused connection of a client command (one with a
// --server flag): nothing listens at the address it was told to use.
func serverHint(err error, kctx *kong.Context) string {
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return ""
	}
	for _, f := range kctx.Flags() {
		if f.Name == "server" {
			return fmt.Sprintf("no jobq replica answers at %s: start one with 'jobq serve', or point --server (or $JOBQ_SERVER) at one", kctx.FlagValue(f))
		}
	}
	return ""
}
