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

// storeWithRule opens a store on a fresh database holding one job_failed
// rule, written as another replica would (no Service saw it).
func storeWithRule(t *testing.T) (*store.Store, jobq.AlertRule) {
	t.Helper()
	st, err := store.Open(context.Background(), testdb.DSN(t), store.PoolConfig{MaxOpen: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r, err := st.AlertRuleCreate(context.Background(), jobq.AlertRule{Name: "peer-rule", JobType: "boom", Condition: jobq.AlertJobFailed,
		URL: "http://127.0.0.1:9/hook", Preset: jobq.AlertPresetWebhook, Secret: alert.SecretDefault})
	if err != nil {
		t.Fatal(err)
	}
	return st, r
}

// TestIdleWithRulesReadsRulesOnceAndProbesOnce: with a rule written by
// another replica and nothing pending, ten detection passes 10 ms apart
// read the rules once (IdleInterval is an hour) and the sender probes the
// outbox once or twice (its start, and the wake when the first pass found
// rules) — not every DeliverInterval. A rule created, then one deleted,
// through this replica is read at the next pass.
func TestIdleWithRulesReadsRulesOnceAndProbesOnce(t *testing.T) {
	ctx := context.Background()
	st, peer := storeWithRule(t)
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

// TestIdleDetectionTakesNoLock: a detection pass with no execution after
// the cursor ends at its unlocked peek, so a peer holding the cursor row
// (mid-scan) does not make it skip; once an execution lies after the
// cursor the pass takes the lock (skipping while the peer holds it) and
// reads it.
func TestIdleDetectionTakesNoLock(t *testing.T) {
	ctx := context.Background()
	st, _ := storeWithRule(t)
	detect := func() jobq.AlertDetectResult {
		t.Helper()
		res, err := st.AlertDetect(ctx, jobq.AlertDetectParams{Chunk: 10, Settle: time.Hour,
			PlanFunc: func([]jobq.AlertExecution, time.Time) []jobq.AlertEnqueue { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	peer, err := st.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Rollback()
	var last uint64
	if err := peer.QueryRowContext(ctx, "SELECT last_id FROM alert_cursor FOR UPDATE").Scan(&last); err != nil {
		t.Fatal(err)
	}
	if res := detect(); res.Skipped || res.Read != 0 || res.Cursor != last {
		t.Fatalf("idle pass while a peer holds the cursor: %+v, want not skipped, nothing read, cursor %d", res, last)
	}
	j, _, err := st.JobSubmit(ctx, jobq.SubmitParams{JobKey: "k", JobType: "boom", Params: "{}", RequestHash: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().ExecContext(ctx, `INSERT INTO job_execution (job_id, attempt, owner, started_at, due_at, finished_at, outcome, error)
		VALUES (?, 1, 'x', NOW(6), NOW(6), NOW(6), 'SUCCESS', '')`, j.ID); err != nil {
		t.Fatal(err)
	}
	if res := detect(); !res.Skipped {
		t.Fatalf("pass with an execution after the cursor, the peer holding it: %+v, want skipped (the lock tried)", res)
	}
	if err := peer.Rollback(); err != nil {
		t.Fatal(err)
	}
	if res := detect(); res.Skipped || res.Read != 1 {
		t.Fatalf("pass after the peer let go: %+v, want the execution read", res)
	}
}
