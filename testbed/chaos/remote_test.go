package chaos

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/testbed/chaos/checker"
)

// TestRemoteConfig: worker faults need remote workers; worker-N targets
// parse; a seeded plan targets workers, not replicas, for worker faults.
func TestRemoteConfig(t *testing.T) {
	c := Config{Faults: []string{FaultWorkerPause}}.WithDefaults()
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "needs --executor remote or mixed") {
		t.Fatalf("worker fault with the local executor: %v", err)
	}
	c = Config{Executor: ExecutorRemote, Schedule: "worker-kill@1s:worker-3,replica-kill@2s:replica-2"}.WithDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if p := c.plan(); len(p) != 2 || p[0].Target != 2 || p[1].Target != 1 {
		t.Fatalf("plan %+v", p)
	}
	c = Config{Executor: ExecutorRemote, RemoteWorkers: []string{WorkerGo, WorkerNode}, Faults: []string{FaultAckLoss}, Rounds: 8}.WithDefaults()
	for _, pf := range c.plan() {
		if pf.Target >= 2 {
			t.Fatalf("worker fault targets worker %d of 2", pf.Target+1)
		}
	}
	if err := (Config{Executor: "nope"}).WithDefaults().Validate(); err == nil {
		t.Fatal("executor nope accepted")
	}
}

// TestSabotageRemoteFencingCaught: with --sabotage remote-fencing a paused
// worker's late success, refused by the replica, is written by job id and
// answered applied: the checker must report the late completion accepted
// and the applied answer lost. Both workers are paused in turn (jobq work,
// then the Go worker): a late completion is sent only when the worker's
// handler returns before its first heartbeat after SIGCONT answers lost,
// which jobq work's commands, stopped with it, usually do.
func TestSabotageRemoteFencingCaught(t *testing.T) {
	cfg := quick(t, "remote-fencing")
	cfg.Jobs, cfg.Duration, cfg.Runtime = 150, 10*time.Second, "uniform:400ms-1200ms"
	cfg.Executor, cfg.RemoteWorkers = ExecutorRemote, []string{WorkerWork, WorkerGo}
	cfg.Schedule, cfg.Sabotage = "worker-pause@2s:worker-1,worker-pause@3s:worker-2", []string{"remote-fencing"}
	rf, err := Run(context.Background(), cfg)
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v, want ErrInvalid", err)
	}
	if rf.Result.Faults[0].RunningAtStart == 0 {
		t.Fatal("the paused worker held no job: the experiment did not happen")
	}
	got := map[string]int{}
	for _, v := range rf.Result.Violations {
		got[v.Check] = v.Count
	}
	for _, check := range []string{checker.CheckLateCompletionAccepted, checker.CheckLostAfterAck} {
		if got[check] == 0 {
			t.Fatalf("%s not reported; violations %v", check, got)
		}
	}
	t.Logf("violations %v", got)
}
