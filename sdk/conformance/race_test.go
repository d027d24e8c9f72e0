//go:build race

package conformance

// raceEnabled: the suite runs under -race, so it builds the Go worker and
// jobq with -race too and fails on a data race they report.
const raceEnabled = true
