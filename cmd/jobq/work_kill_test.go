//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/scheduler/schedulertest"
)

// workHelperEnv, set to a JSON WorkCmd, makes the test binary run that
// `jobq work` and exit (TestMain).
const workHelperEnv = "JOBQ_TEST_WORK_HELPER"

func workHelper(spec string) {
	var cmd WorkCmd
	if err := json.Unmarshal([]byte(spec), &cmd); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := cmd.Run(&Globals{Log: quiet, Ctx: context.Background()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestWorkKilledTakesItsCommand: a `jobq work` killed with SIGKILL takes
// its running command with it (Pdeathsig), so it does not run on beside
// the job's re-run.
func TestWorkKilledTakesItsCommand(t *testing.T) {
	c := startWorkReplica(t, "exec-orphan")
	pidfile := filepath.Join(t.TempDir(), "pid")
	spec, err := json.Marshal(WorkCmd{
		Server: c.BaseURL, Type: []string{"exec-orphan"}, Concurrency: 1, ShutdownTimeout: 5 * time.Second,
		KillAfter: time.Second, NoRetryExit: 65, PollWait: 5 * time.Second,
		Exec: `echo $$ > ` + pidfile + `; exec sleep 60`,
	})
	if err != nil {
		t.Fatal(err)
	}
	work := exec.Command(os.Args[0], "-test.run=^$")
	work.Env = append(os.Environ(), workHelperEnv+"="+string(spec))
	if err := work.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = work.Process.Kill(); _ = work.Wait() })
	j, _, err := c.Submit(context.Background(), apitype.SubmitRequest{JobKey: "orphan-1", JobType: "exec-orphan"})
	if err != nil {
		t.Fatal(err)
	}
	events(t).WaitFor(t, scheduler.EventFetchClaimed, schedulertest.Job(j.ID), 30*time.Second)
	// The command is another process: its pid is known once it wrote it,
	// and its end only by polling (kill -0, /proc), each with a deadline.
	var pid int
	for deadline := time.Now().Add(30 * time.Second); ; {
		b, _ := os.ReadFile(pidfile)
		if p, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && p > 0 {
			pid = p
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command never wrote its pid")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !alive(pid) {
		t.Fatalf("command %d not running before the kill", pid)
	}
	if err := work.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = work.Wait()
	for deadline := time.Now().Add(10 * time.Second); alive(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("command %d still running 10s after its jobq work was killed", pid)
		}
	}
}

// alive reports whether pid runs: it exists and is not a zombie waiting
// for a reaper.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
