package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jobq/jobq/testbed/dbprovider"
)

// serverUser is the system user the topology servers run as when the
// harness is root: Debian's `mysql`, the user its packaging and Galera's
// rsync state-transfer script (which starts an rsync daemon as the server's
// user) are made for. Note that the change of user clears the parent-death
// signal, so the harness stops these servers itself.
const serverUser = "mysql"

// topoServer is one mariadbd of a multi-server topology (galera3,
// primary-replica): a datadir under the topology's temp folder, a port below
// the ephemeral range, extra server arguments on every start, run as
// serverUser when the harness is root.
type topoServer struct {
	name    string
	bin     string
	dir     string // datadir
	port    int
	args    []string // extra server arguments on every start
	cmd     *exec.Cmd
	exited  chan struct{}
	started time.Time
}

func (s *topoServer) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// dsn is root over TCP, no database.
func (s *topoServer) dsn() string { return fmt.Sprintf("root@tcp(%s)/?timeout=5s", s.addr()) }

func (s *topoServer) errorLog() string { return filepath.Join(s.dir, "error.log") }

// chownServer gives path to serverUser when the harness runs as root.
func chownServer(path string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup(serverUser)
	if err != nil {
		return fmt.Errorf("user %s (Debian's mariadb-server creates it): %w", serverUser, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return filepath.Walk(path, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// userArgs are --user=… when root.
func userArgs() []string {
	if os.Geteuid() == 0 {
		return []string{"--user=" + serverUser}
	}
	return nil
}

// newTopoServer creates (and with install, initialises) a datadir under
// parent for a server on port.
func newTopoServer(ctx context.Context, parent, name string, port int, install bool, args []string) (*topoServer, error) {
	bin := dbprovider.FindServerBinary()
	if bin == "" || !strings.Contains(filepath.Base(bin), "mariadb") {
		return nil, errors.New("topologies need mariadbd (Debian: apt-get install mariadb-server)")
	}
	s := &topoServer{name: name, bin: bin, dir: filepath.Join(parent, name), port: port, args: args}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, err
	}
	if install {
		cmd := exec.CommandContext(ctx, "mariadb-install-db", append([]string{"--no-defaults", "--datadir=" + s.dir,
			"--auth-root-authentication-method=normal", "--skip-test-db"}, userArgs()...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("%s: mariadb-install-db: %w: %s", name, err, lastLines(string(out), 3))
		}
	}
	return s, chownServer(s.dir)
}

// baseArgs are the arguments of every start of s.
func (s *topoServer) baseArgs() []string {
	a := []string{"--no-defaults", "--datadir=" + s.dir, "--port=" + strconv.Itoa(s.port),
		"--bind-address=127.0.0.1", "--socket=" + filepath.Join(s.dir, "mysqld.sock"),
		"--pid-file=" + filepath.Join(s.dir, "mysqld.pid"), "--log-error=" + s.errorLog(),
		"--innodb-buffer-pool-size=128M", "--innodb-log-file-size=128M", "--max-connections=1000", "--skip-name-resolve"}
	return append(append(a, userArgs()...), s.args...)
}

// start starts s with extra arguments for this start only and waits until
// it accepts connections (a Galera joiner listens only after its state
// transfer).
func (s *topoServer) start(ctx context.Context, extra ...string) error {
	cmd := exec.Command(s.bin, append(s.baseArgs(), extra...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: start: %w", s.name, err)
	}
	s.cmd, s.exited, s.started = cmd, make(chan struct{}), time.Now()
	exited := s.exited
	go func() { _ = cmd.Wait(); close(exited) }()
	db, err := sql.Open("mysql", s.dsn())
	if err != nil {
		return err
	}
	defer db.Close()
	for deadline := time.Now().Add(120 * time.Second); ; {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := db.PingContext(pctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(s.errorLog())
			return fmt.Errorf("%s exited during start: %s", s.name, lastLines(string(log), 4))
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.kill()
			return fmt.Errorf("%s did not accept connections within 120s: %v", s.name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// alive reports whether the process runs.
func (s *topoServer) alive() bool {
	if s.exited == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// kill SIGKILLs s (a crash) and waits for it to exit.
func (s *topoServer) kill() {
	if s.alive() {
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.exited
	}
}

// stop shuts s down cleanly (SIGTERM), SIGKILL after timeout.
func (s *topoServer) stop(timeout time.Duration) {
	if !s.alive() {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(timeout):
		s.kill()
	}
}

// exec runs statements on s, each with a 10 s limit.
func (s *topoServer) exec(ctx context.Context, stmts ...string) error {
	db, err := sql.Open("mysql", s.dsn())
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, q := range stmts {
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := db.ExecContext(qctx, q)
		cancel()
		if err != nil {
			return fmt.Errorf("%s: %s: %w", s.name, q, err)
		}
	}
	return nil
}

// status reads one SHOW GLOBAL STATUS value of s ("" when it cannot).
func (s *topoServer) status(ctx context.Context, name string) string {
	db, err := sql.Open("mysql", s.dsn())
	if err != nil {
		return ""
	}
	defer db.Close()
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var k, v string
	// SHOW cannot be a prepared statement: name is one of the harness's
	// constants, never user input.
	_ = db.QueryRowContext(qctx, "SHOW GLOBAL STATUS LIKE '"+name+"'").Scan(&k, &v)
	return v
}

// lowPorts returns n consecutive free TCP ports on 127.0.0.1 below the
// ephemeral range (32768+), so that no outgoing connection of the machine
// can take one between the check and the server's bind.
func lowPorts(n int) ([]int, error) {
	for try := 0; try < 200; try++ {
		base := 20000 + rand.IntN(12000-n)
		var ls []net.Listener
		ok := true
		for p := base; p < base+n; p++ {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				ok = false
				break
			}
			ls = append(ls, l)
		}
		for _, l := range ls {
			l.Close()
		}
		if ok {
			ports := make([]int, n)
			for i := range ports {
				ports[i] = base + i
			}
			return ports, nil
		}
	}
	return nil, fmt.Errorf("no %d consecutive free ports in 20000-32000", n)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// topoDir makes the topology's temp folder, readable by serverUser.
func topoDir(kind string) (string, error) {
	d, err := os.MkdirTemp("", "jobq-"+kind+"-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(d, 0o755); err != nil {
		os.RemoveAll(d)
		return "", err
	}
	return d, nil
}
