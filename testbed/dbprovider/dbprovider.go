// Package dbprovider hands the demo, the tests and the harnesses a
// MySQL-compatible server, trying in order: the JOBQ_DSN environment
// variable; a Docker engine through testcontainers-go (MySQL 8.4 module); a
// throwaway local mariadbd/mysqld (temp datadir, free port, removed on
// Close). It says which one it used.
package dbprovider

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jobq/jobq/internal/redact"
	"github.com/testcontainers/testcontainers-go"
	tcmysql "github.com/testcontainers/testcontainers-go/modules/mysql"
)

// Kinds of provider.
const (
	KindEnv            = "env"            // JOBQ_DSN
	KindTestcontainers = "testcontainers" // Docker engine, mysql:8.4
	KindLocal          = "local"          // throwaway mariadbd/mysqld
)

// Server is a MySQL-compatible server. DSN names no database; use
// CreateDatabase for one.
type Server struct {
	Kind        string
	DSN         string // server-level DSN (no database)
	Description string // human text: which provider and where
	// Local is set for KindLocal: the process can be killed and restarted.
	Local *LocalServer
	close func() error
}

// Close stops what the provider started (nothing for KindEnv).
func (s *Server) Close() error {
	if s.close == nil {
		return nil
	}
	return s.close()
}

// FallbackHelp says, for --dsn flags' help, how a server is chosen.
const FallbackHelp = "Without it: $JOBQ_DSN, else a Docker engine (mysql:8.4 through testcontainers), else a throwaway local mariadbd/mysqld (temp datadir, free port)."

// Options tune Provide.
type Options struct {
	// DSN, if set, is used before JOBQ_DSN (a --dsn flag): a server-level
	// DSN such as root@tcp(127.0.0.1:3306)/; a database name in it is ignored.
	DSN string
	// SkipEnv ignores JOBQ_DSN (the chaos harness needs a server it can kill).
	SkipEnv bool
	// SkipDocker ignores the Docker engine.
	SkipDocker bool
	// Log receives one line saying which provider was used. Defaults to stderr.
	Log io.Writer
}

// ErrNoServer is returned when no provider works.
var ErrNoServer = errors.New("no MySQL-compatible server: set JOBQ_DSN (e.g. root@tcp(127.0.0.1:3306)/), run a Docker engine, or install one (Debian/Ubuntu: apt-get install mariadb-server)")

// Provide returns a server from the first provider that works: opts.DSN,
// JOBQ_DSN, Docker, a local server binary.
func Provide(ctx context.Context, opts Options) (*Server, error) {
	logw := opts.Log
	if logw == nil {
		logw = os.Stderr
	}
	source, dsn := "--dsn", opts.DSN
	if dsn == "" && !opts.SkipEnv {
		source, dsn = "JOBQ_DSN", os.Getenv("JOBQ_DSN")
	}
	if dsn != "" {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		cfg.DBName = ""
		s := &Server{Kind: KindEnv, DSN: cfg.FormatDSN(), Description: source + " " + redact.DSN(dsn)}
		fmt.Fprintf(logw, "database provider: %s\n", s.Description)
		return s, nil
	}
	var reasons []string
	if !opts.SkipDocker {
		s, err := provideDocker(ctx)
		if err == nil {
			fmt.Fprintf(logw, "database provider: %s\n", s.Description)
			return s, nil
		}
		reasons = append(reasons, "docker: "+err.Error())
	}
	ls, err := StartLocal(ctx, LocalOptions{})
	if err == nil {
		s := &Server{Kind: KindLocal, DSN: ls.DSN(), Local: ls, close: ls.Stop,
			Description: fmt.Sprintf("throwaway local %s on 127.0.0.1:%d (datadir %s)", filepath.Base(ls.Binary), ls.Port, ls.DataDir)}
		// Say why not Docker, the provider tried before this one.
		why := ""
		if len(reasons) > 0 {
			why = "; not Docker: " + strings.Join(reasons, "; ")
		}
		fmt.Fprintf(logw, "database provider: %s%s\n", s.Description, why)
		return s, nil
	}
	reasons = append(reasons, "local: "+err.Error())
	return nil, fmt.Errorf("%w (%s)", ErrNoServer, strings.Join(reasons, "; "))
}

func provideDocker(ctx context.Context) (s *Server, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("testcontainers: %v", r)
		}
	}()
	hctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return nil, fmt.Errorf("daemon not reachable: %w", err)
	}
	defer p.Close()
	if err := p.Health(hctx); err != nil {
		return nil, fmt.Errorf("daemon not reachable: %w", err)
	}
	c, err := tcmysql.Run(ctx, "mysql:8.4", tcmysql.WithDatabase("jobq"), tcmysql.WithUsername("root"), tcmysql.WithPassword("jobq"))
	if err != nil {
		return nil, fmt.Errorf("start mysql:8.4 container: %w", err)
	}
	dsn, err := c.ConnectionString(ctx)
	if err != nil {
		_ = testcontainers.TerminateContainer(c)
		return nil, err
	}
	cfg, _ := mysql.ParseDSN(dsn)
	cfg.DBName = ""
	return &Server{Kind: KindTestcontainers, DSN: cfg.FormatDSN(), Description: "testcontainers mysql:8.4 at " + cfg.Addr,
		close: func() error { return testcontainers.TerminateContainer(c) }}, nil
}

// CreateDatabase creates a database named prefix_<random hex> on the server
// and returns its DSN and a drop function.
func (s *Server) CreateDatabase(ctx context.Context, prefix string) (dsn string, drop func() error, err error) {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := prefix + "_" + hex.EncodeToString(b)
	db, err := sql.Open("mysql", s.DSN)
	if err != nil {
		return "", nil, err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	cfg, _ := mysql.ParseDSN(s.DSN)
	cfg.DBName = name
	drop = func() error {
		db, err := sql.Open("mysql", s.DSN)
		if err != nil {
			return err
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err = db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`")
		return err
	}
	return cfg.FormatDSN(), drop, nil
}

// LocalOptions tune StartLocal.
type LocalOptions struct {
	// Port to listen on; 0 picks a free one.
	Port int
	// DataDir to use; "" makes a temp dir removed by Stop.
	DataDir string
	// Args are extra server options (e.g. --log-bin), given at every start.
	Args []string
}

// LocalServer is a throwaway mariadbd/mysqld process.
type LocalServer struct {
	Binary  string
	DataDir string
	Port    int
	ownsDir bool
	// tmpDir is the server's own --tmpdir (with a temp datadir): servers
	// and mariadb-install-db runs sharing /tmp collide on their temporary
	// table files ("Error on delete of '/tmp/#sql-temptable-…'") when test
	// binaries start several at once.
	tmpDir string
	args   []string // LocalOptions.Args
	cmd    *exec.Cmd
	exited chan struct{}
}

// DSN returns root@tcp(127.0.0.1:port)/.
func (l *LocalServer) DSN() string {
	return fmt.Sprintf("root@tcp(127.0.0.1:%d)/", l.Port)
}

// FindServerBinary returns the path of mariadbd or mysqld, or "".
func FindServerBinary() string {
	for _, name := range []string{"mariadbd", "mysqld"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		for _, dir := range []string{"/usr/sbin", "/usr/local/sbin", "/usr/libexec", "/usr/local/mysql/bin"} {
			p := filepath.Join(dir, name)
			if st, err := os.Stat(p); err == nil && !st.IsDir() {
				return p
			}
		}
	}
	return ""
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// StartLocal initialises a datadir (mariadb-install-db or mysqld
// --initialize-insecure) and starts the server on 127.0.0.1.
func StartLocal(ctx context.Context, opts LocalOptions) (*LocalServer, error) {
	bin := FindServerBinary()
	if bin == "" {
		return nil, errors.New("no mariadbd or mysqld binary found")
	}
	l := &LocalServer{Binary: bin, DataDir: opts.DataDir, Port: opts.Port, args: opts.Args}
	if l.DataDir == "" {
		d, err := os.MkdirTemp("", "jobq-mariadb-")
		if err != nil {
			return nil, err
		}
		l.DataDir, l.ownsDir = d, true
		if l.tmpDir, err = os.MkdirTemp("", "jobq-mariadb-tmp-"); err != nil {
			os.RemoveAll(d)
			return nil, err
		}
		if err := l.initDataDir(ctx); err != nil {
			l.removeDirs()
			return nil, err
		}
	}
	if l.Port == 0 {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		l.Port = p
	}
	if err := l.Start(ctx); err != nil {
		l.removeDirs()
		return nil, err
	}
	return l, nil
}

func (l *LocalServer) mariadb() bool { return strings.Contains(filepath.Base(l.Binary), "mariadb") }

func (l *LocalServer) initDataDir(ctx context.Context) error {
	var cmd *exec.Cmd
	if l.mariadb() {
		install, err := exec.LookPath("mariadb-install-db")
		if err != nil {
			install, err = exec.LookPath("mysql_install_db")
			if err != nil {
				return errors.New("mariadb-install-db not found")
			}
		}
		args := []string{"--no-defaults", "--datadir=" + l.DataDir, "--auth-root-authentication-method=normal", "--skip-test-db"}
		if l.tmpDir != "" {
			args = append(args, "--tmpdir="+l.tmpDir)
		}
		if os.Geteuid() == 0 {
			args = append(args, "--user=root")
		}
		cmd = exec.CommandContext(ctx, install, args...)
	} else {
		args := []string{"--no-defaults", "--initialize-insecure", "--datadir=" + l.DataDir}
		if l.tmpDir != "" {
			args = append(args, "--tmpdir="+l.tmpDir)
		}
		if os.Geteuid() == 0 {
			args = append(args, "--user=root")
		}
		cmd = exec.CommandContext(ctx, l.Binary, args...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("initialise datadir: %w: %s", err, tail(string(out), 400))
	}
	return nil
}

// Start starts (or restarts) the server process on its port and datadir and
// waits until it accepts connections.
func (l *LocalServer) Start(ctx context.Context) error {
	args := []string{"--no-defaults", "--datadir=" + l.DataDir, "--port=" + strconv.Itoa(l.Port),
		"--bind-address=127.0.0.1", "--socket=" + filepath.Join(l.DataDir, "mysqld.sock"),
		"--pid-file=" + filepath.Join(l.DataDir, "mysqld.pid"), "--log-error=" + filepath.Join(l.DataDir, "error.log"),
		"--innodb-buffer-pool-size=256M", "--max-connections=1000", "--skip-name-resolve"}
	if l.tmpDir != "" {
		args = append(args, "--tmpdir="+l.tmpDir)
	}
	if l.mariadb() {
		args = append(args, "--innodb-log-file-size=256M")
	}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	args = append(args, l.args...)
	cmd := exec.Command(l.Binary, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", l.Binary, err)
	}
	l.cmd = cmd
	l.exited = make(chan struct{})
	go func() { _ = cmd.Wait(); close(l.exited) }()
	deadline := time.Now().Add(60 * time.Second)
	db, _ := sql.Open("mysql", l.DSN())
	defer db.Close()
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := db.PingContext(pctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-l.exited:
			log, _ := os.ReadFile(filepath.Join(l.DataDir, "error.log"))
			return fmt.Errorf("%s exited during start: %s", l.Binary, tail(string(log), 600))
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = l.Kill()
			return fmt.Errorf("%s did not accept connections within 60s: %v", l.Binary, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Kill SIGKILLs the server (a crash: InnoDB recovers on the next Start).
func (l *LocalServer) Kill() error {
	if l.cmd == nil || l.cmd.Process == nil {
		return nil
	}
	_ = l.cmd.Process.Signal(syscall.SIGKILL)
	<-l.exited
	return nil
}

// Stop shuts the server down and removes a temp datadir.
func (l *LocalServer) Stop() error {
	if l.cmd != nil && l.cmd.Process != nil {
		_ = l.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-l.exited:
		case <-time.After(20 * time.Second):
			_ = l.cmd.Process.Signal(syscall.SIGKILL)
			<-l.exited
		}
	}
	return l.removeDirs()
}

// removeDirs removes a temp datadir and tmpdir this process created.
func (l *LocalServer) removeDirs() error {
	var errs []error
	if l.ownsDir {
		errs = append(errs, os.RemoveAll(l.DataDir))
	}
	if l.tmpDir != "" {
		errs = append(errs, os.RemoveAll(l.tmpDir))
	}
	return errors.Join(errs...)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
