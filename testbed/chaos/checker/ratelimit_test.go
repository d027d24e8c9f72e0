package checker

import (
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
