package chaos

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/client"
	"github.com/jobq/jobq/cronplan"
	"github.com/jobq/jobq/testbed/chaos/checker"
	"github.com/jobq/jobq/testbed/jobtypes"
)

// FireLedgerDuration and FireLedgerEvery are the policy-fire-ledger
// scenario's window and schedule: 60 instants.
const (
	FireLedgerDuration = 10 * time.Minute
	FireLedgerEvery    = "@every 10s"
)

// FireLedger is the policy-fire-ledger scenario: 10 minutes on the
// primary-replica topology with semi-sync replication (an async failover
// may lose acknowledged commits, which failover-async measures), the
// FireLedgerEvery schedule beside the workload, each replica SIGKILLed
// twice around one failover at half time.
func FireLedger(cfg *Config) {
	cfg.Duration = FireLedgerDuration
	cfg.Topology, cfg.Replication = TopologyPrimaryReplica, ReplicationSemiSync
	cfg.Periodic = FireLedgerEvery
	cfg.Faults, cfg.Rounds = []string{FaultKill, FaultFailover}, 1
	d := cfg.Duration
	cfg.Schedule = fmt.Sprintf("kill@%s:replica-1,kill@%s:replica-2,kill@%s:replica-3,failover@%s,kill@%s:replica-1,kill@%s:replica-2,kill@%s:replica-3",
		d*8/100, d*18/100, d*28/100, d/2, d*64/100, d*76/100, d*88/100)
}

// PeriodicName is the name of the schedule a run with Config.Periodic adds.
const PeriodicName = "chaos-tick"

// periodicJobMs is how long each of the schedule's effect jobs works.
const periodicJobMs = 50

// apiTry calls f with a client of each live replica in turn until one
// answers without a transport error or 5xx, for up to deadline.
func (cl *cluster) apiTry(ctx context.Context, deadline time.Duration, f func(*client.Client) error) error {
	hc := &http.Client{Timeout: submitTimeout}
	defer hc.CloseIdleConnections()
	end := time.Now().Add(deadline)
	var err error
	for try := 0; time.Now().Before(end) && ctx.Err() == nil; try++ {
		n := cl.nodes[try%len(cl.nodes)]
		r := n.current()
		if r == nil || !r.Alive() {
			continue
		}
		c := client.New(r.URL())
		c.HTTP = hc
		if err = f(c); err == nil {
			return nil
		}
		var apiErr *client.APIError
		if errors.As(err, &apiErr) && apiErr.Status < 500 {
			return err
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
	return cmpErr(err, ctx.Err(), errors.New("no replica answered"))
}

func cmpErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// startPeriodic creates the run's schedule (Config.Periodic) through a
// replica's API and returns its first instant (its cursor on the database
// clock).
func (cl *cluster) startPeriodic(ctx context.Context) (time.Time, error) {
	req := apitype.PeriodicRequest{Name: PeriodicName, Cron: cl.cfg.Periodic, JobType: jobtypes.Effect,
		Params: json.RawMessage(fmt.Sprintf(`{"ms":%d}`, periodicJobMs)), MaxRetry: &cl.cfg.MaxRetry, Overlap: cl.cfg.PeriodicOverlap}
	var p apitype.Periodic
	err := cl.apiTry(ctx, submitDeadline, func(c *client.Client) (err error) {
		p, _, err = c.PutPeriodic(ctx, req)
		return err
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("create schedule %s: %w", PeriodicName, err)
	}
	return p.NextRunAt.UTC(), nil
}

// endPeriodic waits until the schedule's cursor (read on db) has passed
// from + Duration — every instant of the window recorded — or until the
// wait for it runs out (then the checker reports what is missing), removes
// the schedule through a replica's API (its ledger stays) and returns the
// schedule the checker judges, window [from, from + Duration), without its
// ledger (LoadHistory reads it).
func (cl *cluster) endPeriodic(ctx context.Context, db *sql.DB, from time.Time) checker.Schedule {
	to := from.Add(cl.cfg.Duration)
	s := checker.Schedule{Name: PeriodicName, Cron: cl.cfg.Periodic, Overlap: cl.cfg.PeriodicOverlap, From: from, To: to}
	period := 10 * time.Second
	if sched, err := cronplan.Parse(cl.cfg.Periodic); err == nil {
		period = max(sched.Next(to).Sub(to), time.Second)
	}
	log := cl.cfg.Log.With("component", "chaos")
	for deadline := time.Now().Add(2*period + 30*time.Second); ctx.Err() == nil; {
		var cursor time.Time
		err := db.QueryRowContext(ctx, `SELECT next_run_at FROM periodic_job WHERE name = ?`, PeriodicName).Scan(&cursor)
		if err == nil && !cursor.Before(to) {
			break
		}
		if time.Now().After(deadline) {
			log.Warn("schedule cursor did not pass the window's end", "cursor", cursor, "to", to, "err", err)
			break
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
	err := cl.apiTry(ctx, submitDeadline, func(c *client.Client) error { return c.DeletePeriodic(ctx, PeriodicName) })
	if err != nil {
		log.Warn("remove schedule through the API failed; removing its row", "err", err)
		if _, err := db.ExecContext(ctx, `DELETE FROM periodic_job WHERE name = ?`, PeriodicName); err != nil {
			log.Warn("remove schedule", "err", err)
		}
	}
	return s
}

// loadFires reads schedule name's fire ledger, oldest instant first.
func loadFires(ctx context.Context, db *sql.DB, name string) ([]checker.Fire, error) {
	rows, err := db.QueryContext(ctx, `SELECT instant, fate, COALESCE(reason, ''), COALESCE(job_id, 0), covers, record_time
		FROM periodic_fire WHERE name = ? ORDER BY instant`, name)
	if err != nil {
		return nil, fmt.Errorf("load history: fire ledger: %w", err)
	}
	defer rows.Close()
	var out []checker.Fire
	for rows.Next() {
		var f checker.Fire
		if err := rows.Scan(&f.Instant, &f.Fate, &f.Reason, &f.JobID, &f.Covers, &f.RecordTime); err != nil {
			return nil, fmt.Errorf("load history: fire ledger: %w", err)
		}
		f.Instant, f.RecordTime = f.Instant.UTC(), f.RecordTime.UTC()
		out = append(out, f)
	}
	return out, rows.Err()
}
