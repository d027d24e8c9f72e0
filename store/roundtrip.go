package store

import (
	"context"
	"time"
)

// Readiness budget bounds (Store.ReadyBudget).
const (
	// ReadyBudgetMin is the least time Ready is given: 2s.
	ReadyBudgetMin = 2 * time.Second
	// ReadyBudgetMax is the most time Ready is given, however slow the
	// link measured: 30s.
	ReadyBudgetMax = 30 * time.Second
	// readyRoundTrips is how many measured round trips Ready is given: it
	// sends up to four statements, and a pooled connection may have to be
	// opened first (a TCP and a MySQL handshake, about three more); the rest
	// is headroom for a link whose latency varies.
	readyRoundTrips = 10
)

// noteRoundTrip records d, the duration of one statement that is one round
// trip to the server (a warm connection, no lock wait): the version read at
// Open, Ready's first statement, each lease renewal.
func (s *Store) noteRoundTrip(d time.Duration) { s.roundTrip.Store(int64(d)) }

// RoundTrip returns the last measured round trip to the server (0 before
// the first measurement).
func (s *Store) RoundTrip() time.Duration { return time.Duration(s.roundTrip.Load()) }

// ReadyBudget is how long Ready may take: readyRoundTrips (10) measured
// round trips, at least ReadyBudgetMin (2s) and at most ReadyBudgetMax
// (30s). A fixed 2s budget made /readyz flap to 503 "schema check: context
// deadline exceeded" on a link with +400ms per round trip, where a check took
// 1.2s.
func (s *Store) ReadyBudget() time.Duration {
	return min(max(readyRoundTrips*s.RoundTrip(), ReadyBudgetMin), ReadyBudgetMax)
}

// timedRoundTrip runs fn (one statement on a warm connection) and records
// its duration as the round trip when it succeeds.
func (s *Store) timedRoundTrip(fn func() error) error {
	start := time.Now()
	err := fn()
	if err == nil {
		s.noteRoundTrip(time.Since(start))
	}
	return err
}

// readyContext is ctx without its deadline or cancellation, bounded by
// ReadyBudget instead: callers (the HTTP and gRPC health checks) pass a fixed
// deadline, which a slow link that works would exceed.
func (s *Store) readyContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), s.ReadyBudget())
}
