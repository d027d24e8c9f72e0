package scheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jobq/jobq"
)

// parentReader is the store's read of a workflow job's parents and their
// outputs (*store.Store.JobParents). A store without it (a test double)
// gives handlers no parents.
type parentReader interface {
	JobParents(ctx context.Context, ids []uint64) (map[uint64][]jobq.ParentOutput, error)
}

// SpawnJob is one job a run adds to its workflow with its success
// (Job.Spawn): a job_key, job_type and params as a submit has them, and
// the job_keys of the other spawned jobs it waits for. Every spawned job
// also depends on the run that spawned it.
type SpawnJob struct {
	JobKey    string
	JobType   string
	Params    json.RawMessage // a JSON object; nil for {}
	Priority  int
	MaxRetry  int // 0: no retry
	DependsOn []string
}

// SpawnValidateFunc turns a handler's spawned jobs into validated
// workflow jobs (service.Service.ValidateSpawn behind app's wiring).
type SpawnValidateFunc func(jobs []SpawnJob) (*jobq.Spawn, error)

// SetSpawnValidator sets how Job.Spawn checks what a handler spawns (the
// API's submit rules); without one, only the graph and the params' JSON
// are checked.
func (s *Scheduler) SetSpawnValidator(f SpawnValidateFunc) { s.disp.spawnValidate = f }

// Parents returns the run's parents in its workflow — job_key, status and
// recorded output (the output of the attempt that succeeded) — read from
// the database; nil for a job outside a workflow or without parents.
func (j *Job) Parents(ctx context.Context) ([]jobq.ParentOutput, error) {
	if j.WorkflowID == 0 || j.parents == nil {
		return nil, nil
	}
	m, err := j.parents.JobParents(ctx, []uint64{j.ID})
	if err != nil {
		return nil, fmt.Errorf("jobq: parents: %w", err)
	}
	return m[j.ID], nil
}

// ParentOutput returns the output of the parent whose job_key is key (nil
// when it has none); an error when the run has no such parent.
func (j *Job) ParentOutput(ctx context.Context, key string) (json.RawMessage, error) {
	ps, err := j.Parents(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		if p.JobKey == key {
			return p.Output, nil
		}
	}
	return nil, fmt.Errorf("jobq: job %q has no parent %q", j.JobKey, key)
}

// ErrNotInWorkflow is returned by Job.Spawn for a job outside a workflow.
var ErrNotInWorkflow = errors.New("jobq: the job is not part of a workflow")

// Spawn adds jobs to the run's workflow (dynamic fan-out: N jobs, and one
// that waits for all of them). Nothing is written now: the jobs are
// inserted in the transaction of the run's successful completion, so a
// run that fails, is lost or whose completion is refused adds none, and a
// crash never leaves half a fan-out. Calling it again replaces the jobs.
// At most jobq.MaxSpawnJobs jobs; the error names the job and the rule.
func (j *Job) Spawn(jobs ...SpawnJob) error {
	if j.WorkflowID == 0 {
		return ErrNotInWorkflow
	}
	v := j.spawnValidate
	if v == nil {
		v = basicSpawn
	}
	sp, err := v(jobs)
	if err != nil {
		return err
	}
	j.outMu.Lock()
	j.spawn = sp
	j.outMu.Unlock()
	return nil
}

func (j *Job) spawned() *jobq.Spawn {
	j.outMu.Lock()
	defer j.outMu.Unlock()
	return j.spawn
}

// basicSpawn checks params' JSON and the graph only.
func basicSpawn(jobs []SpawnJob) (*jobq.Spawn, error) {
	if len(jobs) > jobq.MaxSpawnJobs {
		return nil, fmt.Errorf("jobq: spawn: at most %d jobs, got %d", jobq.MaxSpawnJobs, len(jobs))
	}
	out := make([]jobq.WorkflowJobParams, len(jobs))
	for i, sj := range jobs {
		params := "{}"
		if len(sj.Params) > 0 {
			var b bytes.Buffer
			if err := json.Compact(&b, sj.Params); err != nil || b.Len() == 0 || b.Bytes()[0] != '{' {
				return nil, fmt.Errorf("jobq: spawn: jobs[%d].params: must be a JSON object", i)
			}
			params = b.String()
		}
		if sj.JobKey == "" || len(sj.JobKey) > 64 || sj.JobType == "" || len(sj.JobType) > 64 {
			return nil, fmt.Errorf("jobq: spawn: jobs[%d]: job_key and job_type must be 1–64 characters", i)
		}
		out[i] = jobq.WorkflowJobParams{SubmitParams: jobq.SubmitParams{JobKey: sj.JobKey, JobType: sj.JobType, Params: params,
			RequestHash: "spawn", Priority: sj.Priority, MaxRetry: sj.MaxRetry}}
		for _, d := range sj.DependsOn {
			out[i].DependsOn = append(out[i].DependsOn, jobq.Dependency{JobKey: d, OnParentFailure: jobq.OnParentFailureCancel})
		}
	}
	if err := jobq.CheckGraph(out); err != nil {
		return nil, fmt.Errorf("jobq: spawn: %w", err)
	}
	return &jobq.Spawn{Jobs: out}, nil
}
