// Package replica starts and supervises `jobq serve` child processes for the
// demo and the chaos testbed: start with the DSN in the environment (never
// on the command line), wait for /readyz, signal, stop.
package replica

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jobq/jobq/client"
)

// Spec describes one `jobq serve` process.
type Spec struct {
	// Binary is the jobq executable.
	Binary string
	// DSN is passed as JOBQ_DSN in the environment so it never shows in ps.
	DSN string
	// Name is the replica's owner id (--owner) and its log file's base name.
	Name string
	// LogDir receives <Name>.log with the process's stdout and stderr.
	LogDir string
	// Args are extra `jobq serve` flags.
	Args []string
	// Wrap, when set, is a command prefix that execs the jobq binary, e.g.
	// {"unshare", "--time", "--monotonic=3600", "--"}. The prefix must exec
	// (not fork) so that the process id stays the replica's.
	Wrap []string
	// Env are extra environment variables ("K=V").
	Env []string
	// ReadyTimeout bounds the wait for /readyz. Defaults to 30s.
	ReadyTimeout time.Duration
}

// Replica is one running `jobq serve` child process.
type Replica struct {
	Name   string
	Addr   string // API listen address, 127.0.0.1:port
	Cmd    *exec.Cmd
	Log    string // log file path
	exited chan struct{}
}

// Start starts `jobq serve --listen <free port> --owner <Name> --no-migrate
// <Args>` and waits until its /readyz answers 200. It fails when the process
// exits during start or is not ready within ReadyTimeout (it is killed then).
func Start(ctx context.Context, s Spec) (*Replica, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	args := append([]string{"--log-format", "json", "serve", "--listen", addr, "--owner", s.Name, "--no-migrate"}, s.Args...)
	bin := s.Binary
	if len(s.Wrap) > 0 {
		args = append(append(append([]string{}, s.Wrap[1:]...), s.Binary), args...)
		bin = s.Wrap[0]
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(os.Environ(), s.Env...), "JOBQ_DSN="+s.DSN)
	logPath := filepath.Join(s.LogDir, s.Name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", s.Name, err)
	}
	r := &Replica{Name: s.Name, Addr: addr, Cmd: cmd, Log: logPath, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); f.Close(); close(r.exited) }()
	c := client.New("http://" + addr)
	timeout := s.ReadyTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	deadline := time.Now().Add(timeout)
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		err := c.Ready(rctx)
		cancel()
		if err == nil {
			return r, nil
		}
		select {
		case <-r.exited:
			b, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("%s exited during start: %s", s.Name, LastLines(string(b), 5))
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			r.Signal(syscall.SIGKILL)
			<-r.exited
			return nil, fmt.Errorf("%s not ready after %s: %v (log %s)", s.Name, timeout, err, logPath)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// URL is the replica's API base URL.
func (r *Replica) URL() string { return "http://" + r.Addr }

// Pid is the replica's process id.
func (r *Replica) Pid() int { return r.Cmd.Process.Pid }

// Signal sends sig to the replica.
func (r *Replica) Signal(sig syscall.Signal) { _ = r.Cmd.Process.Signal(sig) }

// Exited is closed when the process is gone.
func (r *Replica) Exited() <-chan struct{} { return r.exited }

// Alive reports whether the process is still running.
func (r *Replica) Alive() bool {
	select {
	case <-r.exited:
		return false
	default:
		return true
	}
}

// Stop sends SIGTERM (after SIGCONT, in case it is stopped) and waits; it
// sends SIGKILL after timeout.
func (r *Replica) Stop(timeout time.Duration) {
	if !r.Alive() {
		return
	}
	r.Signal(syscall.SIGCONT)
	r.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(timeout):
		r.Signal(syscall.SIGKILL)
		<-r.exited
	}
}

// Kill sends SIGKILL (after SIGCONT) and waits for the process to exit.
func (r *Replica) Kill() {
	if !r.Alive() {
		return
	}
	r.Signal(syscall.SIGKILL)
	<-r.exited
}

// LastLines returns the last n lines of s.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
