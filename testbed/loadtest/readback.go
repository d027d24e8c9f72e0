package loadtest

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strings"
	"time"
)

// ClockReport says how database times (started_at, finished_at,
// create_time: the DB's UTC clock) were mapped onto the load generator's
// clock. Offset is DB clock minus local clock; a DB time t corresponds to
// local time t - Offset.
//
// Offset comes from NTP-style probes: local t1, SELECT UTC_TIMESTAMP(6),
// local t2; offset = db - (t1+t2)/2, uncertain by ±(t2-t1)/2. Of ProbeCount
// probes before the run and as many after the drain, the one with the
// smallest round trip wins on each side; Offset is their mean and Drift
// their difference (after - before).
//
// BoundsLow/BoundsHigh cross-check it with every acknowledged job: its
// create_time was taken by the database between the request's actual send
// and its response, so offset ∈ [create - response, create - send];
// intersected over all jobs. OffsetInBounds reports whether the probe
// offset (± its uncertainty) agrees.
type ClockReport struct {
	Offset         time.Duration `json:"offset_ns"`
	Uncertainty    time.Duration `json:"uncertainty_ns"`
	Drift          time.Duration `json:"drift_ns"`
	BoundsLow      time.Duration `json:"bounds_low_ns"`
	BoundsHigh     time.Duration `json:"bounds_high_ns"`
	BoundsJobs     int           `json:"bounds_jobs"`
	OffsetInBounds bool          `json:"offset_in_bounds"`
}

// ProbeCount is how many clock probes are taken on each side of a run.
const ProbeCount = 15

type probe struct {
	offset, rtt time.Duration
}

// probeClock measures DB clock minus local wall clock (see ClockReport).
func probeClock(ctx context.Context, db *sql.DB) (probe, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return probe{}, err
	}
	defer conn.Close()
	best := probe{rtt: math.MaxInt64}
	for range ProbeCount {
		var dbNow time.Time
		t1 := time.Now().Round(0)
		if err := conn.QueryRowContext(ctx, "SELECT UTC_TIMESTAMP(6)").Scan(&dbNow); err != nil {
			return probe{}, fmt.Errorf("clock probe: %w", err)
		}
		t2 := time.Now().Round(0)
		rtt := t2.Sub(t1)
		if rtt < best.rtt {
			mid := t1.Add(rtt / 2)
			best = probe{offset: dbNow.Sub(mid), rtt: rtt}
		}
	}
	return best, nil
}

// likePrefix escapes prefix for a LIKE 'prefix%' pattern.
func likePrefix(prefix string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(prefix) + "%"
}

// countBacklog returns this run's WAITING jobs (the backlog), -1 on error.
func countBacklog(ctx context.Context, db *sql.DB, prefix string) int64 {
	var n int64
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM job_queue WHERE job_key LIKE ? AND status = 'WAITING'",
		likePrefix(prefix)).Scan(&n); err != nil {
		return -1
	}
	return n
}

// countUnfinished returns this run's jobs that are not terminal yet.
func countUnfinished(ctx context.Context, db *sql.DB, prefix string) (int64, error) {
	var n int64
	err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM job_queue WHERE job_key LIKE ?
		AND status NOT IN ('SUCCESS','FAILED','CANCELED')`, likePrefix(prefix)).Scan(&n)
	return n, err
}

// jobTimes are one job's database times (DB clock, UTC).
type jobTimes struct {
	create, started, finished time.Time
}

// readJobTimes returns every job of this run by job_key: create_time, the
// first attempt's started_at (job_execution, attempt 1) and finished_at.
func readJobTimes(ctx context.Context, db *sql.DB, prefix string) (map[string]jobTimes, error) {
	rows, err := db.QueryContext(ctx, `SELECT q.job_key, q.create_time, e.started_at, q.finished_at
		FROM job_queue q LEFT JOIN job_attempt e ON e.job_id = q.id AND e.attempt = 1
		WHERE q.job_key LIKE ?`, likePrefix(prefix))
	if err != nil {
		return nil, fmt.Errorf("read back jobs: %w", err)
	}
	defer rows.Close()
	out := map[string]jobTimes{}
	for rows.Next() {
		var key string
		var create time.Time
		var started, finished sql.NullTime
		if err := rows.Scan(&key, &create, &started, &finished); err != nil {
			return nil, fmt.Errorf("read back jobs: %w", err)
		}
		out[key] = jobTimes{create: create, started: started.Time, finished: finished.Time}
	}
	return out, rows.Err()
}
