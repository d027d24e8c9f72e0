package scheduler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/scheduler/schedulertest"
	"github.com/jobq/jobq/service"
)

// A workflow runs in dependency order on a scheduler: each handler reads
// its parents' outputs, a map job spawns children and a reducer that waits
// for all of them (and, like every spawned job, for the map job), and the children become runnable in their last
// parent's completion (no job runs before its parents succeeded, none
// twice).
func TestWorkflowRunsInOrderWithOutputsAndSpawn(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	var mu sync.Mutex
	order := map[string]int{}
	seen := map[string][]string{}
	step := 0
	reg := scheduler.NewRegistry()
	reg.Register("step", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		ps, err := job.Parents(ctx)
		if err != nil {
			return err
		}
		var got []string
		for _, p := range ps {
			var out struct{ Key string }
			if err := json.Unmarshal(p.Output, &out); err != nil || out.Key != p.JobKey {
				return fmt.Errorf("parent %s output %s", p.JobKey, p.Output)
			}
			got = append(got, p.JobKey)
		}
		mu.Lock()
		step++
		if _, dup := order[job.JobKey]; dup {
			mu.Unlock()
			return fmt.Errorf("%s ran twice", job.JobKey)
		}
		order[job.JobKey] = step
		seen[job.JobKey] = got
		mu.Unlock()
		if job.JobKey == "map" {
			var js []scheduler.SpawnJob
			var keys []string
			for i := range 5 {
				k := fmt.Sprintf("part-%d", i)
				js = append(js, scheduler.SpawnJob{JobKey: k, JobType: "step"})
				keys = append(keys, k)
			}
			js = append(js, scheduler.SpawnJob{JobKey: "reduce", JobType: "step", DependsOn: keys})
			if err := job.Spawn(js...); err != nil {
				return err
			}
		}
		return job.SetOutput(map[string]string{"key": job.JobKey})
	}))
	startScheduler(t, st, reg, fastConfig("r1"))
	svc := service.New(service.Options{Store: st})
	svc.SetWorkflowStore(st)
	dep := func(keys ...string) []apitype.DependencyRef {
		var out []apitype.DependencyRef
		for _, k := range keys {
			out = append(out, apitype.DependencyRef{JobKey: k})
		}
		return out
	}
	job := func(key string, deps ...string) apitype.WorkflowJob {
		return apitype.WorkflowJob{SubmitRequest: apitype.SubmitRequest{JobKey: key, JobType: "step"}, DependsOn: dep(deps...)}
	}
	wf, created, err := svc.SubmitWorkflow(context.Background(), apitype.WorkflowSubmitRequest{WorkflowKey: "ci", Jobs: []apitype.WorkflowJob{
		job("build"), job("test-linux", "build"), job("test-mac", "build"), job("test-win", "build"),
		job("deploy", "test-linux", "test-mac", "test-win"), job("map", "deploy"),
	}})
	if err != nil || !created {
		t.Fatal(created, err)
	}
	// The six jobs submitted, the five parts and the reducer spawned by map.
	events(t).WaitUntil(t, "the workflow's 12 jobs to succeed", func(evs []scheduler.Event) bool {
		return len(schedulertest.Succeeded(evs)) == 12
	}, slowWait)
	w, err := st.WorkflowGet(context.Background(), wf.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range w.Jobs {
		if j.Status != jobq.StateSuccess {
			t.Fatalf("job %s is %s once 12 jobs succeeded, want SUCCESS", j.JobKey, j.Status)
		}
	}
	if len(w.Jobs) != 12 {
		t.Fatalf("the workflow has %d jobs, want 12", len(w.Jobs))
	}
	mu.Lock()
	defer mu.Unlock()
	for _, c := range [][2]string{{"build", "test-linux"}, {"test-win", "deploy"}, {"test-mac", "deploy"}, {"deploy", "map"}, {"map", "part-3"}, {"part-0", "reduce"}, {"part-4", "reduce"}} {
		if order[c[0]] >= order[c[1]] {
			t.Fatalf("%s ran at step %d, not before %s (step %d)", c[0], order[c[0]], c[1], order[c[1]])
		}
	}
	slices.Sort(seen["deploy"])
	if !slices.Equal(seen["deploy"], []string{"test-linux", "test-mac", "test-win"}) || len(seen["reduce"]) != 6 {
		t.Fatalf("parents seen: deploy %v, reduce %v", seen["deploy"], seen["reduce"])
	}
}

// The unblock wakes the replica's scanner: a child is claimed well within
// one poll interval of its parent's completion.
func TestWorkflowUnblockWakesTheScanner(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	done := make(chan time.Time, 4)
	reg := scheduler.NewRegistry()
	reg.Register("step", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		done <- time.Now()
		return nil
	}))
	cfg := fastConfig("r1")
	cfg.PollInterval, cfg.PollJitter = 30*time.Second, time.Second
	sc := startScheduler(t, st, reg, cfg)
	svc := service.New(service.Options{Store: st, WakeFunc: sc.Wake})
	svc.SetWorkflowStore(st)
	_, _, err := svc.SubmitWorkflow(context.Background(), apitype.WorkflowSubmitRequest{WorkflowKey: "w", Jobs: []apitype.WorkflowJob{
		{SubmitRequest: apitype.SubmitRequest{JobKey: "a", JobType: "step"}},
		{SubmitRequest: apitype.SubmitRequest{JobKey: "b", JobType: "step"}, DependsOn: []apitype.DependencyRef{{JobKey: "a"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(slowWait):
		t.Fatal("a never ran")
	}
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("b was not claimed within half a poll interval of a's completion: the unblock did not wake the scanner")
	}
}
