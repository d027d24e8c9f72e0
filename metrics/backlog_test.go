package metrics_test

import (
	"context"
	"testing"

	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/metrics"
	"github.com/jobq/jobq/store"
)

// The WAITING side of a backlog sample reads idx_scan (idx_due indexes
// SCHEDULED jobs only): with 20,000 WAITING jobs in 6 (lane, priority)
// groups, 300 of them not due yet (a writer's clock ahead), the gauges are
// the numbers an exact read of every WAITING row gives (counts up to the
// limit, the age of the oldest due job), and the sample reads at most about
// two limits of WAITING entries plus a few per group, not the backlog.
// Measured in rows the server read for the sample (Handler_read_* of the
// only pooled session).
func TestBacklogSampleReadsWaitingSideOfIdxScan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, testdb.DSN(t), store.PoolConfig{MaxOpen: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	db := st.DB()
	const limit = 500
	m := metrics.New(metrics.Options{BacklogInterval: -1, BacklogCountLimit: limit})
	defer m.Close()
	m.ObserveDB(db)
	for _, rows := range []string{
		`SELECT CONCAT('w-', seq), 'noop', '{}', 'h', 'WAITING', ELT(1 + seq % 3, 0, 5, 1000), seq % 2, NOW(6) - INTERVAL seq SECOND, NOW(6), NOW(6) FROM seq_1_to_20000`,
		`SELECT CONCAT('ahead-', seq), 'noop', '{}', 'h', 'WAITING', 5, seq % 2, NOW(6) + INTERVAL 1 HOUR, NOW(6), NOW(6) FROM seq_1_to_300`,
		`SELECT CONCAT('s-', seq), 'noop', '{}', 'h', 'SCHEDULED', 0, 0, NOW(6) - INTERVAL 1 DAY, NOW(6), NOW(6) FROM seq_1_to_50`,
	} {
		if _, err := db.ExecContext(ctx, `INSERT INTO job_queue (job_key, job_type, params, request_hash, status, priority, lane, run_at, create_time, update_time) `+rows); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, "ANALYZE TABLE job_queue"); err != nil {
		t.Fatal(err)
	}
	// The exact numbers, from every WAITING row.
	var total, due, ageUS int64
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*), SUM(run_at <= NOW(6)), TIMESTAMPDIFF(MICROSECOND, MIN(run_at), NOW(6))
		FROM job_queue IGNORE INDEX (idx_scan) WHERE status = 'WAITING'`).Scan(&total, &due, &ageUS); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "FLUSH STATUS"); err != nil {
		t.Fatal(err)
	}
	if err := m.SampleBacklog(ctx, db); err != nil {
		t.Fatal(err)
	}
	reads := testdb.HandlerReads(t, db)
	reg := m.Registry
	for _, ck := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"jobq_backlog_jobs", map[string]string{"status": "WAITING"}, float64(min(total, limit))},
		{"jobq_backlog_due_jobs", nil, float64(min(due, limit))},
		{"jobq_backlog_jobs", map[string]string{"status": "SCHEDULED"}, 50},
		{"jobq_backlog_promote_due_jobs", nil, 50},
	} {
		if got := sum(t, reg, ck.name, ck.labels); got != ck.want {
			t.Errorf("%s%v = %v, want %v", ck.name, ck.labels, got, ck.want)
		}
	}
	// The exact read ran first: the sample's age is older by the time between.
	if got := sum(t, reg, "jobq_backlog_oldest_due_age_seconds", nil); got < float64(ageUS)/1e6 || got > float64(ageUS)/1e6+10 {
		t.Errorf("jobq_backlog_oldest_due_age_seconds = %v, want %v (+ < 10 s)", got, float64(ageUS)/1e6)
	}
	// Each status's read is bounded by the limit (the derived tables' own
	// scans count once more); the WAITING side reads two limits (total
	// and due) and dives into 6 groups; SHOW STATUS reads a few rows.
	if bound := int64(2*(limit+1) + 2*(2*limit+2) + 2*50 + 3*7 + 50); reads > bound {
		t.Errorf("backlog sample read %d index entries and rows with 20,300 WAITING jobs, want ≤ %d", reads, bound)
	}
	t.Logf("backlog sample: %d Handler_read_* with 20,300 WAITING jobs (limit %d)", reads, limit)
}
