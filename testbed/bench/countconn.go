package bench

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/jobq/jobq/store"
)

// StmtCounter counts the statements one pool sends to the server, exactly
// as the server's Questions counter would for that client alone: every
// query, exec, START TRANSACTION (BeginTx), COMMIT and ROLLBACK. It is how
// the harness measures a replica's statements per job and its idle cost on
// a server other clients share (SHOW GLOBAL STATUS counts everyone).
// It also sums the rows its writes changed (RowsAffected of every
// successful exec: rows inserted, updated or deleted).
//
// Profile, when set before the pool is opened, also times every statement
// by name (StmtProfile).
type StmtCounter struct {
	n, rows atomic.Int64
	Profile *StmtProfile
}

// Load returns the statements counted so far.
func (c *StmtCounter) Load() int64 { return c.n.Load() }

// Rows returns the rows written so far (sum of RowsAffected).
func (c *StmtCounter) Rows() int64 { return c.rows.Load() }

func (c *StmtCounter) addRows(res driver.Result, err error) {
	if err == nil && res != nil {
		if n, e := res.RowsAffected(); e == nil {
			c.rows.Add(n)
		}
	}
}

// OpenCountingDB opens a pool on dsn (normalised by store.NormalizeDSN, so
// it behaves like store.Open's) whose statements are counted in c.
func OpenCountingDB(dsn string, maxOpen int, c *StmtCounter) (*sql.DB, error) {
	return openWrappedDB(dsn, maxOpen, func(conn driver.Conn) driver.Conn {
		return &countingConn{connBase: connBase{conn}, c: c}
	})
}

// openWrappedDB opens a pool on dsn (normalised by store.NormalizeDSN)
// whose every connection is wrap of a go-sql-driver/mysql connection.
func openWrappedDB(dsn string, maxOpen int, wrap func(driver.Conn) driver.Conn) (*sql.DB, error) {
	cfg, err := store.NormalizeDSN(dsn)
	if err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(&wrapConnector{Connector: conn, wrap: wrap})
	db.SetMaxOpenConns(maxOpen)
	db.SetMaxIdleConns(maxOpen)
	return db, nil
}

type wrapConnector struct {
	driver.Connector
	wrap func(driver.Conn) driver.Conn
}

func (cc *wrapConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := cc.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return cc.wrap(conn), nil
}

// connBase forwards the optional interfaces of go-sql-driver/mysql's
// connection that a wrapper does not intercept.
type connBase struct {
	driver.Conn
}

func (cn connBase) Ping(ctx context.Context) error { return cn.Conn.(driver.Pinger).Ping(ctx) }

func (cn connBase) ResetSession(ctx context.Context) error {
	if r, ok := cn.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (cn connBase) IsValid() bool {
	if v, ok := cn.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (cn connBase) CheckNamedValue(nv *driver.NamedValue) error {
	if c, ok := cn.Conn.(driver.NamedValueChecker); ok {
		return c.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// countingConn forwards every optional interface go-sql-driver/mysql's
// connection implements, counting statements on the way.
type countingConn struct {
	connBase
	c *StmtCounter
}

func (cn *countingConn) count(err error) {
	if err != driver.ErrSkip {
		cn.c.n.Add(1)
	}
}

func (cn *countingConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	start := time.Now()
	rows, err := cn.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
	cn.count(err)
	if err != driver.ErrSkip {
		cn.c.Profile.add(q, time.Since(start), err)
	}
	return rows, err
}

func (cn *countingConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	start := time.Now()
	res, err := cn.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
	cn.count(err)
	cn.c.addRows(res, err)
	if err != driver.ErrSkip {
		cn.c.Profile.add(q, time.Since(start), err)
	}
	return res, err
}

func (cn *countingConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	st, err := cn.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	return &countingStmt{Stmt: st, c: cn.c}, nil
}

func (cn *countingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	start := time.Now()
	tx, err := cn.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	cn.c.n.Add(1)
	cn.c.Profile.add("BEGIN", time.Since(start), err)
	if err != nil {
		return nil, err
	}
	return &countingTx{Tx: tx, c: cn.c}, nil
}

type countingTx struct {
	driver.Tx
	c *StmtCounter
}

func (t *countingTx) Commit() error {
	t.c.n.Add(1)
	start := time.Now()
	err := t.Tx.Commit()
	t.c.Profile.add("COMMIT", time.Since(start), err)
	return err
}

func (t *countingTx) Rollback() error {
	t.c.n.Add(1)
	start := time.Now()
	err := t.Tx.Rollback()
	t.c.Profile.add("ROLLBACK", time.Since(start), err)
	return err
}

type countingStmt struct {
	driver.Stmt
	c *StmtCounter
}

func (s *countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.c.n.Add(1)
	res, err := s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
	s.c.addRows(res, err)
	return res, err
}

func (s *countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.c.n.Add(1)
	return s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
}

func (s *countingStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if c, ok := s.Stmt.(driver.NamedValueChecker); ok {
		return c.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}
