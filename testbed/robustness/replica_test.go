package robustness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobq/jobq/app"
	"github.com/jobq/jobq/scheduler"
)

// Environment of a replica subprocess: the test binary re-executed with
// replicaEnv set to the DSN runs app.Start — what `jobq serve` runs — in a
// process of its own, so it can have its own TZ and outlive database
// outages (or not) for real.
const (
	replicaEnv       = "JOBQ_ROBUSTNESS_REPLICA"       // the DSN
	replicaPollEnv   = "JOBQ_ROBUSTNESS_POLL_INTERVAL" // scheduler.Config.PollInterval
	replicaJitterEnv = "JOBQ_ROBUSTNESS_POLL_JITTER"   // 0 means NoJitter
	replicaLeaseEnv  = "JOBQ_ROBUSTNESS_LEASE"         // scheduler.Config.Lease
	replicaOwnerEnv  = "JOBQ_ROBUSTNESS_REPLICA_OWNER" // scheduler.Config.Owner
)

// runReplica is the body of a replica subprocess. It prints
// "listening <addr> tz=<zone>" once serving and stops gracefully on SIGTERM.
func runReplica() int {
	dur := func(env string, def time.Duration) time.Duration {
		d, err := time.ParseDuration(os.Getenv(env))
		if err != nil {
			return def
		}
		return d
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	jitter := dur(replicaJitterEnv, 0)
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	r, err := app.Start(ctx, app.Config{
		DSN: os.Getenv(replicaEnv), Listen: "127.0.0.1:0", Logger: logger,
		Scheduler: scheduler.Config{Owner: os.Getenv(replicaOwnerEnv), Workers: 10,
			PollInterval: dur(replicaPollEnv, 200*time.Millisecond), PollJitter: jitter, NoJitter: jitter == 0,
			Lease: dur(replicaLeaseEnv, 3*time.Second), RescueInterval: time.Second,
			RetryBackoffBase: 100 * time.Millisecond, ShutdownTimeout: 5 * time.Second},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "replica:", err)
		return 1
	}
	fmt.Printf("listening %s tz=%s\n", r.Addr, time.Local)
	select {
	case <-ctx.Done():
	case err := <-r.Err():
		fmt.Fprintln(os.Stderr, "replica: api:", err)
	}
	if err := r.Stop(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "replica: stop:", err)
		return 1
	}
	return 0
}

// replicaProc is a running replica subprocess.
type replicaProc struct {
	cmd    *exec.Cmd
	addr   string
	tz     string
	exited chan struct{}
	stderr *syncBuffer
}

// startReplica starts a replica subprocess on dsn with extra environment
// (e.g. "TZ=America/New_York") and stops it (SIGTERM, then SIGKILL) at cleanup.
func startReplica(t *testing.T, dsn string, env ...string) *replicaProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), replicaEnv+"="+dsn), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &replicaProc{cmd: cmd, exited: make(chan struct{}), stderr: &syncBuffer{}}
	cmd.Stderr = p.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "listening ") {
				lines <- sc.Text()
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-p.exited
		}
	})
	select {
	case l := <-lines:
		f := strings.Fields(l)
		p.addr, p.tz = f[1], strings.TrimPrefix(f[2], "tz=")
	case <-p.exited:
		t.Fatalf("replica exited at start: %s", p.stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("replica did not start within 60s: %s", p.stderr.String())
	}
	return p
}

// alive reports whether the subprocess is still running.
func (p *replicaProc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

var httpc = &http.Client{Timeout: 3 * time.Second}

// status GETs path on the replica and returns the status code (0 when the
// request failed).
func (p *replicaProc) status(path string) int {
	resp, err := httpc.Get("http://" + p.addr + path)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// submit POSTs a submit body and returns the status code and body.
func (p *replicaProc) submit(body string) (int, string) {
	resp, err := httpc.Post("http://"+p.addr+"/v1/jobs", "application/json", strings.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
