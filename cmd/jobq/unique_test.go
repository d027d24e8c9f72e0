package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/jobq/jobq/apitype"
)

// jobq submit --unique-while active / --unique-for, over HTTP and gRPC:
// the key names the job until it is canceled, then a submit of the same
// key creates a new job; the window shows in the job.
func TestSubmitUniquenessWindowCLI(t *testing.T) {
	r, _ := startReplica(t, nil)
	srv := "--server=http://" + r.Addr
	for _, tr := range []string{"http", "grpc"} {
		t.Run(tr, func(t *testing.T) {
			key := "unique-" + tr
			args := []string{"submit", "--key", key, "--type", "noop", "--run-at", "2099-01-01T00:00:00Z", "--unique-while", "active",
				"--transport", tr, "-o", "json", srv}
			a := decode[apitype.Job](t, mustCLI(t, args...))
			if a.UniqueWhile != apitype.UniqueWhileActive || a.KeyReleased {
				t.Fatalf("submit printed %+v: want unique_while active", a)
			}
			if b := decode[apitype.Job](t, mustCLI(t, args...)); b.ID != a.ID {
				t.Fatalf("resubmit while active: job %d, want %d", b.ID, a.ID)
			}
			mustCLI(t, "cancel", "--transport", tr, srv, strconv.FormatUint(a.ID, 10))
			c := decode[apitype.Job](t, mustCLI(t, args...))
			if c.ID == a.ID {
				t.Fatalf("resubmit after cancel: job %d, want a new job", c.ID)
			}
			if old := decode[apitype.Job](t, mustCLI(t, "get", "--transport", tr, "-o", "json", srv, strconv.FormatUint(a.ID, 10))); !old.KeyReleased {
				t.Fatalf("the first job %+v: want key_released", old)
			}
			w := decode[apitype.Job](t, mustCLI(t, "submit", "--key", key+"-for", "--type", "noop", "--unique-for", "90s",
				"--transport", tr, "-o", "json", srv))
			if w.UniqueUntil == nil || w.UniqueUntil.Sub(w.CreateTime).Seconds() != 90 {
				t.Fatalf("--unique-for 90s: job %+v, want unique_until = create_time + 90 s", w)
			}
		})
	}
	if _, err := runCLI(t, "submit", "--key", "x", "--type", "noop", "--unique-while", "forever", srv); err == nil ||
		!strings.Contains(err.Error(), "--unique-while") {
		t.Fatalf("--unique-while forever: err = %v, want one naming the flag", err)
	}
}
