package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/go-sql-driver/mysql"
	"github.com/jobq/jobq"
	"github.com/jobq/jobq/storeerr"
)

// ErrSkipLockedUnsupported is returned when the skiplocked strategy is
// requested on a server without SELECT ... FOR UPDATE SKIP LOCKED
// (MySQL < 8.0.1, MariaDB < 10.6).
// It is jobq.ErrSkipLockedUnsupported.
var ErrSkipLockedUnsupported = jobq.ErrSkipLockedUnsupported

// MySQL and MariaDB error numbers jobq branches on.
const (
	ErrNumDeadlock          = 1213 // ER_LOCK_DEADLOCK (also a Galera certification conflict at commit)
	ErrNumLockWaitTimeout   = 1205 // ER_LOCK_WAIT_TIMEOUT
	ErrNumDupEntry          = 1062 // ER_DUP_ENTRY
	ErrNumParseError        = 1064 // ER_PARSE_ERROR (INSERT … RETURNING on a server without it)
	ErrNumUnknownCommand    = 1047 // ER_UNKNOWN_COM_ERROR: "WSREP has not yet prepared node for application use"
	ErrNumShutdown          = 1053 // ER_SERVER_SHUTDOWN
	ErrNumNetReadTimeout    = 1159 // ER_NET_READ_INTERRUPTED
	ErrNumNetWriteTimeout   = 1161 // ER_NET_WRITE_INTERRUPTED
	ErrNumReadOnly          = 1290 // ER_OPTION_PREVENTS_STATEMENT (--read-only, --super-read-only)
	ErrNumQueryKilled       = 1317 // ER_QUERY_INTERRUPTED (KILL QUERY, as failover tools and proxies send)
	ErrNumReadOnlyTx        = 1792 // ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION
	ErrNumInnoDBReadOnly    = 1836 // ER_READ_ONLY_MODE (innodb_read_only)
	ErrNumConnKilled        = 1927 // ER_CONNECTION_KILLED (MariaDB)
	ErrNumServerGone        = 2006 // CR_SERVER_GONE_ERROR
	ErrNumServerLost        = 2013 // CR_SERVER_LOST
	ErrNumReplHookBefore    = 3100 // ER_RUN_HOOK_ERROR / replication hook refused the commit (Group Replication)
	ErrNumReplHookRollback  = 3101 // ER_TRANSACTION_ROLLBACK_DURING_COMMIT (Group Replication conflict)
	ErrNumBinlogStmtMode    = 1665 // ER_BINLOG_STMT_MODE_AND_ROW_ENGINE (READ COMMITTED write with binlog_format=STATEMENT)
	ErrNumTooManyConns      = 1040 // ER_CON_COUNT_ERROR (max_connections reached)
	ErrNumErrorDuringCommit = 1180 // ER_ERROR_DURING_COMMIT (Galera: the node left the primary component while committing)
	ErrNumTooManyUserConns  = 1203 // ER_TOO_MANY_USER_CONNECTIONS (max_user_connections, MySQL)
	ErrNumUserLimit         = 1226 // ER_USER_LIMIT_REACHED (MariaDB's max_user_connections; per-hour user limits)
)

// Kind is how jobq treats a database error (storeerr.Kind: the
// driver-neutral classes the scheduler and the service retry by).
type Kind = storeerr.Kind

// The kinds, as storeerr names them. Classify says which error numbers
// fall in each: KindConflict is 1213, 1205 and 1317; KindUnavailable is
// read-only (1290, 1836, 1792), a Galera node not ready (1047) or out of
// the primary component mid-commit (1180), shutting down (1053), a
// connection killed or lost (1927, 2006, 2013, 1159, 1161,
// driver.ErrBadConn, mysql.ErrInvalidConn, network errors), a replication
// hook refusing the commit (3100, 3101), no connection to be had (1040
// max_connections, 1203/1226 the user's connection limits); every other
// error number is KindPermanent.
const (
	KindNone        = storeerr.KindNone
	KindPermanent   = storeerr.KindPermanent
	KindConflict    = storeerr.KindConflict
	KindUnavailable = storeerr.KindUnavailable
)

// Classify returns err's Kind. It is the one place where jobq decides which
// database errors are retried; store/errors_test.go checks it code by code.
// A context's own cancellation or deadline is permanent (the caller gave up).
func Classify(err error) Kind {
	if err == nil {
		return KindNone
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return KindPermanent
	}
	var marked *storeerr.Error
	if errors.As(err, &marked) {
		return marked.Kind
	}
	if errors.Is(err, jobq.ErrUnavailable) {
		return KindUnavailable
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case ErrNumDeadlock, ErrNumLockWaitTimeout, ErrNumQueryKilled:
			return KindConflict
		case ErrNumReadOnly, ErrNumInnoDBReadOnly, ErrNumReadOnlyTx, ErrNumUnknownCommand, ErrNumShutdown,
			ErrNumConnKilled, ErrNumServerGone, ErrNumServerLost, ErrNumNetReadTimeout, ErrNumNetWriteTimeout,
			ErrNumReplHookBefore, ErrNumReplHookRollback, ErrNumTooManyConns, ErrNumTooManyUserConns, ErrNumUserLimit,
			ErrNumErrorDuringCommit:
			return KindUnavailable
		}
		return KindPermanent
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) ||
		errors.Is(err, sql.ErrConnDone) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return KindUnavailable
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return KindUnavailable
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return KindUnavailable
	}
	return KindPermanent
}

// IsRetryable reports whether err is transient (KindConflict or
// KindUnavailable). Such operations are safe to retry because every write
// jobq makes is fenced or idempotent.
func IsRetryable(err error) bool {
	k := Classify(err)
	return k == KindConflict || k == KindUnavailable
}

// Cause names a transient error's cause for logs and the
// jobq_db_retries_total metric: "deadlock", "lock_wait_timeout",
// "read_only", "wsrep_not_ready", "shutdown", "connection_lost",
// "replication_refused", "query_killed", "too_many_connections"; "" for
// other errors.
func Cause(err error) string {
	var marked *storeerr.Error
	if errors.As(err, &marked) && marked.Cause != "" {
		return marked.Cause
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case ErrNumDeadlock:
			return "deadlock"
		case ErrNumLockWaitTimeout:
			return "lock_wait_timeout"
		case ErrNumQueryKilled:
			return "query_killed"
		case ErrNumReadOnly, ErrNumInnoDBReadOnly, ErrNumReadOnlyTx:
			return "read_only"
		case ErrNumUnknownCommand, ErrNumErrorDuringCommit:
			return "wsrep_not_ready"
		case ErrNumShutdown:
			return "shutdown"
		case ErrNumReplHookBefore, ErrNumReplHookRollback:
			return "replication_refused"
		case ErrNumTooManyConns, ErrNumTooManyUserConns, ErrNumUserLimit:
			return "too_many_connections"
		case ErrNumConnKilled, ErrNumServerGone, ErrNumServerLost, ErrNumNetReadTimeout, ErrNumNetWriteTimeout:
			return "connection_lost"
		}
		return ""
	}
	if Classify(err) == KindUnavailable {
		return "connection_lost"
	}
	return ""
}

// Mark returns err marked with its class (a *storeerr.Error carrying
// Classify's kind and Cause's name) when it is transient, so that callers
// that link no driver (storeerr.IsRetryable, storeerr.Cause) retry and log
// it; an unavailable one then satisfies errors.Is(err, jobq.ErrUnavailable).
// Other errors, and errors already marked, come back unchanged. Every error
// the store returns passes through it; fault injectors that hand a driver
// error to the scheduler use it too.
func Mark(err error) error {
	var marked *storeerr.Error
	if err == nil || errors.As(err, &marked) {
		return err
	}
	switch k := Classify(err); k {
	case KindConflict, KindUnavailable:
		return storeerr.Mark(err, k, Cause(err))
	}
	return err
}

// errorf is fmt.Errorf followed by Mark.
func errorf(format string, args ...any) error { return Mark(fmt.Errorf(format, args...)) }

// ErrorNumber returns the MySQL error number in err, or 0 when err carries
// none (for example a lost connection). Used for the db_errors metric.
func ErrorNumber(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

func isDupKey(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == ErrNumDupEntry
}

func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return jobq.ErrNotFound
	}
	return Mark(err)
}
