package main

import (
	"strings"
	"testing"
)

// TestStdoutOutput: a command's stdout is its JSON value when it parses,
// else a JSON string; empty is null.
func TestStdoutOutput(t *testing.T) {
	for _, c := range []struct{ stdout, want string }{
		{`{"ip":"10.0.0.7"}` + "\n", `{"ip":"10.0.0.7"}`},
		{"[1, 2]\r\n", "[1, 2]"},
		{"42\n", "42"},
		{`"quoted"`, `"quoted"`},
		{"done: 3 disks\n", `"done: 3 disks"`},
		{"two\nlines\n\n", `"two\nlines"`},
		{"\xff bad utf-8", `"\ufffd bad utf-8"`},
		{"", "null"},
		{"  \n", "null"},
	} {
		if got := string(stdoutOutput([]byte(c.stdout))); got != c.want {
			t.Errorf("stdoutOutput(%q) = %s, want %s", c.stdout, got, c.want)
		}
	}
}

// TestWorkFlagsRefused: jobq work refuses settings it cannot run with,
// naming the flag, before it contacts a replica.
func TestWorkFlagsRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"work", "--type", "t"}, "--exec COMMAND or a program after --"},
		{[]string{"work", "--type", "t", "--exec", "true", "--", "true"}, "exactly one of the two"},
		{[]string{"work", "--type", ",", "--exec", "true"}, "--type: at least one job type"},
		{[]string{"work", "--type", "t", "--exec", "true", "--kill-after", "0s"}, "--kill-after: must be positive"},
		{[]string{"work", "--type", "t", "--exec", "true", "--concurrency", "1001"}, "concurrency: at most 1000"},
	} {
		_, err := runCLI(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("jobq %s: error %v, want one containing %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}
