package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/go-sql-driver/mysql"

	"github.com/jobq/jobq/testbed/chaos/checker"
)

// primaryReplica is two mariadbd with MariaDB GTID replication. The jobq
// replicas' links all forward to one proxy address (front), which forwards
// to the current primary; the replica's replication connection to the
// primary goes through a link of its own (repl) so that the harness can cut
// replication.
type primaryReplica struct {
	cl      *cluster
	mode    string
	primary *topoServer
	replica *topoServer
	front   *toxiproxy.Proxy
	repl    *link
	dir     string
	// demoted is the old primary after a failover; failedAt is when the
	// failover began and cut how long replication was cut before it.
	demoted  *topoServer
	failedAt time.Time
	cut      time.Duration
}

func replicationArgs(id int, mode string) []string {
	a := []string{"--server-id=" + strconv.Itoa(id), "--log-bin=mysql-bin", "--log-slave-updates", "--binlog-format=ROW",
		"--gtid-strict-mode=1", "--sync-binlog=1", "--innodb-flush-log-at-trx-commit=1", "--relay-log=relay-bin",
		"--slave-net-timeout=10"}
	// Semi-sync: the primary waits (AFTER_SYNC, no fallback) and the
	// replica acknowledges. Only the primary may wait: with
	// rpl_semi_sync_master_wait_no_slave=ON a replica that had the master
	// side on would block its own applier's commits waiting for replicas it
	// does not have. The promoted replica therefore runs without semi-sync
	// (it has no replica left).
	switch {
	case mode == ReplicationSemiSync && id == 1:
		a = append(a, "--rpl-semi-sync-master-enabled=ON", "--rpl-semi-sync-master-wait-point=AFTER_SYNC",
			"--rpl-semi-sync-master-timeout=3600000")
	case mode == ReplicationSemiSync:
		a = append(a, "--rpl-semi-sync-slave-enabled=ON")
	}
	return a
}

func startPrimaryReplica(ctx context.Context, cl *cluster) (_ *primaryReplica, err error) {
	pr := &primaryReplica{cl: cl, mode: cl.cfg.Replication}
	if pr.dir, err = topoDir("primary-replica"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			pr.close()
		}
	}()
	ports, err := lowPorts(2)
	if err != nil {
		return nil, err
	}
	for i, name := range []string{"db-a", "db-b"} {
		s, err := newTopoServer(ctx, pr.dir, name, ports[i], true, replicationArgs(i+1, pr.mode))
		if err != nil {
			return nil, err
		}
		if err := s.start(ctx); err != nil {
			return nil, err
		}
		if i == 0 {
			pr.primary = s
		} else {
			pr.replica = s
		}
	}
	if pr.repl, err = newLink(cl.toxi, "replication", pr.primary.addr()); err != nil {
		return nil, err
	}
	if err := pr.follow(ctx, pr.replica, pr.repl.Addr()); err != nil {
		return nil, err
	}
	pr.front = toxiproxy.NewProxy(cl.toxi, "primary", "127.0.0.1:0", pr.primary.addr())
	if err := pr.front.Start(); err != nil {
		return nil, fmt.Errorf("primary proxy: %w", err)
	}
	return pr, nil
}

// follow makes s a read-only replica of the server at addr and waits until
// its replication threads run (and, semi-sync, the primary counts it).
func (pr *primaryReplica) follow(ctx context.Context, s *topoServer, addr string) error {
	host, port, _ := strings.Cut(addr, ":")
	if err := s.exec(ctx, "SET GLOBAL read_only=1",
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='%s', MASTER_PORT=%s, MASTER_USER='root', MASTER_PASSWORD='', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1", host, port),
		"START SLAVE"); err != nil {
		return err
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		io, sqlRunning := pr.slaveRunning(ctx, s)
		semiOK := pr.mode != ReplicationSemiSync || pr.primary.status(ctx, "Rpl_semi_sync_master_clients") == "1"
		if io && sqlRunning && semiOK {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: replication did not start within 30s (io %v, sql %v, semi-sync client %v): see %s",
				s.name, io, sqlRunning, semiOK, s.errorLog())
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
}

// slaveStatus reads SHOW SLAVE STATUS of s as column → value.
func slaveStatus(ctx context.Context, s *topoServer) (map[string]string, error) {
	db, err := sql.Open("mysql", s.dsn())
	if err != nil {
		return nil, err
	}
	defer db.Close()
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rows, err := db.QueryContext(qctx, "SHOW SLAVE STATUS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	if !rows.Next() {
		return nil, errors.New("not a replica")
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(cols))
	for i, c := range cols {
		out[c] = vals[i].String
	}
	return out, rows.Err()
}

func (pr *primaryReplica) slaveRunning(ctx context.Context, s *topoServer) (io, sqlRunning bool) {
	st, err := slaveStatus(ctx, s)
	if err != nil {
		return false, false
	}
	return st["Slave_IO_Running"] == "Yes", st["Slave_SQL_Running"] == "Yes"
}

func (pr *primaryReplica) serverDSN() string { return "root@tcp(" + pr.front.Listen + ")/" }

func (pr *primaryReplica) upstream(int) string { return pr.front.Listen }

func (pr *primaryReplica) describe() string {
	return fmt.Sprintf("primary-replica (%s): primary %s on %s, replica %s on %s, replicas through %s",
		pr.mode, pr.primary.name, pr.primary.addr(), pr.replica.name, pr.replica.addr(), pr.front.Listen)
}

func (pr *primaryReplica) close() {
	if pr.front != nil {
		pr.front.Stop()
	}
	if pr.repl != nil {
		pr.repl.stop()
	}
	for _, s := range []*topoServer{pr.primary, pr.replica, pr.demoted} {
		if s != nil {
			s.stop(20 * time.Second)
		}
	}
	if pr.dir != "" && !pr.cl.cfg.Keep {
		_ = os.RemoveAll(pr.dir)
	}
}

// inject handles FaultFailover:
//
//  1. cut replication (the replica's link to the primary is blackholed)
//     for Config.FailoverCut — the replica falls behind while the primary
//     goes on accepting (async) or blocking (semi-sync) commits;
//  2. stop the proxy: every client connection to the old primary is
//     closed and new ones are refused;
//  3. demote the old primary: kill its client sessions, read_only=1;
//  4. promote the replica: stop its receiver, wait until it has applied
//     everything it received (MASTER_GTID_WAIT on its Gtid_IO_Pos), stop
//     replication, read_only=0;
//  5. point the proxy at the new primary and start it again.
func (pr *primaryReplica) inject(ctx context.Context, in *injector, pf plannedFault, f *checker.Fault) bool {
	if pf.Kind != FaultFailover {
		return false
	}
	cfg := in.cl.cfg
	if pr.demoted != nil {
		f.Err = "only one failover per run (the demoted primary is not rebuilt as a replica)"
		return true
	}
	old, next := pr.primary, pr.replica
	f.Start = in.toDB(time.Now())
	pr.failedAt, pr.cut = f.Start, cfg.FailoverCut
	var steps []string
	if cfg.FailoverCut > 0 {
		heal, err := pr.repl.cut()
		if err != nil {
			f.Err = err.Error()
			return true
		}
		defer heal()
		steps = append(steps, fmt.Sprintf("replication cut %s", cfg.FailoverCut))
		sleepCtx(ctx, cfg.FailoverCut)
	}
	pr.front.Stop()
	steps = append(steps, "proxy stopped")
	if err := demote(ctx, old); err != nil {
		steps = append(steps, "demote failed: "+err.Error())
	} else {
		steps = append(steps, old.name+" read_only=1")
	}
	applied, err := promote(ctx, next)
	if err != nil {
		f.Err = err.Error()
	}
	steps = append(steps, fmt.Sprintf("%s applied its relay log up to %s and was promoted", next.name, applied))
	pr.front.Upstream = next.addr()
	if err := pr.front.Start(); err != nil {
		f.Err = fmt.Sprintf("restart proxy on %s: %v", pr.front.Listen, err)
	}
	steps = append(steps, "proxy → "+next.name)
	pr.primary, pr.replica, pr.demoted = next, nil, old
	f.Detail = fmt.Sprintf("failover (%s): %s", pr.mode, strings.Join(steps, "; "))
	f.End = in.toDB(time.Now())
	return true
}

// demote kills every client session of s and sets read_only=1.
func demote(ctx context.Context, s *topoServer) error {
	db, err := sql.Open("mysql", s.dsn())
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	qctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	rows, err := db.QueryContext(qctx, `SELECT id FROM information_schema.processlist
		WHERE id <> CONNECTION_ID() AND user NOT IN ('system user', 'event_scheduler') AND command NOT IN ('Binlog Dump', 'Daemon')`)
	if err != nil {
		return err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if rows.Scan(&id) == nil {
			ids = append(ids, id)
		}
	}
	rows.Close()
	for _, id := range ids {
		_, _ = db.ExecContext(qctx, "KILL "+strconv.FormatInt(id, 10))
	}
	_, err = db.ExecContext(qctx, "SET GLOBAL read_only=1")
	return err
}

// promote stops s's receiver, waits until s applied every event it
// received and makes it a writable primary. It returns the GTID position it
// applied.
func promote(ctx context.Context, s *topoServer) (string, error) {
	if err := s.exec(ctx, "STOP SLAVE IO_THREAD"); err != nil {
		return "", err
	}
	st, err := slaveStatus(ctx, s)
	if err != nil {
		return "", err
	}
	pos := st["Gtid_IO_Pos"]
	db, err := sql.Open("mysql", s.dsn())
	if err != nil {
		return pos, err
	}
	defer db.Close()
	qctx, cancel := context.WithTimeout(ctx, 65*time.Second)
	defer cancel()
	var res sql.NullInt64
	if err := db.QueryRowContext(qctx, "SELECT MASTER_GTID_WAIT(?, 60)", pos).Scan(&res); err != nil || res.Int64 != 0 {
		return pos, fmt.Errorf("%s: applying the relay log up to %s: result %v, %v", s.name, pos, res.Int64, err)
	}
	return pos, s.exec(ctx, "STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only=0")
}

// report compares the demoted primary's record with the new primary's: the
// checker judged the new one (h), the old one is read here.
func (pr *primaryReplica) report(ctx context.Context, rf *ResultFile, h *checker.History) {
	tr := &TopologyReport{Kind: TopologyPrimaryReplica, Replication: pr.mode}
	for _, s := range []*topoServer{pr.primary, pr.replica, pr.demoted} {
		if s == nil {
			continue
		}
		role := "replica"
		switch s {
		case pr.primary:
			role = "primary"
		case pr.demoted:
			role = "demoted primary"
		}
		tr.Servers = append(tr.Servers, fmt.Sprintf("%s %s (%s)", s.name, s.addr(), role))
	}
	rf.Topology = tr
	if pr.demoted == nil {
		return
	}
	fr := FailoverReport{ReplicationCutS: pr.cut.Seconds(), AckedMissing: rf.Result.Counts.AckedMissing, Examples: []string{}}
	old, err := readOldPrimary(ctx, pr.demoted, pr.cl.dsn)
	if err != nil {
		fr.Examples = append(fr.Examples, "reading the demoted primary: "+err.Error())
		tr.Failovers = append(tr.Failovers, fr)
		return
	}
	newByKey := map[string]checker.Job{}
	for _, j := range h.Jobs {
		newByKey[j.Key] = j
	}
	newExecs := map[uint64][]checker.Execution{}
	for _, e := range h.Executions {
		newExecs[e.JobID] = append(newExecs[e.JobID], e)
	}
	example := func(s string) {
		if len(fr.Examples) < 10 {
			fr.Examples = append(fr.Examples, s)
		}
	}
	for key, oj := range old {
		nj, ok := newByKey[key]
		if !ok {
			fr.OnOldPrimaryOnly++
		}
		if oj.successAttempt == 0 {
			continue
		}
		var sameSuccess, rerun bool
		for _, e := range newExecs[nj.ID] {
			if !ok {
				break
			}
			if e.Attempt == oj.successAttempt && e.Outcome == checker.OutcomeSuccess {
				sameSuccess = true
			}
			if e.StartedAt.After(oj.successAt) {
				rerun = true
			}
		}
		if !sameSuccess {
			fr.SuccessLost++
			example(fmt.Sprintf("%s: SUCCESS by attempt %d on the demoted primary; new primary: %s", key, oj.successAttempt, describeJob(nj, ok)))
		}
		if rerun {
			fr.Rerun++
			example(fmt.Sprintf("%s: SUCCESS on the demoted primary at %s, claimed again on the new one", key, oj.successAt.Format(time.RFC3339Nano)))
		}
	}
	tr.Failovers = append(tr.Failovers, fr)
}

func describeJob(j checker.Job, ok bool) string {
	if !ok {
		return "no such job"
	}
	return fmt.Sprintf("%s, attempt %d", j.Status, j.Attempt)
}

// oldJob is a job as the demoted primary recorded it.
type oldJob struct {
	successAttempt int
	successAt      time.Time
}

// readOldPrimary reads every job of the run's database on s by key, with
// its successful execution if any.
func readOldPrimary(ctx context.Context, s *topoServer, runDSN string) (map[string]oldJob, error) {
	rc, err := mysql.ParseDSN(runDSN)
	if err != nil {
		return nil, err
	}
	sc, err := mysql.ParseDSN(s.dsn())
	if err != nil {
		return nil, err
	}
	sc.DBName, sc.ParseTime = rc.DBName, true
	db, err := sql.Open("mysql", sc.FormatDSN())
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT q.job_key, COALESCE(e.attempt, 0), COALESCE(e.finished_at, q.create_time)
		FROM job_queue q LEFT JOIN job_attempt e ON e.job_id = q.id AND e.outcome = 'SUCCESS'`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]oldJob{}
	for rows.Next() {
		var key string
		var j oldJob
		if err := rows.Scan(&key, &j.successAttempt, &j.successAt); err != nil {
			return nil, err
		}
		j.successAt = j.successAt.UTC()
		out[key] = j
	}
	return out, rows.Err()
}
