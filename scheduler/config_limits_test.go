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
