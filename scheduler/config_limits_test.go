package scheduler

import (
	"testing"
	"time"
)

// TestValidateRefusesDegenerateIntervals: `jobq serve --rescue-interval=1ns`
// started and ran the rescue query back to back; --shutdown-timeout=-1s
// cancelled every in-flight handler at once on SIGTERM; --retry-backoff=-1s
// was taken. Each is refused, naming the setting and its rule.
func TestValidateRefusesDegenerateIntervals(t *testing.T) {
	for _, c := range []struct {
		set  func(*Config)
		want string
	}{
		{func(c *Config) { c.RescueInterval = time.Nanosecond }, "rescue interval: must be at least 1ms, got 1ns"},
		{func(c *Config) { c.RescueInterval = -time.Second }, "rescue interval: must be at least 1ms, got -1s"},
		{func(c *Config) { c.ShutdownTimeout = -time.Second }, "shutdown timeout: must not be negative, got -1s"},
		{func(c *Config) { c.RetryBackoffBase = -time.Second }, "retry backoff: must not be negative, got -1s"},
	} {
		cfg := Config{}.WithDefaults()
		c.set(&cfg)
		if err := cfg.Validate(); err == nil || err.Error() != c.want {
			t.Errorf("Validate() = %v, want %q", err, c.want)
		}
	}
	cfg := Config{}.WithDefaults()
	cfg.RescueInterval = time.Millisecond
	if err := cfg.Validate(); err != nil {
		t.Errorf("rescue interval 1ms: %v", err)
	}
}

// The completion batch follows the batch limit (a full claim of no-op jobs
// is one completion transaction) within [CompleteBatchMin,
// CompleteBatchMax]; a CompleteBatch that is set is kept.
func TestCompleteBatchFollowsBatchLimit(t *testing.T) {
	for _, c := range []struct{ batchLimit, completeBatch, want int }{
		{0, 0, 2000}, // the default batch limit
		{100, 0, 250},
		{1000, 0, 1000},
		{2000, 0, 2000},
		{10000, 0, 2000},
		{2000, 50, 50},
	} {
		got := Config{BatchLimit: c.batchLimit, CompleteBatch: c.completeBatch}.WithDefaults().CompleteBatch
		if got != c.want {
			t.Errorf("BatchLimit %d, CompleteBatch %d: default CompleteBatch %d, want %d", c.batchLimit, c.completeBatch, got, c.want)
		}
	}
}

// The claim gate: 0 is the default (4 slots), negative turns it off, and
// more slots than claim_gate holds is refused, naming the setting.
func TestClaimSlots(t *testing.T) {
	for _, c := range []struct{ set, want int }{{0, ClaimSlotsDefault}, {1, 1}, {64, 64}, {-1, 0}} {
		cfg := Config{ClaimSlots: c.set}.WithDefaults()
		if err := cfg.Validate(); err != nil {
			t.Errorf("ClaimSlots %d: %v", c.set, err)
		}
		if got := cfg.claimSlots(); got != c.want {
			t.Errorf("ClaimSlots %d: effective %d, want %d", c.set, got, c.want)
		}
	}
	cfg := Config{ClaimSlots: 65}.WithDefaults()
	if err := cfg.Validate(); err == nil || err.Error() != "claim slots: must be at most 64 (negative: no gate), got 65" {
		t.Errorf("ClaimSlots 65: Validate() = %v", err)
	}
}
