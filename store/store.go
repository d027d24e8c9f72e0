// Package store is jobq's MySQL/MariaDB adapter: the only package that
// imports the sqlc-generated gen/jobqdb. It translates driver errors in one
// place (errors.go: sql.ErrNoRows → ErrNotFound; Classify: conflicts and
// unavailable kinds → IsRetryable; unavailable → jobq.ErrUnavailable) and exposes object-verb methods that take ctx and a params
// struct.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/jobq/jobq/gen/jobqdb"
	"github.com/jobq/jobq/internal/redact"
)

// Store is the MySQL/MariaDB implementation of everything jobq persists.
// It is safe for concurrent use.
type Store struct {
	db *sql.DB
	q  *jobqdb.Queries
	// claimDefaultIso is set once the server refused a READ COMMITTED
	// write (see readCommittedTx).
	claimDefaultIso atomic.Bool
	// renew is the heartbeat's own session (LeaseRenewMany).
	renew renewSession
	// noReturning is set once the server refused INSERT … RETURNING
	// although Server.InsertReturning said it takes it (JobSubmit).
	noReturning atomic.Bool
	// beforeSplitWrite, when set (tests only: export_test.go), runs in
	// completeSplit between its fence-state read and its writes.
	beforeSplitWrite func()
	// afterClaimLock, when set (tests only: export_test.go), runs inside a
	// claim's transaction (JobClaimSkipLocked, JobClaimRemote) right after
	// its locking read.
	afterClaimLock func(ctx context.Context, tx *sql.Tx)
	// afterSlotWait, when set (tests), runs in the MySQL dialect's slot
	// wait between the wait's statement and putting the session's lock wait
	// timeout back.
	afterSlotWait func()
	// claimSlotWait, when set (tests only: export_test.go), replaces
	// ClaimSlotWait.
	claimSlotWait time.Duration
	// remoteTypes are the job types declared remote (SetRemoteTypes): their
	// jobs are submitted in lane 1, fetched by workers.
	remoteTypes atomic.Pointer[map[string]bool]
	// Server is what DetectServer found at Open.
	Server ServerInfo
	// IdleTxTimeout is the server's idle_transaction_timeout on every
	// pooled session (see PoolConfig.IdleTxTimeout); 0 when not set.
	IdleTxTimeout time.Duration
	// roundTrip is the last measured round trip, in nanoseconds (RoundTrip).
	roundTrip atomic.Int64
}

// ServerInfo describes the database server.
type ServerInfo struct {
	Version     string // SELECT VERSION(), e.g. "10.11.19-MariaDB-0+deb12u1"
	MariaDB     bool
	Major       int
	Minor       int
	Patch       int
	SkipLocked  bool // SELECT ... FOR UPDATE SKIP LOCKED is available
	Description string
	// InsertReturning: INSERT … RETURNING is available (MariaDB ≥ 10.5;
	// MySQL has none) and safe (not a Galera node, see DetectServer), so a
	// submit reads its new row back in the same statement.
	InsertReturning bool
}

// NormalizeDSN parses a go-sql-driver/mysql DSN and forces what jobq relies
// on: parseTime=true, loc=UTC, session time_zone '+00:00' (so NOW(6) is the
// database's UTC clock whatever the server's time_zone), utf8mb4, and
// client-side parameter interpolation (one round trip per statement).
func NormalizeDSN(dsn string) (*mysql.Config, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, errorf("parse dsn: %w", err)
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.InterpolateParams = true
	// utf8mb4 whatever the DSN says (a charset=latin1 or utf8 DSN would turn
	// 4-byte characters into '?' or errors 1366): every value round-trips.
	if err := cfg.Apply(mysql.Charset("utf8mb4", "utf8mb4_bin")); err != nil {
		return nil, errorf("parse dsn: %w", err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	return cfg, nil
}

// PoolConfig sizes the connection pool.
type PoolConfig struct {
	MaxOpen int // Defaults to 20.
	MaxIdle int // Defaults to MaxOpen.
	// IdleTxTimeout, when > 0, has the server end a session that sits idle
	// inside a transaction for longer (MariaDB ≥ 10.3's
	// idle_transaction_timeout, whole seconds, rounded up; at least 1 s).
	// A process frozen mid-transaction (SIGSTOP, a paused VM, a partition
	// without a TCP reset) otherwise keeps its row locks — and so blocks
	// the rescue of its jobs, which skips locked rows — until the server's
	// wait_timeout (8 h by default). The server rolls the transaction
	// back; the frozen process's next statement fails with a lost
	// connection (a transient error). MySQL has no such variable: the
	// setting is ignored there (Store.IdleTxTimeout stays 0). jobq serve
	// sets it to Lease/5. Default 0: off.
	IdleTxTimeout time.Duration
	// ForceMySQLDialect has Open treat any server as MySQL 8: no INSERT …
	// RETURNING, no idle_transaction_timeout (the IdleTxReaper's case),
	// MySQL's readiness checks — so that the MySQL statements run, and are
	// tested, on MariaDB. The environment variable JOBQ_FORCE_MYSQL_DIALECT=1
	// sets it for every Open of the process (`make test` runs the store's
	// tests and the store contract a second time so). Default false.
	ForceMySQLDialect bool
}

// ForceMySQLDialectEnv names the environment variable that sets
// PoolConfig.ForceMySQLDialect for every Open.
const ForceMySQLDialectEnv = "JOBQ_FORCE_MYSQL_DIALECT"

// AsMySQL is info as a MySQL 8 server would be described: no INSERT …
// RETURNING, not MariaDB (so no idle_transaction_timeout), SKIP LOCKED.
func (info ServerInfo) AsMySQL() ServerInfo {
	info.MariaDB, info.InsertReturning, info.SkipLocked = false, false, true
	info.Description += " (MySQL dialect forced)"
	return info
}

// Open connects to dsn, checks the connection and detects the server.
// Errors never contain the password.
func Open(ctx context.Context, dsn string, pool PoolConfig) (*Store, error) {
	cfg, err := NormalizeDSN(dsn)
	if err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, errorf("open %s: %w", redact.DSN(dsn), err)
	}
	db := sql.OpenDB(conn)
	if pool.MaxOpen <= 0 {
		pool.MaxOpen = 20
	}
	if pool.MaxIdle <= 0 {
		pool.MaxIdle = pool.MaxOpen
	}
	db.SetMaxOpenConns(pool.MaxOpen)
	db.SetMaxIdleConns(pool.MaxIdle)
	db.SetConnMaxLifetime(10 * time.Minute)
	s := &Store{db: db, q: jobqdb.New(db)}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, errorf("connect %s: %w%s", redact.DSN(dsn), err, ConnectHint(err, cfg))
	}
	info, err := s.DetectServer(pctx)
	if err != nil {
		db.Close()
		return nil, err
	}
	if pool.ForceMySQLDialect || os.Getenv(ForceMySQLDialectEnv) == "1" {
		info = info.AsMySQL()
	}
	s.Server = info
	if pool.IdleTxTimeout > 0 && info.MariaDB && info.Major*100+info.Minor >= 1003 {
		// Reopen the pool with the session variable set at connect (one
		// SET per new connection, none per transaction).
		secs := int((pool.IdleTxTimeout + time.Second - 1) / time.Second)
		cfg.Params["idle_transaction_timeout"] = strconv.Itoa(secs)
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			db.Close()
			return nil, errorf("open %s: %w", redact.DSN(dsn), err)
		}
		db.Close()
		db = sql.OpenDB(conn)
		db.SetMaxOpenConns(pool.MaxOpen)
		db.SetMaxIdleConns(pool.MaxIdle)
		db.SetConnMaxLifetime(10 * time.Minute)
		if err := db.PingContext(pctx); err != nil {
			db.Close()
			return nil, errorf("connect %s with idle_transaction_timeout=%d: %w", redact.DSN(dsn), secs, err)
		}
		s.db, s.q = db, jobqdb.New(db)
		s.IdleTxTimeout = time.Duration(secs) * time.Second
	}
	return s, nil
}

// ConnectHint says what to do about an error connecting to the server
// cfg names: "" when it has no advice. It starts with "; ".
func ConnectHint(err error, cfg *mysql.Config) string {
	var ne net.Error
	switch n := ErrorNumber(err); {
	case n == 1049:
		pw := ""
		if cfg.Passwd != "" {
			pw = " -p"
		}
		return fmt.Sprintf("; the database %q does not exist: create it first, e.g. mysql -h%s -u%s%s -e 'CREATE DATABASE %s' (jobq creates the tables, not the database)",
			cfg.DBName, hostOf(cfg.Addr), cfg.User, pw, cfg.DBName)
	case n == 1045, n == 1698:
		return fmt.Sprintf("; the server refused user %q: check the user and password in the DSN (user:password@tcp(host:port)/database)", cfg.User)
	case n == 1044:
		return fmt.Sprintf("; user %q may not use database %q: GRANT ALL ON %s.* TO the user, or name another database", cfg.User, cfg.DBName, cfg.DBName)
	case n == 1130:
		return fmt.Sprintf("; the server does not accept user %q from this host: create the user for this host or connect from an allowed one", cfg.User)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf("; nothing listens on %s: start the server, or fix host:port in the DSN", cfg.Addr)
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("; %s did not answer in time: check that the server runs and that no firewall drops the connection", cfg.Addr)
	}
	return ""
}

func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// OpenDB wraps an already configured pool: db must connect through a
// NormalizeDSN config (the bench harness wraps that connector to count the
// statements each replica sends). It checks the connection and detects the
// server like Open; Close closes db.
func OpenDB(ctx context.Context, db *sql.DB) (*Store, error) {
	s := &Store{db: db, q: jobqdb.New(db)}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	info, err := s.DetectServer(pctx)
	if err != nil {
		return nil, err
	}
	if os.Getenv(ForceMySQLDialectEnv) == "1" {
		info = info.AsMySQL()
	}
	s.Server = info
	return s, nil
}

// DB returns the underlying pool (for harnesses and transactional handlers).
func (s *Store) DB() *sql.DB { return s.db }

// Close closes the pool.
func (s *Store) Close() error {
	s.closeRenewSession()
	return s.db.Close()
}

// Ping checks that the database answers; /readyz uses it.
func (s *Store) Ping(ctx context.Context) error { return Mark(s.db.PingContext(ctx)) }

var versionRe = regexp.MustCompile(`^(\d+)\.(\d+)\.(\d+)`)

// DetectServer reads VERSION() and decides whether SKIP LOCKED is available
// (MySQL ≥ 8.0.1, MariaDB ≥ 10.6).
func (s *Store) DetectServer(ctx context.Context) (ServerInfo, error) {
	var v string
	if err := s.timedRoundTrip(func() error { return s.db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v) }); err != nil {
		return ServerInfo{}, errorf("detect server: %w", err)
	}
	info := ParseServerVersion(v)
	if info.InsertReturning {
		// Galera (wsrep_on): submits keep INSERT + read-back. Galera
		// re-runs an autocommit statement a replicated write set aborted
		// (wsrep_retry_autocommit), but the rows INSERT … RETURNING had
		// sent before the abort still reach the client, ahead of the
		// retry's: the first row's id was rolled back. A plain INSERT's
		// OK packet comes only from the attempt that committed.
		// TestGaleraRetriedInsertReturningSendsRolledBackRow shows it.
		var on int
		if err := s.db.QueryRowContext(ctx, "SELECT @@global.wsrep_on").Scan(&on); err == nil && on == 1 {
			info.InsertReturning = false
		}
	}
	return info, nil
}

// ParseServerVersion interprets a VERSION() string. MariaDB's handshake
// form "5.5.5-10.11.6-MariaDB…" (what some proxies report) counts as 10.11.6.
func ParseServerVersion(v string) ServerInfo {
	info := ServerInfo{Version: v, MariaDB: strings.Contains(strings.ToLower(v), "mariadb")}
	num := v
	if info.MariaDB {
		num = strings.TrimPrefix(num, "5.5.5-")
	}
	if m := versionRe.FindStringSubmatch(num); m != nil {
		info.Major, _ = strconv.Atoi(m[1])
		info.Minor, _ = strconv.Atoi(m[2])
		info.Patch, _ = strconv.Atoi(m[3])
	}
	ver := info.Major*10000 + info.Minor*100 + info.Patch
	if info.MariaDB {
		info.SkipLocked = ver >= 100600
		info.InsertReturning = ver >= 100500
		info.Description = fmt.Sprintf("MariaDB %d.%d.%d", info.Major, info.Minor, info.Patch)
	} else {
		info.SkipLocked = ver >= 80001
		info.Description = fmt.Sprintf("MySQL %d.%d.%d", info.Major, info.Minor, info.Patch)
	}
	return info
}

func nullStr(s string) sql.NullString {
	if s == "" {
		return sql.NullString{}
	}
	return sql.NullString{String: s, Valid: true}
}

func nullTimePtr(t sql.NullTime) *time.Time {
	if !t.Valid {
		return nil
	}
	u := t.Time.UTC()
	return &u
}

// WithTx runs fn in a transaction and commits it, rolling back on error.
// An error of KindUnavailable is returned as jobq.ErrUnavailable.
func (s *Store) WithTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return Mark(s.withTxOptions(ctx, nil, fn))
}

func (s *Store) withTxOptions(ctx context.Context, opts *sql.TxOptions, fn func(tx *sql.Tx) error) error {
	return withTxOn(ctx, s.db, opts, fn)
}

// txBeginner is what a transaction is begun on: the pool (*sql.DB) or one
// of its connections (*sql.Conn).
type txBeginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// withTxOn runs fn in a transaction begun on b and commits it, rolling
// back on error.
func withTxOn(ctx context.Context, b txBeginner, opts *sql.TxOptions, fn func(tx *sql.Tx) error) error {
	tx, err := b.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}
