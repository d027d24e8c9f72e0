package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jobq/jobq/client"
)

// Limits of `jobq work`'s command output.
const (
	// workMaxStdout is how much of a command's stdout is kept as the job's
	// output: the API's request body limit. The replica itself refuses an
	// output above 65,536 bytes once encoded, and the attempt then fails
	// with its message.
	workMaxStdout = 1 << 20
	// workMaxLogLine cuts a stderr line (the replica's per-line limit).
	workMaxLogLine = 4096
	// workLogFlush is how often stderr lines are sent as one log call.
	workLogFlush = 200 * time.Millisecond
	// workProgressPrefix starts a stderr line that reports progress
	// instead of being logged: "jobq:progress 0.5 copied 2 of 4 disks".
	workProgressPrefix = "jobq:progress "
)

// WorkCmd is `jobq work`: a worker that runs a command per job.
type WorkCmd struct {
	Server          string            `help:"Base URL of a replica's API (any replica)." default:"http://127.0.0.1:8080" env:"JOBQ_SERVER"`
	WorkerToken     string            `help:"Worker token, if the replicas require one (sent as a bearer token; never passed to the command)." env:"JOBQ_WORKER_TOKEN"`
	Type            []string          `help:"Job type to run (repeatable, or comma-separated); each must be declared remote on the replicas (jobq serve --remote-type)." required:"" env:"JOBQ_TYPES"`
	Exec            string            `help:"Command run for each job with sh -c. Alternatively give the program and its arguments after --, run without a shell."`
	Concurrency     int               `help:"Jobs run at once; a fetch asks for the free slots only." default:"4" env:"JOBQ_CONCURRENCY"`
	ShutdownTimeout time.Duration     `help:"On SIGTERM or Ctrl-C: how long running commands may finish before they are stopped and their jobs released." default:"10s" env:"JOBQ_SHUTDOWN_TIMEOUT"`
	KillAfter       time.Duration     `help:"How long a stopped command gets between SIGTERM and SIGKILL (on cancel, lease loss, job timeout or shutdown)." default:"10s"`
	NoRetryExit     int               `help:"Exit status that fails the job without retrying it (any other non-zero status is retried while retries are left)." default:"65"`
	WorkerID        string            `help:"Worker id shown as the jobs' owner (worker:<id>). Default: <hostname>-<pid>." env:"JOBQ_WORKER_ID"`
	Label           map[string]string `help:"Label shown with the worker in the console (repeatable): --label zone=eu-1."`
	PollWait        time.Duration     `help:"How long one fetch waits on the replica when no job is due (at most 60s)." default:"20s"`
	Argv            []string          `arg:"" optional:"" help:"Program and arguments run for each job without a shell (after --), instead of --exec."`
}

// Help is shown under the usage line of `jobq work --help`.
func (c *WorkCmd) Help() string {
	return `Runs a command for each job of the given types, so a shell script or any program is an executor:

  jobq work --type resize --exec './resize.sh'
  jobq work --type resize -- python3 resize.py

For each job the command gets the job's params (a JSON object) on stdin and
in JOBQ_PARAMS, and JOBQ_JOB_ID, JOBQ_JOB_KEY, JOBQ_JOB_TYPE and
JOBQ_ATTEMPT in its environment (the rest of jobq work's environment is
passed on, without JOBQ_WORKER_TOKEN). Its stdout is the job's output: JSON
when it parses as JSON, else a JSON string of the text (trailing newlines
cut; up to 1 MiB is read, and the replica refuses an output above 64 KiB:
the attempt then fails with the replica's message). Each stderr line is
appended to the attempt's log, except lines "jobq:progress P [MESSAGE]"
(P from 0 to 1), which report progress. Exit status 0 completes the job;
any other status fails the attempt, retried with backoff while retries are
left, except --no-retry-exit (65 unless set), which fails the job at once.
The failure's error is "exit status N" and the last stderr line.

When the job's cancel is requested, its lease is lost, its timeout_ms passes
or jobq work shuts down past --shutdown-timeout, the command's process
group gets SIGTERM, then SIGKILL after --kill-after. On SIGTERM or Ctrl-C
jobq work stops fetching, lets running commands finish for up to
--shutdown-timeout, and gives the jobs of those it had to stop back to the
queue without spending a retry.`
}

// Run starts the worker and returns after its graceful shutdown.
func (c *WorkCmd) Run(g *Globals) error {
	var types []string
	for _, t := range c.Type {
		for _, s := range strings.Split(t, ",") {
			if s = strings.TrimSpace(s); s != "" {
				types = append(types, s)
			}
		}
	}
	if len(types) == 0 {
		return errors.New("--type: at least one job type")
	}
	if (c.Exec == "") == (len(c.Argv) == 0) {
		return errors.New("--exec COMMAND or a program after --: exactly one of the two")
	}
	if c.KillAfter <= 0 {
		return errors.New("--kill-after: must be positive")
	}
	argv := c.Argv
	if c.Exec != "" {
		argv = []string{"/bin/sh", "-c", c.Exec}
	}
	w, err := client.NewWorker(client.WorkerConfig{
		Server: c.Server, Token: c.WorkerToken, WorkerID: c.WorkerID, Labels: c.Label,
		Version: "jobq-work", Concurrency: c.Concurrency, ShutdownTimeout: c.ShutdownTimeout,
		PollWait: c.PollWait, Logger: g.Log,
	})
	if err != nil {
		return err
	}
	r := &execRunner{argv: argv, killAfter: c.KillAfter, noRetryExit: c.NoRetryExit, log: g.Log}
	for _, t := range types {
		w.Register(t, r.run)
	}
	return w.Run(g.Ctx)
}

// execRunner runs one command per job.
type execRunner struct {
	argv        []string
	killAfter   time.Duration
	noRetryExit int
	log         *slog.Logger
}

// run is the HandlerFunc: one process per job.
func (r *execRunner) run(ctx context.Context, job *client.WorkerJob) (any, error) {
	cmd := exec.Command(r.argv[0], r.argv[1:]...)
	cmd.Env = append(childEnv(),
		"JOBQ_JOB_ID="+strconv.FormatUint(job.ID, 10), "JOBQ_JOB_KEY="+job.Key, "JOBQ_JOB_TYPE="+job.Type,
		"JOBQ_ATTEMPT="+strconv.Itoa(job.Attempt), "JOBQ_PARAMS="+string(job.Params))
	cmd.Stdin = bytes.NewReader(job.Params)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // signals reach the shell's children too
	dieWithParent(cmd.SysProcAttr)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, client.NoRetry(fmt.Errorf("start %s: %w", r.argv[0], err))
	}

	// Stop the process group on cancel: SIGTERM, then SIGKILL.
	exited := make(chan struct{})
	go func() {
		select {
		case <-exited:
			return
		case <-ctx.Done():
		}
		pid := cmd.Process.Pid
		r.log.Info("stopping command", "job_id", job.ID, "attempt", job.Attempt, "cause", context.Cause(ctx))
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(r.killAfter):
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}()

	var out []byte
	var outErr error
	var lastLine string
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		out, outErr = io.ReadAll(io.LimitReader(stdout, workMaxStdout+1))
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		defer wg.Done()
		lastLine = r.forwardStderr(ctx, job, stderr)
	}()
	wg.Wait()
	waitErr := cmd.Wait()
	close(exited)

	if waitErr != nil {
		msg := waitErr.Error()
		if ctx.Err() != nil {
			msg = fmt.Sprintf("%v (%s)", context.Cause(ctx), msg)
		}
		if lastLine != "" {
			msg += ": " + lastLine
		}
		if ee := (*exec.ExitError)(nil); errors.As(waitErr, &ee) && ee.ExitCode() == r.noRetryExit {
			return nil, client.NoRetry(errors.New(msg))
		}
		return nil, errors.New(msg)
	}
	if outErr != nil {
		return nil, fmt.Errorf("read stdout: %w", outErr)
	}
	if len(out) > workMaxStdout {
		return nil, client.NoRetry(fmt.Errorf("stdout: more than %d bytes; the output is at most 65,536", workMaxStdout))
	}
	return stdoutOutput(out), nil
}

// stdoutOutput is the job's output for a command's stdout: the JSON value
// it holds, else the text as a JSON string; empty stdout is null.
func stdoutOutput(out []byte) json.RawMessage {
	out = bytes.TrimRight(out, "\r\n")
	if len(bytes.TrimSpace(out)) == 0 {
		return json.RawMessage("null")
	}
	if json.Valid(out) {
		return json.RawMessage(out)
	}
	b, _ := json.Marshal(string(out)) // invalid UTF-8 becomes U+FFFD
	return b
}

// forwardStderr sends the command's stderr lines to the attempt's log,
// batched every workLogFlush, and progress lines as progress reports. It
// returns the last line (for a failure's error).
func (r *execRunner) forwardStderr(ctx context.Context, job *client.WorkerJob, stderr io.Reader) string {
	lines := make(chan string, 256)
	var last string
	go func() {
		defer close(lines)
		br := bufio.NewReaderSize(stderr, 64<<10)
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				line = strings.TrimRight(line, "\r\n")
				if len(line) > workMaxLogLine {
					line = strings.ToValidUTF8(line[:workMaxLogLine], "")
				}
				lines <- line
			}
			if err != nil {
				return
			}
		}
	}()
	// Log calls use their own context: lines written while the command is
	// being stopped still belong to the attempt.
	send := context.WithoutCancel(ctx)
	var batch []string
	full := false // the attempt's log budget is spent: stop sending
	flush := func() {
		if len(batch) == 0 || full {
			batch = batch[:0]
			return
		}
		if err := job.Log(send, batch...); err != nil {
			var ae *client.APIError
			if errors.As(err, &ae) && (ae.Status == 413 || ae.Status == 409) {
				full = true
			}
			r.log.Warn("command log not appended", "job_id", job.ID, "err", err)
		}
		batch = batch[:0]
	}
	tick := time.NewTicker(workLogFlush)
	defer tick.Stop()
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				flush()
				return last
			}
			if p, ok := strings.CutPrefix(line, workProgressPrefix); ok {
				num, msg, _ := strings.Cut(strings.TrimSpace(p), " ")
				if v, err := strconv.ParseFloat(num, 64); err == nil {
					flush()
					if err := job.Progress(send, v, msg); err != nil {
						r.log.Warn("command progress not reported", "job_id", job.ID, "err", err)
					}
					continue
				}
			}
			if strings.TrimSpace(line) != "" {
				last = line
			}
			batch = append(batch, line)
			if len(batch) >= 100 {
				flush()
			}
		case <-tick.C:
			flush()
		}
	}
}

// childEnv is this process's environment without the worker token.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "JOBQ_WORKER_TOKEN=") {
			env = append(env, kv)
		}
	}
	return env
}
