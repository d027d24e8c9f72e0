package store_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/store"
	"github.com/jobq/jobq/storeerr"
)

// TestClassify checks the error classification code by code: which errors
// are retried, which are reported as jobq.ErrUnavailable (HTTP 503), and
// the cause named in logs and metrics.
func TestClassify(t *testing.T) {
	my := func(n uint16) error { return fmt.Errorf("op: %w", &mysql.MySQLError{Number: n, Message: "m"}) }
	cases := []struct {
		name  string
		err   error
		kind  store.Kind
		cause string
	}{
		{"nil", nil, store.KindNone, ""},
		{"1213 deadlock / certification conflict", my(1213), store.KindConflict, "deadlock"},
		{"1205 lock wait timeout", my(1205), store.KindConflict, "lock_wait_timeout"},
		{"1317 query interrupted", my(1317), store.KindConflict, "query_killed"},
		{"1290 read-only", my(1290), store.KindUnavailable, "read_only"},
		{"1836 innodb read-only", my(1836), store.KindUnavailable, "read_only"},
		{"1792 read-only transaction", my(1792), store.KindUnavailable, "read_only"},
		{"1047 wsrep not ready", my(1047), store.KindUnavailable, "wsrep_not_ready"},
		{"1053 shutdown", my(1053), store.KindUnavailable, "shutdown"},
		{"1927 connection killed", my(1927), store.KindUnavailable, "connection_lost"},
		{"2006 server gone", my(2006), store.KindUnavailable, "connection_lost"},
		{"2013 server lost", my(2013), store.KindUnavailable, "connection_lost"},
		{"1159 net read timeout", my(1159), store.KindUnavailable, "connection_lost"},
		{"1161 net write timeout", my(1161), store.KindUnavailable, "connection_lost"},
		{"1040 too many connections", my(1040), store.KindUnavailable, "too_many_connections"},
		{"1180 error during commit (Galera node left the primary component)", my(1180), store.KindUnavailable, "wsrep_not_ready"},
		{"1203 max_user_connections (MySQL)", my(1203), store.KindUnavailable, "too_many_connections"},
		{"1226 max_user_connections (MariaDB)", my(1226), store.KindUnavailable, "too_many_connections"},
		{"3100 replication hook", my(3100), store.KindUnavailable, "replication_refused"},
		{"3101 rollback during commit", my(3101), store.KindUnavailable, "replication_refused"},
		{"driver.ErrBadConn", fmt.Errorf("x: %w", driver.ErrBadConn), store.KindUnavailable, "connection_lost"},
		{"mysql.ErrInvalidConn", fmt.Errorf("x: %w", mysql.ErrInvalidConn), store.KindUnavailable, "connection_lost"},
		{"io.EOF", io.ErrUnexpectedEOF, store.KindUnavailable, "connection_lost"},
		{"connection refused", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, store.KindUnavailable, "connection_lost"},
		{"ErrUnavailable itself", jobq.ErrUnavailable, store.KindUnavailable, "connection_lost"},
		{"1062 duplicate key", my(1062), store.KindPermanent, ""},
		{"1146 no such table", my(1146), store.KindPermanent, ""},
		{"1054 unknown column", my(1054), store.KindPermanent, ""},
		{"1064 syntax", my(1064), store.KindPermanent, ""},
		{"1406 data too long", my(1406), store.KindPermanent, ""},
		{"1665 binlog statement mode", my(1665), store.KindPermanent, ""},
		{"1045 access denied", my(1045), store.KindPermanent, ""},
		{"context canceled", context.Canceled, store.KindPermanent, ""},
		{"deadline exceeded", fmt.Errorf("x: %w", context.DeadlineExceeded), store.KindPermanent, ""},
		{"plain error", errors.New("boom"), store.KindPermanent, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := store.Classify(c.err); got != c.kind {
				t.Fatalf("Classify = %s, want %s", got, c.kind)
			}
			wantRetry := c.kind == store.KindConflict || c.kind == store.KindUnavailable
			if got := store.IsRetryable(c.err); got != wantRetry {
				t.Fatalf("IsRetryable = %v, want %v", got, wantRetry)
			}
			if got := store.Cause(c.err); got != c.cause {
				t.Fatalf("Cause = %q, want %q", got, c.cause)
			}
			// Marked, the error says the same to code that links no driver.
			marked := store.Mark(c.err)
			if got := storeerr.Classify(marked); got != c.kind {
				t.Fatalf("storeerr.Classify(Mark(err)) = %s, want %s", got, c.kind)
			}
			if got := storeerr.Cause(marked); got != c.cause {
				t.Fatalf("storeerr.Cause(Mark(err)) = %q, want %q", got, c.cause)
			}
			if c.err != nil && (!errors.Is(marked, c.err) || marked.Error() != c.err.Error()) {
				t.Fatalf("Mark(err) = %v, want err itself reachable and its text unchanged", marked)
			}
			if got := errors.Is(marked, jobq.ErrUnavailable); got != (c.kind == store.KindUnavailable) {
				t.Fatalf("errors.Is(Mark(err), ErrUnavailable) = %v, want %v", got, !got)
			}
			if store.Mark(marked) != marked {
				t.Fatal("Mark of a marked error marked it again")
			}
		})
	}
}

// TestReadOnlyIsUnavailable makes the real server refuse writes for one
// session (SET SESSION TRANSACTION READ ONLY: 1792, the same refusal a
// demoted primary gives) and checks that the store returns
// jobq.ErrUnavailable with the driver error still inside.
func TestReadOnlyIsUnavailable(t *testing.T) {
	ctx := context.Background()
	cfg, err := mysql.ParseDSN(testdb.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["tx_read_only"] = "1"
	st, err := store.Open(ctx, cfg.FormatDSN(), store.PoolConfig{MaxOpen: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, _, err = st.JobSubmit(ctx, jobq.SubmitParams{JobType: "x", Params: `{}`})
	if !errors.Is(err, jobq.ErrUnavailable) {
		t.Fatalf("submit on a read-only session: err = %v, want jobq.ErrUnavailable", err)
	}
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != store.ErrNumReadOnlyTx {
		t.Fatalf("driver error = %v, want %d", err, store.ErrNumReadOnlyTx)
	}
}
