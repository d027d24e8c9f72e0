package main

import (
	"slices"
	"testing"
	"time"

	"github.com/alecthomas/kong"
)

// A long flag takes a negative number as its next argument: kong alone
// reads "-1" as a short flag and refuses `--max-retry -1` ("expected int
// value but got "-1" (short flag)"), accepting only `--max-retry=-1`.
func TestNegativeFlagValues(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"submit", "--max-retry", "-1", "--key", "k"}, []string{"submit", "--max-retry=-1", "--key", "k"}},
		{[]string{"serve", "--drain-wait", "-1ms", "--run-queue", "-5"}, []string{"serve", "--drain-wait=-1ms", "--run-queue=-5"}},
		{[]string{"submit", "--max-retry=-1"}, []string{"submit", "--max-retry=-1"}},
		{[]string{"submit", "--key", "-x"}, []string{"submit", "--key", "-x"}}, // not a number: kong decides
		{[]string{"get", "-o", "json", "1"}, []string{"get", "-o", "json", "1"}},
		{[]string{"x", "--", "--a", "-1"}, []string{"x", "--", "--a", "-1"}},
	} {
		if got := negativeValues(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("negativeValues(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	var cli CLI
	p, err := kong.New(&cli, kong.Name("jobq"), kong.Vars{"version": "test"}, defaultVars())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Parse(negativeValues([]string{"serve", "--dsn", "x", "--run-queue", "-1", "--drain-wait", "-1ms", "--complete-linger", "-2ms"})); err != nil {
		t.Fatal(err)
	}
	if cli.Serve.RunQueue != -1 || cli.Serve.DrainWait != -time.Millisecond || cli.Serve.CompleteLinger != -2*time.Millisecond {
		t.Fatalf("serve: run-queue %d, drain-wait %v, complete-linger %v; want -1, -1ms, -2ms", cli.Serve.RunQueue, cli.Serve.DrainWait, cli.Serve.CompleteLinger)
	}
	if _, err := p.Parse(negativeValues([]string{"submit", "--key", "k", "--type", "noop", "--max-retry", "-1"})); err != nil {
		t.Fatal(err)
	}
	if cli.Submit.MaxRetry == nil || *cli.Submit.MaxRetry != -1 {
		t.Fatalf("submit --max-retry -1: MaxRetry %v, want -1 (the server then says it must be in [0, 100])", cli.Submit.MaxRetry)
	}
}
