package store

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// IdleTxReaper ends the sessions that sit idle inside a transaction while
// holding row locks in jobq's database, on servers without
// idle_transaction_timeout (MySQL; see PoolConfig.IdleTxTimeout). A
// replica frozen mid-transaction (SIGSTOP, a paused VM, a partition without
// a TCP reset) otherwise keeps its job rows locked until the server's
// wait_timeout (8 h by default), and the rescue, which skips locked rows,
// cannot return them.
//
// Each pass reads information_schema.innodb_trx joined with
// information_schema.processlist: a transaction with trx_rows_locked > 0
// whose session is in this database, idle (COMMAND 'Sleep') for at least
// IdleFor, started at least IdleFor ago, is ended with KILL CONNECTION;
// the server rolls it back and its locks go. Bound: a frozen holder's rows
// are free at most IdleFor (rounded up to whole seconds: processlist
// counts seconds) plus one Interval after its last statement. Poke runs a
// pass sooner: jobq serve pokes when its rescue pass could not rescue an
// expired run (the row may be held), so a frozen holder of an expired job
// is ended by the first rescue pass that finds its row held once it has
// been idle for IdleFor, not up to an Interval later.
//
// Privileges: a session of the same user is visible and may be killed
// without any; to see and end other users' sessions the reaper's user
// needs PROCESS and CONNECTION_ADMIN (MySQL 8) or SUPER / CONNECTION ADMIN
// (MariaDB). A KILL the server refuses (1095) is counted in Refused, not an
// error: without the privilege the reaper reports, it cannot act.
type IdleTxReaper struct {
	// Store is the store whose database is watched.
	Store *Store
	// IdleFor is how long a session may sit idle in a transaction holding
	// row locks. jobq serve uses Lease/5 (as for idle_transaction_timeout).
	IdleFor time.Duration
	// Interval is the longest time between passes (Run; Poke runs one
	// sooner). jobq serve uses its lease (30s by default) and pokes on a
	// rescue that could not return a run, so a holder of an expired job's
	// row is ended at a rescue pass and any other holder (a frozen claim's
	// WAITING rows, say) within IdleFor + Lease. Each pass is one
	// statement; at the rescue interval (10s, as before) they were 0.1 of
	// an idle replica's 1.38 statements/s (jobq bench, 21s window).
	Interval time.Duration
	// OnReapFunc, when set, is called after each pass with what it did.
	OnReapFunc func(ReapResult)

	pokeOnce sync.Once
	poke     chan struct{}
}

// pokes returns the channel Poke signals (made once).
func (r *IdleTxReaper) pokes() chan struct{} {
	r.pokeOnce.Do(func() { r.poke = make(chan struct{}, 1) })
	return r.poke
}

// Poke asks Run for a pass now (one pass for any number of pokes while
// one waits); it never blocks.
func (r *IdleTxReaper) Poke() {
	select {
	case r.pokes() <- struct{}{}:
	default:
	}
}

// ReapResult is one pass of the reaper.
type ReapResult struct {
	// Killed are the connection ids ended; Refused those the server
	// refused to end (no privilege).
	Killed, Refused []uint64
	// Err is the pass's error (reading the server's tables), if any.
	Err error
}

// idleTxHoldersSQL lists the sessions of this database idle in a
// transaction that holds row locks, for at least ? seconds (twice: idle and
// transaction age), excluding the reaper's own session.
const idleTxHoldersSQL = `SELECT p.ID
FROM information_schema.innodb_trx t
JOIN information_schema.processlist p ON p.ID = t.trx_mysql_thread_id
WHERE t.trx_rows_locked > 0
  AND p.DB = DATABASE()
  AND p.COMMAND = 'Sleep'
  AND p.TIME >= ?
  AND t.trx_started <= NOW() - INTERVAL ? SECOND
  AND p.ID <> CONNECTION_ID()`

// ReapOnce runs one pass: it finds and kills the idle holders.
func (r *IdleTxReaper) ReapOnce(ctx context.Context) ReapResult {
	secs := int64((r.IdleFor + time.Second - 1) / time.Second)
	if secs < 1 {
		secs = 1
	}
	conn, err := r.Store.db.Conn(ctx)
	if err != nil {
		return ReapResult{Err: errorf("idle tx reaper: %w", err)}
	}
	defer conn.Close()
	rows, err := conn.QueryContext(ctx, idleTxHoldersSQL, secs, secs)
	if err != nil {
		return ReapResult{Err: errorf("idle tx reaper: list holders: %w", err)}
	}
	var ids []uint64
	for rows.Next() {
		var id uint64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return ReapResult{Err: errorf("idle tx reaper: list holders: %w", err)}
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return ReapResult{Err: errorf("idle tx reaper: list holders: %w", err)}
	}
	var res ReapResult
	for _, id := range ids {
		_, err := conn.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id))
		switch n := ErrorNumber(err); {
		case err == nil, n == 1094: // 1094: unknown thread — it ended meanwhile
			if err == nil {
				res.Killed = append(res.Killed, id)
			}
		case n == 1095: // not the owner of the thread: no privilege
			res.Refused = append(res.Refused, id)
		default:
			res.Err = errorf("idle tx reaper: kill %d: %w", id, err)
		}
	}
	return res
}

// Run runs passes every Interval, and at once on Poke, until ctx ends.
func (r *IdleTxReaper) Run(ctx context.Context) {
	t := time.NewTicker(r.Interval)
	defer t.Stop()
	poke := r.pokes()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-poke:
		}
		res := r.ReapOnce(ctx)
		if r.OnReapFunc != nil && ctx.Err() == nil {
			r.OnReapFunc(res)
		}
	}
}
