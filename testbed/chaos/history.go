package chaos

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jobq/jobq/testbed/chaos/checker"
)

// LoadHistory reads the database's record of a run — every job_queue
// row (with its concurrency key's limit), job_execution and job_effect row, and the fire ledger of each schedule
// in h.Schedules — into h (Submits, Faults, Schedules' windows and the
// run's parameters are the caller's). Times are UTC on the database clock; End is
// set to the database's NOW(6) at the read.
func LoadHistory(ctx context.Context, db *sql.DB, h *checker.History) error {
	if err := db.QueryRowContext(ctx, "SELECT NOW(6)").Scan(&h.End); err != nil {
		return fmt.Errorf("load history: now: %w", err)
	}
	rows, err := db.QueryContext(ctx, `SELECT q.id, q.job_key, q.job_type, q.status, q.attempt, q.retry_times, q.max_retry,
		COALESCE(q.owner,''), q.lease_until, q.create_time, q.finished_at, COALESCE(q.last_error,''),
		COALESCE(q.concurrency_key,''), COALESCE(k.max_running, 0), COALESCE(q.rate_key,'')
		FROM job_queue AS q LEFT JOIN concurrency_key AS k ON k.ckey = q.concurrency_key ORDER BY q.id`)
	if err != nil {
		return fmt.Errorf("load history: jobs: %w", err)
	}
	for rows.Next() {
		var j checker.Job
		var lease, fin sql.NullTime
		if err := rows.Scan(&j.ID, &j.Key, &j.Type, &j.Status, &j.Attempt, &j.RetryTimes, &j.MaxRetry, &j.Owner, &lease, &j.CreateTime, &fin, &j.LastError,
			&j.ConcurrencyKey, &j.ConcurrencyLimit, &j.RateKey); err != nil {
			rows.Close()
			return fmt.Errorf("load history: jobs: %w", err)
		}
		j.LeaseUntil, j.FinishedAt = nullTime(lease), nullTime(fin)
		h.Jobs = append(h.Jobs, j)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load history: jobs: %w", err)
	}
	rows, err = db.QueryContext(ctx, `SELECT job_id, attempt, owner, started_at, finished_at, COALESCE(outcome,''), COALESCE(error,''), due_at
		FROM job_attempt ORDER BY job_id, attempt`)
	if err != nil {
		return fmt.Errorf("load history: executions: %w", err)
	}
	for rows.Next() {
		var e checker.Execution
		var fin, due sql.NullTime
		if err := rows.Scan(&e.JobID, &e.Attempt, &e.Owner, &e.StartedAt, &fin, &e.Outcome, &e.Error, &due); err != nil {
			rows.Close()
			return fmt.Errorf("load history: executions: %w", err)
		}
		e.FinishedAt, e.DueAt = nullTime(fin), nullTime(due)
		h.Executions = append(h.Executions, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load history: executions: %w", err)
	}
	rows, err = db.QueryContext(ctx, `SELECT parent_id, child_id, on_parent_failure FROM job_dependency ORDER BY child_id, parent_id`)
	if err != nil {
		return fmt.Errorf("load history: edges: %w", err)
	}
	for rows.Next() {
		var e checker.Edge
		if err := rows.Scan(&e.Parent, &e.Child, &e.OnParentFailure); err != nil {
			rows.Close()
			return fmt.Errorf("load history: edges: %w", err)
		}
		h.Edges = append(h.Edges, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load history: edges: %w", err)
	}
	for i := range h.Schedules {
		fires, err := loadFires(ctx, db, h.Schedules[i].Name)
		if err != nil {
			return err
		}
		h.Schedules[i].Fires = fires
	}
	rows, err = db.QueryContext(ctx, `SELECT job_type, rate_starts, rate_period_us, rate_per_key FROM job_type_control
		WHERE rate_starts > 0 ORDER BY job_type`)
	if err != nil {
		return fmt.Errorf("load history: rate limits: %w", err)
	}
	for rows.Next() {
		var l checker.RateLimit
		var us int64
		if err := rows.Scan(&l.JobType, &l.Starts, &us, &l.PerKey); err != nil {
			rows.Close()
			return fmt.Errorf("load history: rate limits: %w", err)
		}
		l.Period = time.Duration(us) * time.Microsecond
		h.RateLimits = append(h.RateLimits, l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load history: rate limits: %w", err)
	}
	// job_effect is the testbed's table: a plain jobq database has none.
	var effectTables int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.tables
		WHERE table_schema = DATABASE() AND table_name = 'job_effect'`).Scan(&effectTables); err != nil {
		return fmt.Errorf("load history: effects: %w", err)
	}
	if effectTables == 0 {
		return nil
	}
	rows, err = db.QueryContext(ctx, `SELECT job_id, attempt, kind, owner, created_at FROM job_effect ORDER BY id`)
	if err != nil {
		return fmt.Errorf("load history: effects: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var e checker.Effect
		if err := rows.Scan(&e.JobID, &e.Attempt, &e.Kind, &e.Owner, &e.CreatedAt); err != nil {
			return fmt.Errorf("load history: effects: %w", err)
		}
		h.Effects = append(h.Effects, e)
	}
	return rows.Err()
}

func nullTime(t sql.NullTime) *time.Time {
	if !t.Valid {
		return nil
	}
	u := t.Time.UTC()
	return &u
}

// HistoryFromTables is the adapter from jobq's own tables: the database's
// record (LoadHistory) with one acknowledged submit per job_queue row, sent
// and acknowledged at its create_time — for a history of a jobq
// installation that no harness submitted to. lease and rescueInterval are
// the replicas' settings; Start is the earliest create_time. Each periodic
// schedule with a ledger is judged from its oldest ledger row to its cursor.
func HistoryFromTables(ctx context.Context, db *sql.DB, lease, rescueInterval time.Duration) (checker.History, error) {
	h := checker.History{Lease: lease, RescueInterval: rescueInterval}
	// Each schedule is judged from its oldest ledger row to its cursor.
	rows, err := db.QueryContext(ctx, `SELECT p.name, p.cron_expr, p.overlap, p.next_run_at, MIN(f.instant)
		FROM periodic_job p JOIN periodic_fire f ON f.name = p.name GROUP BY p.name, p.cron_expr, p.overlap, p.next_run_at ORDER BY p.name`)
	if err != nil {
		return h, fmt.Errorf("load history: schedules: %w", err)
	}
	for rows.Next() {
		var s checker.Schedule
		if err := rows.Scan(&s.Name, &s.Cron, &s.Overlap, &s.To, &s.From); err != nil {
			rows.Close()
			return h, fmt.Errorf("load history: schedules: %w", err)
		}
		s.From, s.To = s.From.UTC(), s.To.UTC()
		h.Schedules = append(h.Schedules, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return h, fmt.Errorf("load history: schedules: %w", err)
	}
	if err := LoadHistory(ctx, db, &h); err != nil {
		return h, err
	}
	for _, j := range h.Jobs {
		h.Submits = append(h.Submits, checker.Submit{Key: j.Key, Type: j.Type, JobID: j.ID, SentAt: j.CreateTime, AckedAt: j.CreateTime, Tries: 1})
		if h.Start.IsZero() || j.CreateTime.Before(h.Start) {
			h.Start = j.CreateTime
		}
	}
	return h, nil
}

// ReplicaLogEvidence reads the replicas' logs (*.log in logDir, JSON
// lines) for what a live replica says when the machine, not an injected
// fault, cost it a lease — times converted by toDB to the database clock:
//
//   - slow renewals: a lease renewal that timed out ("lease renewal
//     failed" with "context deadline exceeded"), or none that completed
//     before the lease guard gave a run up ("no lease renewal succeeded in
//     time"), or an outcome write retried until its runs' lease deadline
//     passed without the database committing it ("completion failed past
//     the runs' lease deadline" — not "failed, not retried");
//   - stalls: a heartbeat that began late ("heartbeat ran late", late_ms):
//     the process was not run for late_ms before the line's time.
func ReplicaLogEvidence(logDir string, toDB func(time.Time) time.Time) (slow []checker.SlowRenewal, stalls []checker.Stall, err error) {
	files, err := filepath.Glob(filepath.Join(logDir, "*.log"))
	if err != nil {
		return nil, nil, err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, err
		}
		for _, line := range bytes.Split(b, []byte("\n")) {
			timedOut := bytes.Contains(line, []byte(`"lease renewal failed"`)) && bytes.Contains(line, []byte("context deadline exceeded"))
			guard := bytes.Contains(line, []byte(`"no lease renewal succeeded in time;`)) ||
				bytes.Contains(line, []byte(`completion failed past the runs' lease deadline;`))
			stall := bytes.Contains(line, []byte(`"heartbeat ran late:`))
			if !timedOut && !guard && !stall {
				continue
			}
			var e struct {
				Time   time.Time `json:"time"`
				Owner  string    `json:"owner"`
				LateMS *int64    `json:"late_ms"`
			}
			if json.Unmarshal(line, &e) != nil || e.Owner == "" {
				continue
			}
			if !stall {
				slow = append(slow, checker.SlowRenewal{Owner: e.Owner, At: toDB(e.Time)})
				continue
			}
			if e.LateMS == nil || *e.LateMS <= 0 {
				continue
			}
			stalls = append(stalls, checker.Stall{Owner: e.Owner,
				From: toDB(e.Time.Add(-time.Duration(*e.LateMS) * time.Millisecond)), To: toDB(e.Time)})
		}
	}
	return slow, stalls, nil
}
