package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/gen/jobqdb"
)

// renewSession is the heartbeat's own connection, held out of the pool: the
// lease renewal and the fence read never wait for a pooled connection (a
// replica whose completions, claims or rescues wait on locks or on a slow
// link can have every pooled connection busy). The session is set up so the
// renewal (LeaseRenewMany, one autocommit statement) holds as few locks as
// it can, as briefly:
//
//   - READ COMMITTED: a renewal lists every run the replica believes it
//     holds; the row of a run that was lost (rescued, re-claimed by a peer)
//     does not match "owner = ?", and at READ COMMITTED it is unlocked as
//     soon as it is evaluated. At REPEATABLE READ it stayed locked until the
//     statement ended, and a slow replica's renewal waiting on one of its own
//     rows made the peer that now held the job wait with it, for its own
//     renewal (sampled in INNODB_LOCK_WAITS in the slow-link scenario).
//   - innodb_lock_wait_timeout of one heartbeat interval (Lease/3, at least
//     1 s): the renewal skips locked rows and should never wait; should a
//     statement on this session wait anyway, the server ends it within an
//     interval instead of the default 50 s, long after the heartbeat gave up
//     on it, so it cannot keep rows locked after the client stopped listening.
type renewSession struct {
	mu   sync.Mutex
	conn *sql.Conn
}

// renewConn returns the heartbeat's session, opening it when there is none.
// The caller holds s.renew.mu.
func (s *Store) renewConn(ctx context.Context, lease time.Duration) (*sql.Conn, error) {
	if s.renew.conn != nil {
		return s.renew.conn, nil
	}
	c, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	if !s.claimDefaultIso.Load() {
		if _, err := c.ExecContext(ctx, setSessionReadCommitted); err != nil {
			discardConn(c)
			return nil, err
		}
	}
	wait := max(int64((lease/3+time.Second-1)/time.Second), 1)
	if _, err := c.ExecContext(ctx, setSessionLockWait, wait); err != nil {
		discardConn(c)
		return nil, err
	}
	s.renew.conn = c
	return c, nil
}

// discardConn closes the heartbeat's session for good: its session settings
// (READ COMMITTED, a short lock wait) must not reach the pool, which
// sql.Conn.Close would return it to — a handler's transaction or a claim
// would then run with them. Raw returning driver.ErrBadConn makes
// database/sql drop the connection instead.
func discardConn(c *sql.Conn) {
	_ = c.Raw(func(any) error { return driver.ErrBadConn })
	_ = c.Close()
}

const (
	setSessionReadCommitted = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"
	setSessionLockWait      = "SET SESSION innodb_lock_wait_timeout = ?"
)

// sessionDB is the heartbeat's session or, without one, the pool.
type sessionDB interface {
	jobqdb.DBTX
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// onRenewSession runs fn with the heartbeat's session. A failure that may
// have left the connection unusable or a statement still running on the
// server (anything but an error the server answered) closes it; the next
// call opens a fresh one. A server that refuses READ COMMITTED writes
// (binlog_format=STATEMENT: 1665) gets a session at its default level, as
// readCommittedTx does. With lease 0 (a read) and no session open, or a pool
// smaller than minPoolForRenewSession, fn runs on the pool.
func (s *Store) onRenewSession(ctx context.Context, lease time.Duration, fn func(db sessionDB) error) error {
	s.renew.mu.Lock()
	defer s.renew.mu.Unlock()
	if s.renew.conn == nil && (lease == 0 || !s.roomForRenewSession()) {
		return fn(s.db)
	}
	c, err := s.renewConn(ctx, lease)
	if err != nil {
		return err
	}
	err = fn(c)
	var me *mysql.MySQLError
	if err != nil && (!errors.As(err, &me) || me.Number == ErrNumBinlogStmtMode) {
		if ErrorNumber(err) == ErrNumBinlogStmtMode {
			s.claimDefaultIso.Store(true)
		}
		discardConn(c)
		s.renew.conn = nil
	}
	return err
}

// OpenRenewSession opens the heartbeat's session (renewSession) now, if the
// pool has room for it, so the first renewal is one round trip too: opening
// it costs a connection's handshake and its two settings, several round
// trips that on a slow link outlast a fresh run's guard.
func (s *Store) OpenRenewSession(ctx context.Context, lease time.Duration) error {
	err := s.onRenewSession(ctx, lease, func(sessionDB) error { return nil })
	if err != nil {
		return errorf("open renew session: %w", err)
	}
	return nil
}

// minPoolForRenewSession is the smallest pool that gives one connection to
// the heartbeat for good: with fewer, the rest of the replica would be left
// too few, and the heartbeat shares the pool.
const minPoolForRenewSession = 4

func (s *Store) roomForRenewSession() bool {
	n := s.db.Stats().MaxOpenConnections
	return n == 0 || n >= minPoolForRenewSession
}

// closeRenewSession closes the heartbeat's session (discardConn).
func (s *Store) closeRenewSession() {
	s.renew.mu.Lock()
	defer s.renew.mu.Unlock()
	if s.renew.conn != nil {
		discardConn(s.renew.conn)
		s.renew.conn = nil
	}
}

// LeaseRenewMany extends lease_until to NOW(6)+Lease for the RUNNING jobs
// in IDs that this owner holds, whose cancel was not requested and whose row
// no other transaction holds, and returns their ids. It is one statement in
// autocommit, one round trip, on the heartbeat's READ COMMITTED session
// (renewSession): LeaseRenewSkipLocked locks the rows no other transaction
// holds (SKIP LOCKED) and renews them, so a renewal never waits for a lock —
// not for the replica's own outcome writes, not for a slow peer — and holds
// its rows only while the statement runs: on a slow link it no longer keeps
// them locked across round trips, where the replica's own completions
// waited for it. When it renewed every row (the common case) that is all;
// when it renewed none, none is renewed; when it renewed some, one
// non-locking read on the same session (LeaseRenewedIDs) returns the rows
// that carry its stamp. Without a session of its own (a pool smaller than
// minPoolForRenewSession) it is a READ COMMITTED transaction that returns
// the ids it renewed (LeaseLockRenewable, a locking read that skips held
// rows, then LeaseRenewMany of those). A run missing from the result was
// lost, asked to cancel, or is busy (its row held: most often by its own
// outcome write); JobFenceStates tells which.
func (s *Store) LeaseRenewMany(ctx context.Context, p jobq.LeaseRenewParams) ([]uint64, error) {
	if len(p.IDs) == 0 {
		return nil, nil
	}
	owner := sql.NullString{String: p.Owner, Valid: true}
	var renewed []uint64
	err := s.onRenewSession(ctx, p.Lease, func(db sessionDB) error {
		renewed = nil
		_, pooled := db.(*sql.DB)
		if !pooled {
			var n int64
			err := s.timedRoundTrip(func() (err error) {
				n, err = jobqdb.New(db).LeaseRenewSkipLocked(ctx, jobqdb.LeaseRenewSkipLockedParams{Ids: p.IDs, Owner: owner, LeaseUs: p.Lease.Microseconds()})
				return err
			})
			switch {
			case err != nil:
				return err
			case n == 0:
				return nil
			case int(n) == len(p.IDs):
				renewed = p.IDs
				return nil
			}
			renewed, err = jobqdb.New(db).LeaseRenewedIDs(ctx, jobqdb.LeaseRenewedIDsParams{Ids: p.IDs, Owner: owner, LeaseUs: p.Lease.Microseconds()})
			return err
		}
		// No session of its own (a small pool): a transaction that returns
		// the ids it renewed.
		var opts *sql.TxOptions
		if pooled && !s.claimDefaultIso.Load() {
			opts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
		}
		tx, err := db.BeginTx(ctx, opts)
		if err != nil {
			return err
		}
		q := jobqdb.New(db).WithTx(tx)
		ids, err := q.LeaseLockRenewable(ctx, jobqdb.LeaseLockRenewableParams{Ids: p.IDs, Owner: owner})
		if err == nil && len(ids) > 0 {
			var n int64
			n, err = q.LeaseRenewMany(ctx, jobqdb.LeaseRenewManyParams{LeaseUs: p.Lease.Microseconds(), Ids: ids, Owner: owner})
			if err == nil && int(n) != len(ids) {
				err = errFenceMoved
			}
		}
		if err != nil {
			_ = tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		renewed = ids
		return nil
	})
	if err != nil {
		return nil, errorf("lease renew: %w", err)
	}
	return renewed, nil
}

// JobFenceStates reads the holder of each job in ids. It is the heartbeat's
// read after a renewal that matched fewer rows, so it runs on the heartbeat's
// session (renewSession) when one is open, else on a pooled connection.
func (s *Store) JobFenceStates(ctx context.Context, ids []uint64) ([]jobq.FenceState, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var rows []jobqdb.JobFenceStatesRow
	read := func(db sessionDB) error {
		var err error
		rows, err = jobqdb.New(db).JobFenceStates(ctx, ids)
		return err
	}
	err := s.onRenewSession(ctx, 0, read)
	if err != nil {
		return nil, errorf("fence states: %w", err)
	}
	out := make([]jobq.FenceState, len(rows))
	for i, r := range rows {
		out[i] = jobq.FenceState{ID: r.ID, Attempt: int(r.Attempt), Status: jobq.JobState(r.Status), Owner: r.Owner.String, CancelRequested: r.CancelRequested}
	}
	return out, nil
}
