package alert_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/alert"
	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/store"
)

// countingStore counts the reads an idle replica with rules would repeat
// (the rules, the outbox probe) and signals each detection pass.
type countingStore struct {
	alert.Store
	rules, probes atomic.Int64
	detects       chan struct{}
}

func (c *countingStore) AlertRules(ctx context.Context) ([]jobq.AlertRule, error) {
	c.rules.Add(1)
	return c.Store.AlertRules(ctx)
}

func (c *countingStore) AlertDeliveryNextWait(ctx context.Context) (time.Duration, bool, error) {
	c.probes.Add(1)
	return c.Store.AlertDeliveryNextWait(ctx)
}

func (c *countingStore) AlertDetect(ctx context.Context, p jobq.AlertDetectParams) (jobq.AlertDetectResult, error) {
	res, err := c.Store.AlertDetect(ctx, p)
	select {
	case c.detects <- struct{}{}:
	case <-ctx.Done(): // Stop
	}
	return res, err
}

// awaitDetects waits for n detection passes.
func (c *countingStore) awaitDetects(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-c.detects:
		case <-time.After(30 * time.Second):
			t.Fatal("no detection pass within 30s")
		}
	}
}

// TestIdleWithRulesReadsRulesOnceAndProbesOnce: with a rule written by
// another replica and nothing pending, ten detection passes 10 ms apart
// read the rules once (IdleInterval is an hour) and the sender probes the
// outbox once or twice (its start, and the wake when the first pass found
// rules) — not every DeliverInterval. A rule created, then one deleted,
// through this replica is read at the next pass.
func TestIdleWithRulesReadsRulesOnceAndProbesOnce(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, testdb.DSN(t), store.PoolConfig{MaxOpen: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	peer, err := st.AlertRuleCreate(ctx, jobq.AlertRule{Name: "peer-rule", JobType: "boom", Condition: jobq.AlertJobFailed,
		URL: "http://127.0.0.1:9/hook", Preset: jobq.AlertPresetWebhook, Secret: alert.SecretDefault})
	if err != nil {
		t.Fatal(err)
	}
	cs := &countingStore{Store: st, detects: make(chan struct{})}
	svc := alert.New(cs, alert.Config{AllowLoopback: true, Secrets: map[string][]byte{alert.SecretDefault: secret},
		ScanInterval: 10 * time.Millisecond, DeliverInterval: 10 * time.Millisecond, IdleInterval: time.Hour, Logger: testLogger()})
	svc.Start(ctx)
	defer svc.Stop()
	cs.awaitDetects(t, 10)
	if n := cs.rules.Load(); n != 1 {
		t.Fatalf("rules read %d times in 10 passes, want 1 (IdleInterval an hour)", n)
	}
	if n := cs.probes.Load(); n < 1 || n > 2 {
		t.Fatalf("outbox probed %d times with nothing pending, want 1 or 2", n)
	}
	mine, err := svc.Create(ctx, apitype.AlertRuleRequest{Name: "local-rule", JobType: "boom", Condition: jobq.AlertJobFailed,
		URL: "http://127.0.0.1:9/hook"})
	if err != nil {
		t.Fatal(err)
	}
	cs.awaitDetects(t, 2) // the pass in progress may have read before Create
	if n := cs.rules.Load(); n != 2 {
		t.Fatalf("rules read %d times after a local create, want 2", n)
	}
	if err := svc.Delete(ctx, peer.ID); err != nil {
		t.Fatal(err)
	}
	cs.awaitDetects(t, 2)
	if n := cs.rules.Load(); n != 3 {
		t.Fatalf("rules read %d times after a local delete, want 3", n)
	}
	rules, err := st.AlertRules(ctx)
	if err != nil || len(rules) != 1 || rules[0].ID != mine.ID {
		t.Fatalf("rules %+v (%v), want only %d", rules, err, mine.ID)
	}
	if n := cs.probes.Load(); n > 2 {
		t.Fatalf("outbox probed %d times with nothing pending, want at most 2", n)
	}
}
