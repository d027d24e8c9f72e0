package store

import (
	"slices"
	"testing"
)

// unblockOrder locks children in ascending id order across its statements
// (two sinks decremented by different counts: the lower id first, whatever
// the counts), one statement per run of equal counts, and falls back to one
// statement per count when the runs would take more than maxUnblockSteps.
func TestUnblockOrder(t *testing.T) {
	alternating := map[uint64]int64{}
	var odd, even []uint64
	for id := uint64(1); id <= 2*maxUnblockSteps+2; id++ {
		alternating[id] = int64(1 + id%2)
		if id%2 == 1 {
			odd = append(odd, id)
		} else {
			even = append(even, id)
		}
	}
	for _, tc := range []struct {
		name string
		dec  map[uint64]int64
		want []unblockStep
	}{
		{"one count", map[uint64]int64{12: 1, 10: 1, 11: 1}, []unblockStep{{1, []uint64{10, 11, 12}}}},
		{"lower count first", map[uint64]int64{5: 200, 6: 300}, []unblockStep{{200, []uint64{5}}, {300, []uint64{6}}}},
		{"higher count first", map[uint64]int64{5: 300, 6: 100}, []unblockStep{{300, []uint64{5}}, {100, []uint64{6}}}},
		{"runs", map[uint64]int64{1: 2, 2: 2, 3: 1, 4: 2}, []unblockStep{{2, []uint64{1, 2}}, {1, []uint64{3}}, {2, []uint64{4}}}},
		{"too many runs", alternating, []unblockStep{{1, even}, {2, odd}}},
	} {
		got := unblockOrder(tc.dec)
		if !slices.EqualFunc(got, tc.want, func(a, b unblockStep) bool { return a.n == b.n && slices.Equal(a.ids, b.ids) }) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
