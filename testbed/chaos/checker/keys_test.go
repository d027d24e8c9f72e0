package checker

import (
	"strings"
	"testing"
)

// keyBuilder is three jobs of key "dev" (limit 1) run one after the other,
// and one job of key "other" run beside them: a VALID history.
func keyBuilder() *builder {
	b := newBuilder()
	b.ok(1, 0, "r1")   // claimed 10, done 200
	b.ok(2, 200, "r2") // claimed 210, done 400
	b.ok(3, 400, "r1") // claimed 410, done 600
	b.ok(4, 0, "r2")   // another key, beside job 1
	for i := range b.h.Jobs {
		b.h.Jobs[i].ConcurrencyKey, b.h.Jobs[i].ConcurrencyLimit = "dev", 1
	}
	b.h.Jobs[3].ConcurrencyKey = "other"
	return b
}

func TestKeyOverlapValidWhenRunsFollowEachOther(t *testing.T) {
	if r := Check(keyBuilder().h); !r.Valid {
		t.Fatalf("runs of one key one after the other are INVALID: %+v", r.Violations)
	}
	b := keyBuilder()
	b.h.Executions[1].StartedAt = at(200) // claimed the instant job 1 ended: touching, not overlapping
	if r := Check(b.h); violation(r, CheckKeyOverlap) != nil {
		t.Fatalf("touching runs reported: %+v", r.Violations)
	}
}

// Two runs of one key at once beyond its limit fail; at a limit of 2 the
// same history is VALID, and a third run at once fails it again.
func TestKeyOverlapFailsOnHandBuiltHistory(t *testing.T) {
	b := keyBuilder()
	b.h.Executions[1].StartedAt = at(150)
	r := Check(b.h)
	v := violation(r, CheckKeyOverlap)
	if r.Valid || v == nil || v.Count != 1 {
		t.Fatalf("%s not reported once: %+v", CheckKeyOverlap, r.Violations)
	}
	if want := `key "dev" (limit 1): job 2 attempt 1 started at`; !strings.Contains(v.Examples[0], want) {
		t.Fatalf("example %q, want it to say %q", v.Examples[0], want)
	}
	for i := range b.h.Jobs {
		b.h.Jobs[i].ConcurrencyLimit = 2
	}
	if r := Check(b.h); !r.Valid {
		t.Fatalf("two runs at once under a limit of 2 are INVALID: %+v", r.Violations)
	}
	b.h.Executions[2].StartedAt = at(160) // a third run while 1 and 2 run
	if v := violation(Check(b.h), CheckKeyOverlap); v == nil {
		t.Fatal("three runs at once under a limit of 2 not reported")
	}
}
