package checker

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The window is half-open: starts exactly one period apart are in no
// window together, so 1 per second with starts at 10, 1010 and 2010 ms is
// VALID; one more start at 2009 ms puts two starts in (1009, 2009] and
// two in (1010, 2010].
func TestRateLimitWindowIsHalfOpen(t *testing.T) {
	b := newBuilder()
	for i, c := range []int{0, 1000, 2000} { // claimed at c+10
		b.ok(uint64(i+1), c, "replica-1.1")
	}
	b.h.RateLimits = []RateLimit{{JobType: "effect", Starts: 1, Period: 990 * time.Millisecond}}
	if r := Check(b.h); !r.Valid {
		t.Fatalf("starts 990 ms apart under 1 per 990 ms: %+v", r.Violations)
	}
	b.h.RateLimits[0].Period = time.Second
	if r := Check(b.h); !r.Valid {
		t.Fatalf("starts exactly 1 s apart under 1 per 1 s: %+v", r.Violations)
	}
	b.ok(4, 1999, "replica-2.1") // claimed at 2009
	r := Check(b.h)
	if v := violation(r, CheckRateLimitExceeded); r.Valid || v == nil || v.Count != 2 {
		t.Fatalf("a second start within 1 s of another: %+v", r.Violations)
	}
}

// perKeyStarts builds jobs of type effect under a limit of 2 starts per 1 s
// (per rate key when perKey): key a's claimed at aMs (+10), key b's 2 at 200
// and 600 ms, one job without a key at 900 ms.
func perKeyStarts(perKey bool, aMs ...int) *builder {
	b := newBuilder()
	id := uint64(0)
	add := func(rateKey string, c int) {
		id++
		b.ok(id, c, fmt.Sprintf("replica-%d.1", id%2+1))
		b.h.Jobs[len(b.h.Jobs)-1].RateKey = rateKey
	}
	for _, c := range aMs {
		add("a", c)
	}
	add("b", 200)
	add("b", 600)
	add("", 900)
	b.h.RateLimits = []RateLimit{{JobType: "effect", Starts: 2, Period: time.Second, PerKey: perKey}}
	return b
}

// A per-key limit counts each rate key's windows on their own: keys a and b
// starting 2 each in one second (and a job without a key, its own key "")
// is VALID per key and 3 starts too many for the type as a whole; a third
// start of key a within the second is one too many, named by its key.
func TestRateLimitPerKeyWindows(t *testing.T) {
	if r := Check(perKeyStarts(true, 0, 400).h); !r.Valid {
		t.Fatalf("2 per key per second under 2 per key: %+v", r.Violations)
	}
	r := Check(perKeyStarts(false, 0, 400).h)
	if v := violation(r, CheckRateLimitExceeded); r.Valid || v == nil || v.Count != 3 {
		t.Fatalf("5 starts of the type in one second under 2 per type: %+v", r.Violations)
	}
	r = Check(perKeyStarts(true, 0, 400, 800).h)
	v := violation(r, CheckRateLimitExceeded)
	if r.Valid || v == nil || v.Count != 1 || len(v.Examples) != 1 || !strings.Contains(v.Examples[0], `key "a"`) {
		t.Fatalf("a third start of key a in one second: %+v", r.Violations)
	}
}
