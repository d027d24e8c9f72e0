package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `jobq submit --file` streams an NDJSON file in batches over either
// transport: every valid line becomes one job, a bad line is reported (exit
// error) without stopping the rest, and running the file again creates
// nothing.
func TestSubmitFile(t *testing.T) {
	r, c := startReplica(t, nil)
	var b strings.Builder
	const n = 25
	for i := range n {
		fmt.Fprintf(&b, `{"job_key":"f-%d","job_type":"noop","params":{"i":%d}}`+"\n", i, i)
		if i == 3 {
			b.WriteString("\n")                                              // blank: skipped
			b.WriteString(`{"job_key":"bad-type","job_type":"nope"}` + "\n") // invalid
			b.WriteString("not json\n")                                      // invalid
		}
	}
	path := filepath.Join(t.TempDir(), "jobs.ndjson")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		transport string
		want      fileSummary
	}{
		{"http", fileSummary{Jobs: n + 2, Created: n, Invalid: 2}},
		{"grpc", fileSummary{Jobs: n + 2, Existing: n, Invalid: 2}},
	} {
		out, err := runCLI(t, "submit", "--server", "http://"+r.Addr, "--transport", tc.transport, "--file", path, "--batch-size", "7")
		if err == nil || !strings.Contains(err.Error(), "2 of 27 jobs were not submitted") {
			t.Fatalf("%s: err = %v, want 2 of 27 not submitted", tc.transport, err)
		}
		if got := decode[fileSummary](t, out); got != tc.want {
			t.Fatalf("%s: summary %+v, want %+v", tc.transport, got, tc.want)
		}
	}
	page, err := c.List(context.Background(), "", "", 1000, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Jobs) != n {
		t.Fatalf("jobs = %d, want %d", len(page.Jobs), n)
	}
	params := map[string]string{}
	for _, j := range page.Jobs {
		params[j.JobKey] = string(j.Params)
	}
	for i := range n {
		if got, want := params[fmt.Sprintf("f-%d", i)], fmt.Sprintf(`{"i":%d}`, i); got != want {
			t.Fatalf("job f-%d params = %q, want %q", i, got, want)
		}
	}
	if _, err := runCLI(t, "submit", "--server", "http://"+r.Addr, "--file", path, "--key", "x"); err == nil {
		t.Fatalf("--file with --key: no error")
	}
}
