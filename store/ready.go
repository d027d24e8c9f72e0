package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// ErrSchemaMismatch is returned by SchemaCheck (and so by Ready) when the
// applied migrations are not exactly this binary's set.
var ErrSchemaMismatch = errors.New("schema is not at this binary's migration version")

// NotReadyError says which readiness check failed and why. Check is one of
// "connect", "read_only", "innodb_read_only", "super_read_only",
// "wsrep_ready", "wsrep_local_state", "schema".
type NotReadyError struct {
	Check  string
	Detail string
	Err    error // the underlying error, if any
}

func (e *NotReadyError) Error() string { return e.Check + ": " + e.Detail }
func (e *NotReadyError) Unwrap() error { return e.Err }

// ReadyCheck returns Check; transports find it with errors.As on an
// interface, without importing store.
func (e *NotReadyError) ReadyCheck() string { return e.Check }

// Ready reports whether this server can take jobq's writes now: it answers,
// it is writable (@@global.read_only, @@global.innodb_read_only, and
// @@global.super_read_only where the server has it, are all 0), a Galera
// node (wsrep_on) is ready and synced (wsrep_ready=ON, wsrep_local_state=4), and the
// schema is exactly this binary's (SchemaCheck). It costs three short
// statements; callers cache it (app: at most once a second). The error is a
// *NotReadyError naming the first failing check.
func (s *Store) Ready(ctx context.Context) error {
	var ro, innoRO int
	err := s.db.QueryRowContext(ctx, "SELECT @@global.read_only, @@global.innodb_read_only").Scan(&ro, &innoRO)
	if err != nil {
		check := "connect"
		if Cause(err) == "wsrep_not_ready" {
			check = "wsrep_ready"
		}
		return &NotReadyError{Check: check, Detail: err.Error(), Err: Mark(err)}
	}
	if ro != 0 {
		return &NotReadyError{Check: "read_only", Detail: "@@global.read_only=1: the server refuses writes (a demoted primary or a replica)", Err: ErrNotWritable}
	}
	if innoRO != 0 {
		return &NotReadyError{Check: "innodb_read_only", Detail: "@@global.innodb_read_only=1: InnoDB refuses writes", Err: ErrNotWritable}
	}
	if !s.Server.MariaDB {
		var sro int
		if err := s.db.QueryRowContext(ctx, "SELECT @@global.super_read_only").Scan(&sro); err == nil && sro != 0 {
			return &NotReadyError{Check: "super_read_only", Detail: "@@global.super_read_only=1: the server refuses writes", Err: ErrNotWritable}
		}
	}
	if err := s.wsrepReady(ctx); err != nil {
		return err
	}
	if err := s.SchemaCheck(ctx); err != nil {
		if Cause(err) == "wsrep_not_ready" { // wsrep_reject_queries, a node that is not ready
			return &NotReadyError{Check: "wsrep_ready", Detail: "wsrep not ready: " + err.Error(), Err: err}
		}
		return &NotReadyError{Check: "schema", Detail: err.Error(), Err: err}
	}
	return nil
}

// ErrNotWritable is the cause inside a NotReadyError whose check found the
// server read-only.
var ErrNotWritable = errors.New("jobq: database refuses writes")

// wsrepReady checks a Galera node: wsrep_ready must be ON and
// wsrep_local_state 4 (Synced). A server without Galera (@@wsrep_on off or
// absent) passes.
func (s *Store) wsrepReady(ctx context.Context) error {
	var on int
	if err := s.db.QueryRowContext(ctx, "SELECT @@global.wsrep_on").Scan(&on); err != nil || on == 0 {
		return nil // not Galera (MySQL has no wsrep_on: error 1193)
	}
	rows, err := s.db.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_ready', 'wsrep_local_state', 'wsrep_local_state_comment')")
	if err != nil {
		return &NotReadyError{Check: "wsrep_ready", Detail: err.Error(), Err: Mark(err)}
	}
	defer rows.Close()
	st := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return &NotReadyError{Check: "connect", Detail: err.Error(), Err: Mark(err)}
		}
		st[strings.ToLower(k)] = v
	}
	if err := rows.Err(); err != nil {
		return &NotReadyError{Check: "connect", Detail: err.Error(), Err: Mark(err)}
	}
	if v, ok := st["wsrep_ready"]; ok && !strings.EqualFold(v, "ON") {
		return &NotReadyError{Check: "wsrep_ready", Detail: "wsrep not ready: wsrep_ready=" + v, Err: ErrNotWritable}
	}
	if v, ok := st["wsrep_local_state"]; ok && v != "4" {
		return &NotReadyError{Check: "wsrep_local_state", Detail: fmt.Sprintf("wsrep not ready: wsrep_local_state=%s (%s), want 4 (Synced)", v, st["wsrep_local_state_comment"]), Err: ErrNotWritable}
	}
	return nil
}

// SchemaCheck compares the applied migrations with this binary's set. The
// migrator is set-based (numbers are reserved, gaps are allowed), so the
// sets must be equal, not only their maximum. The error wraps
// ErrSchemaMismatch and names the fix: `jobq migrate up` when migrations are
// missing, a newer jobq binary when the database has migrations this binary
// does not know.
func (s *Store) SchemaCheck(ctx context.Context) error {
	all, err := Migrations()
	if err != nil {
		return err
	}
	rows, err := s.db.QueryContext(ctx, "SELECT version FROM jobq_schema_migrations")
	if ErrorNumber(err) == 1146 { // ER_NO_SUCH_TABLE
		return fmt.Errorf("%w: the database has no jobq schema; run `jobq migrate up`", ErrSchemaMismatch)
	}
	if err != nil {
		return errorf("schema check: %w", err)
	}
	defer rows.Close()
	applied := map[int]bool{}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return errorf("schema check: %w", err)
		}
		applied[v] = true
	}
	if err := rows.Err(); err != nil {
		return errorf("schema check: %w", err)
	}
	var missing, unknown []string
	known := map[int]bool{}
	for _, m := range all {
		known[m.Version] = true
		if !applied[m.Version] {
			missing = append(missing, fmt.Sprintf("%03d_%s", m.Version, m.Name))
		}
	}
	for v := range applied {
		if !known[v] {
			unknown = append(unknown, fmt.Sprintf("%03d", v))
		}
	}
	sort.Strings(unknown)
	switch {
	case len(unknown) > 0:
		return fmt.Errorf("%w: the database has migrations %s that this binary does not know; run the newer jobq binary that applied them", ErrSchemaMismatch, strings.Join(unknown, ", "))
	case len(missing) > 0:
		return fmt.Errorf("%w: migrations %s are not applied; run `jobq migrate up`", ErrSchemaMismatch, strings.Join(missing, ", "))
	}
	return nil
}

// ReadyCache caches Ready for at most MaxAge so /readyz, the gRPC health
// check and the jobq_db_writable gauge cost the database at most one check
// a second however often they are asked.
type ReadyCache struct {
	// CheckFunc is the check (Store.Ready).
	CheckFunc func(ctx context.Context) error
	// MaxAge is how long a result is reused. Defaults to 1s.
	MaxAge time.Duration

	mu  sync.Mutex
	at  time.Time
	err error
}

// Check returns the cached result if it is younger than MaxAge, else runs
// CheckFunc (one caller at a time; the others wait for its result).
func (c *ReadyCache) Check(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	maxAge := c.MaxAge
	if maxAge <= 0 {
		maxAge = time.Second
	}
	if !c.at.IsZero() && time.Since(c.at) < maxAge {
		return c.err
	}
	c.err = c.CheckFunc(ctx)
	c.at = time.Now()
	return c.err
}

// Writable returns 1 when the last check passed, else 0 (for a gauge).
func (c *ReadyCache) Writable() float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if c.Check(ctx) != nil {
		return 0
	}
	return 1
}
