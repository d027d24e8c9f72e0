package main

import (
	"testing"
	"time"
)

// TestWindow checks jobq's throughput window on completion times.
func TestWindow(t *testing.T) {
	start := time.Unix(0, 0)
	// One completion per millisecond from 100 ms after the start.
	times := func(n int) []time.Time {
		ts := make([]time.Time, n)
		for i := range ts {
			ts[i] = start.Add(100*time.Millisecond + time.Duration(i)*time.Millisecond)
		}
		return ts
	}
	cases := []struct {
		name           string
		n, backlog     int
		warmup, window time.Duration
		wantN          int
		wantD          time.Duration
	}{
		// Opens at 400 ms (300 done), closes 1 s later (1,300 done).
		{name: "window ends first", n: 10000, backlog: 10000, warmup: 300 * time.Millisecond, window: time.Second,
			wantN: 1000, wantD: time.Second},
		// 90 % of 2,000 is the 1,800th completion, at 1,899 ms.
		{name: "90 % ends first", n: 2000, backlog: 2000, warmup: 300 * time.Millisecond, window: 5 * time.Second,
			wantN: 1499, wantD: 1499 * time.Millisecond},
		// 90 % of 200 falls inside the warm-up: from the start to the 180th.
		{name: "done within the warm-up", n: 200, backlog: 200, warmup: 300 * time.Millisecond, window: 5 * time.Second,
			wantN: 180, wantD: 279 * time.Millisecond},
		{name: "nothing completed", n: 0, backlog: 100, warmup: 300 * time.Millisecond, window: time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, d := Window(start, times(tc.n), tc.backlog, tc.warmup, tc.window)
			if n != tc.wantN || d != tc.wantD {
				t.Fatalf("Window = %d jobs in %v, want %d in %v", n, d, tc.wantN, tc.wantD)
			}
		})
	}
}
