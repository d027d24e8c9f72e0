package main

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/alecthomas/kong"
)

func hintParser(t *testing.T) *kong.Kong {
	t.Helper()
	var cli CLI
	p, err := kong.New(&cli, kong.Name("jobq"), kong.Vars{"version": "test"}, defaultVars())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestEnvHints: a missing --dsn names $JOBQ_DSN; other parse errors get no hint.
func TestEnvHints(t *testing.T) {
	t.Setenv("JOBQ_DSN", "")
	os.Unsetenv("JOBQ_DSN")
	for _, args := range [][]string{{"serve"}, {"migrate", "up"}} {
		_, err := hintParser(t).Parse(args)
		var pe *kong.ParseError
		if !errors.As(err, &pe) {
			t.Fatalf("%v: err %v, want a parse error", args, err)
		}
		got := envHints(err, pe.Context.Flags())
		if len(got) != 1 || got[0] != "--dsn can also come from $JOBQ_DSN" {
			t.Fatalf("%v: hints %q", args, got)
		}
	}
	_, err := hintParser(t).Parse([]string{"get", "notanumber"})
	var pe *kong.ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("err %v, want a parse error", err)
	}
	if got := envHints(err, pe.Context.Flags()); got != nil {
		t.Fatalf("bad argument: hints %q, want none", got)
	}
}

// TestServerHint: a client command whose --server refuses the connection
// gets the hint naming that address, over either transport; other errors
// and commands without --server get none.
func TestServerHint(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	want := "no jobq replica answers at " + url + ": start one with 'jobq serve', or point --server (or $JOBQ_SERVER) at one"
	for _, transport := range []string{"http", "grpc"} {
		kctx, err := hintParser(t).Parse([]string{"get", "1", "--server", url, "--transport", transport})
		if err != nil {
			t.Fatal(err)
		}
		runErr := kctx.Run(&Globals{Ctx: context.Background()})
		if runErr == nil {
			t.Fatalf("%s: get against a closed port succeeded", transport)
		}
		if got := serverHint(runErr, kctx); got != want {
			t.Fatalf("%s: hint %q, want %q (error %v)", transport, got, want, runErr)
		}
		if got := serverHint(errors.New("job 1 not found"), kctx); got != "" {
			t.Fatalf("%s: hint %q for a non-connection error", transport, got)
		}
	}
	kctx, err := hintParser(t).Parse([]string{"serve", "--dsn", "root@tcp(127.0.0.1:1)/jobq"})
	if err != nil {
		t.Fatal(err)
	}
	refused := &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	if got := serverHint(refused, kctx); got != "" {
		t.Fatalf("serve: hint %q, want none (it has no --server)", got)
	}
}
