package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/go-sql-driver/mysql"
	"github.com/jobq/jobq"
)

// ErrSkipLockedUnsupported is returned when the skiplocked strategy is
// requested on a server without SELECT ... FOR UPDATE SKIP LOCKED
// (MySQL < 8.0.1, MariaDB < 10.6).
var ErrSkipLockedUnsupported = errors.New("jobq: server does not support SKIP LOCKED")

// MySQL error numbers jobq branches on.
const (
	ErrNumDeadlock        = 1213 // ER_LOCK_DEADLOCK
	ErrNumLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT
	ErrNumDupEntry        = 1062 // ER_DUP_ENTRY
	ErrNumServerGone      = 2006 // CR_SERVER_GONE_ERROR
	ErrNumServerLost      = 2013 // CR_SERVER_LOST
	ErrNumQueryKilled     = 1317 // ER_QUERY_INTERRUPTED
	ErrNumShutdown        = 1053 // ER_SERVER_SHUTDOWN
	ErrNumConnKilled      = 1927 // ER_CONNECTION_KILLED (MariaDB)
	ErrNumBinlogStmtMode  = 1665 // ER_BINLOG_STMT_MODE_AND_ROW_ENGINE (READ COMMITTED write with binlog_format=STATEMENT)
)

// IsRetryable reports whether err is transient: a deadlock (1213), a lock
// wait timeout (1205), a server shutting down or a lost or refused
// connection. Such operations are safe to retry because every write jobq
// makes is fenced or idempotent.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case ErrNumDeadlock, ErrNumLockWaitTimeout, ErrNumServerGone, ErrNumServerLost,
			ErrNumQueryKilled, ErrNumShutdown, ErrNumConnKilled:
			return true
		}
		return false
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) ||
		errors.Is(err, sql.ErrConnDone) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe)
}

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
	return err
}
