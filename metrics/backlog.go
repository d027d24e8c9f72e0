package metrics

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/store"
	"github.com/prometheus/client_golang/prometheus"
)

// backlogQuery reads the non-terminal jobs in one statement of bounded
// index range reads: at most BacklogCountLimit entries of each status.
// SCHEDULED rows come from idx_due (due_status, run_at: a virtual column, so
// the read names due_status) and RUNNING rows from idx_lease (index_status,
// lease_until), each in due order. WAITING rows come from idx_scan
// (scan_status, lane, priority DESC, run_at, …), in due order only within a
// (lane, priority) group: the WAITING total reads the first entries in index
// order and the due count the first due ones (a WAITING job is due from the
// moment it turns WAITING, so the count passes a not-yet-due entry only when
// a writer's clock runs ahead of this server's), and the age of the oldest
// due WAITING job is not read here but by store.OldestWaitingAge (one index
// dive per group), so its column is 0.
// Terminal rows (SUCCESS, FAILED, CANCELED) are never read: they grow
// without bound, and the jobq_jobs_completed_total rates already describe
// them. The bound keeps a replica's idle cost from growing with parked
// jobs: counting every SCHEDULED row every 15 s on every replica read
// 1,000,000 index entries per replica per sample at a million parked jobs.
// Because each SCHEDULED and RUNNING read goes in due order, the due (or
// expired) jobs come first: the due count is exact below the limit, and the
// age of the oldest due job (or longest-expired lease) is exact always; the
// WAITING counts are the same numbers, min(total, limit) and min(due,
// limit). A count equal to the limit means "at least that many". NOW(6) is
// the database clock, evaluated once per statement. Each row is (status,
// total, due-or-expired count, age in microseconds of the oldest due job or
// of the longest-expired lease). For SCHEDULED the due count is jobs whose
// run_at has come but that no promoter has made WAITING yet. The four ? are
// the limit.
const backlogQuery = `
SELECT 'SCHEDULED', COUNT(*), COALESCE(SUM(run_at <= NOW(6)), 0),
       COALESCE(TIMESTAMPDIFF(MICROSECOND, MIN(IF(run_at <= NOW(6), run_at, NULL)), NOW(6)), 0)
  FROM (SELECT run_at FROM job_queue FORCE INDEX (idx_due) WHERE due_status = 'SCHEDULED' ORDER BY run_at LIMIT ?) s
UNION ALL
SELECT 'WAITING',
       (SELECT COUNT(*) FROM (SELECT 1 FROM job_queue FORCE INDEX (idx_scan) WHERE scan_status = 'WAITING' LIMIT ?) w),
       (SELECT COUNT(*) FROM (SELECT 1 FROM job_queue FORCE INDEX (idx_scan) WHERE scan_status = 'WAITING' AND run_at <= NOW(6) LIMIT ?) d),
       0
UNION ALL
SELECT 'RUNNING', COUNT(*), COALESCE(SUM(lease_until < NOW(6)), 0),
       COALESCE(TIMESTAMPDIFF(MICROSECOND, MIN(IF(lease_until < NOW(6), lease_until, NULL)), NOW(6)), 0)
  FROM (SELECT lease_until FROM job_queue FORCE INDEX (idx_lease) WHERE index_status = 'RUNNING' AND status = 'RUNNING' ORDER BY lease_until LIMIT ?) r`

// backlogGauges are the sampler's outputs.
type backlogGauges struct {
	jobs            *prometheus.GaugeVec // status
	due             prometheus.Gauge
	oldestDue       prometheus.Gauge
	leaseExpired    prometheus.Gauge
	leaseOverdue    prometheus.Gauge
	promoteDue      prometheus.Gauge
	promoteLag      prometheus.Gauge
	sampleTimestamp prometheus.Gauge
	sampleDuration  prometheus.Gauge
	sampleErrors    prometheus.Counter
	countLimit      prometheus.Gauge
}

func newBacklogGauges(r *prometheus.Registry) *backlogGauges {
	g := func(name, help string) prometheus.Gauge {
		v := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
		r.MustRegister(v)
		return v
	}
	b := &backlogGauges{
		jobs: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "jobq_backlog_jobs",
			Help: "Jobs in job_queue by non-terminal status (SCHEDULED, WAITING, RUNNING), sampled every BacklogInterval and counted up to jobq_backlog_count_limit (a value equal to it means at least that many); the same table for every replica, so take max() across replicas."},
			[]string{"status"}),
		due:          g("jobq_backlog_due_jobs", "WAITING jobs already due (run_at <= NOW(6)), sampled, up to jobq_backlog_count_limit."),
		oldestDue:    g("jobq_backlog_oldest_due_age_seconds", "How long the oldest due WAITING job has been due (0 when none), sampled."),
		leaseExpired: g("jobq_backlog_lease_expired_jobs", "RUNNING jobs whose lease expired and that no rescuer has returned yet, sampled."),
		leaseOverdue: g("jobq_backlog_lease_overdue_seconds", "How long the longest-expired lease of a RUNNING job has been expired (0 when none), sampled."),
		promoteDue:   g("jobq_backlog_promote_due_jobs", "SCHEDULED jobs whose run_at has come that no promoter has made WAITING yet, sampled."),
		promoteLag:   g("jobq_backlog_promote_lag_seconds", "How long the oldest due SCHEDULED job has waited for its promotion (0 when none), sampled."),
		sampleTimestamp: g("jobq_backlog_sample_timestamp_seconds",
			"Unix time of the last successful backlog sample (0 before the first)."),
		sampleDuration: g("jobq_backlog_sample_duration_seconds", "Duration of the last backlog sample statement."),
		countLimit: g("jobq_backlog_count_limit",
			"Most jobs of one status the backlog sampler reads (Options.BacklogCountLimit): the backlog counts stop there."),
	}
	r.MustRegister(b.jobs)
	b.sampleErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "jobq_backlog_sample_errors_total",
		Help: "Backlog samples that failed (the gauges keep their last values)."})
	r.MustRegister(b.sampleErrors)
	return b
}

// runBacklogSampler samples at once, then every BacklogInterval until Close.
func (m *Metrics) runBacklogSampler(db *sql.DB) {
	t := time.NewTicker(m.opts.BacklogInterval)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-m.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		if err := m.SampleBacklog(ctx, db); err != nil && ctx.Err() == nil {
			m.log.Warn("backlog sample failed", "err", err)
		}
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
	}
}

// SampleBacklog runs the backlog statement once on db and updates the
// jobq_backlog_* gauges. The sampler calls it every BacklogInterval; tests
// call it directly. It needs ObserveDB to have run.
func (m *Metrics) SampleBacklog(ctx context.Context, db *sql.DB) error {
	b := m.backlog
	if b == nil {
		return fmt.Errorf("backlog sample: ObserveDB was not called")
	}
	ctx, cancel := context.WithTimeout(ctx, max(time.Second, m.opts.BacklogInterval))
	defer cancel()
	start := time.Now()
	err := func() error {
		n := m.opts.BacklogCountLimit
		rows, err := db.QueryContext(ctx, backlogQuery, n, n, n, n)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var status string
			var total, sub, ageUS int64
			if err := rows.Scan(&status, &total, &sub, &ageUS); err != nil {
				return err
			}
			b.jobs.WithLabelValues(status).Set(float64(total))
			switch jobq.JobState(status) {
			case jobq.StateWaiting:
				b.due.Set(float64(sub))
			case jobq.StateRunning:
				b.leaseExpired.Set(float64(sub))
				b.leaseOverdue.Set(float64(ageUS) / 1e6)
			case jobq.StateScheduled:
				b.promoteDue.Set(float64(sub))
				b.promoteLag.Set(float64(ageUS) / 1e6)
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		ageUS, err := store.OldestWaitingAge(ctx, db)
		if err != nil {
			return err
		}
		b.oldestDue.Set(float64(max(ageUS, 0)) / 1e6)
		return nil
	}()
	b.sampleDuration.Set(time.Since(start).Seconds())
	if err != nil {
		b.sampleErrors.Inc()
		return fmt.Errorf("backlog sample: %w", err)
	}
	b.sampleTimestamp.Set(float64(time.Now().UnixNano()) / 1e9)
	b.countLimit.Set(float64(m.opts.BacklogCountLimit))
	return nil
}
