package scheduler

import (
	"slices"
	"testing"
)

// TestNextClaimLimit checks the claim limit as a function of what the
// claims took: doubling while full, falling back after a short claim, and a
// full claim capped by the free slots (or a probe that saw a long queue)
// never lowering it.
func TestNextClaimLimit(t *testing.T) {
	const minClaim, batchLimit = 50, 2000
	for _, tc := range []struct {
		name                     string
		asked, got, prev, probed int
		want                     int
	}{
		{"empty", 50, 0, 0, 0, 50},
		{"empty after a long drain", 2000, 0, 2000, 0, 50},
		{"full doubles", 50, 50, 50, 0, 100},
		{"full doubles up to the batch limit", 1600, 1600, 1600, 0, 2000},
		{"short falls back to twice what it took", 2000, 30, 2000, 0, 60},
		{"short keeps at least minClaim", 100, 10, 100, 0, 50},
		{"full but capped by the slots keeps the limit", 300, 300, 2000, 0, 2000},
		{"full after a probe that saw a long queue", 50, 50, 0, 2000, 2000},
		{"full after a probe that saw a short one", 50, 50, 0, 70, 100},
		{"short after a probe: the claim's answer wins", 50, 20, 0, 2000, 50},
		{"probe beyond the batch limit", 50, 50, 0, 5000, 2000},
	} {
		if got := nextClaimLimit(tc.asked, tc.got, tc.prev, tc.probed, minClaim, batchLimit); got != tc.want {
			t.Errorf("%s: nextClaimLimit(asked %d, got %d, prev %d, probed %d) = %d, want %d",
				tc.name, tc.asked, tc.got, tc.prev, tc.probed, got, tc.want)
		}
	}
	if got := nextClaimLimit(50, 10, 0, 0, 0, batchLimit); got != batchLimit {
		t.Errorf("minClaim 0: %d, want the batch limit %d", got, batchLimit)
	}
}

// TestClaimerLimitFollowsClaims replays claim answers through the claimer's
// bookkeeping: a replica whose claims are capped by its free slots (the
// first after a quiet spell gets only its workers) reaches the batch limit
// at once after a probe saw the queue, and in doublings without one.
func TestClaimerLimitFollowsClaims(t *testing.T) {
	replay := func(probed int, answers [][2]int) []int {
		c := newClaimer(claimerParams{BatchLimit: 2000, MinClaim: 50})
		limits := []int{c.limit()}
		for i, a := range answers {
			p := 0
			if i == 0 {
				p = probed
			}
			c.next = nextClaimLimit(a[0], a[1], c.next, p, c.p.MinClaim, c.p.BatchLimit)
			limits = append(limits, c.limit())
		}
		return limits
	}
	// Each answer is {asked, got}: asked is the limit capped by the slots.
	full := [][2]int{{50, 50}, {400, 400}, {2000, 2000}}
	if got, want := replay(2000, full), []int{50, 2000, 2000, 2000}; !slices.Equal(got, want) {
		t.Errorf("after a probe of 2,000: limits %v, want %v", got, want)
	}
	if got, want := replay(0, [][2]int{{50, 50}, {100, 100}, {200, 200}, {300, 300}}), []int{50, 100, 200, 400, 600}; !slices.Equal(got, want) {
		t.Errorf("without a probe: limits %v, want %v", got, want)
	}
	if got, want := replay(2000, [][2]int{{50, 50}, {2000, 2000}, {2000, 120}, {240, 0}}), []int{50, 2000, 2000, 240, 50}; !slices.Equal(got, want) {
		t.Errorf("a backlog that runs out: limits %v, want %v", got, want)
	}
}
