package jobq

import (
	"encoding/json"
	"fmt"
	"time"
)

// Workflow limits (docs/workflows.md).
const (
	// MaxWorkflowJobs is the most jobs one workflow submit may hold.
	MaxWorkflowJobs = 10000
	// MaxWorkflowEdges is the most dependencies (depends_on entries) one
	// workflow submit may hold, all jobs together.
	MaxWorkflowEdges = 100000
	// MaxParentsPerJob is the most parents one job may wait for.
	MaxParentsPerJob = 1000
	// MaxSpawnJobs is the most jobs one completion may add (Spawn).
	MaxSpawnJobs = 1000
)

// OnParentFailure says what a parent ending FAILED or CANCELED does to a
// child that depends on it.
type OnParentFailure string

// Failure policies of a dependency.
const (
	// OnParentFailureCancel (the default) cancels the child and, through
	// their own dependencies, its descendants.
	OnParentFailureCancel OnParentFailure = "cancel"
	// OnParentFailureRun counts the parent as done: the child runs once its
	// other parents are done.
	OnParentFailureRun OnParentFailure = "run"
)

// Dependency is one parent of a workflow job, by job_key.
type Dependency struct {
	JobKey          string
	OnParentFailure OnParentFailure
}

// WorkflowJobParams is one validated job of a workflow submit.
type WorkflowJobParams struct {
	SubmitParams
	DependsOn []Dependency
}

// WorkflowSubmitParams is a validated workflow submit: Jobs have distinct
// job keys, every dependency names one of them and the graph has no cycle.
type WorkflowSubmitParams struct {
	WorkflowKey string
	RequestHash string
	Jobs        []WorkflowJobParams
}

// Spawn is what a successful run adds to its own workflow (dynamic
// fan-out): Jobs, validated like a workflow submit's, whose depends_on name
// other spawned jobs or jobs already in the workflow. A spawned job
// depends on the spawning run implicitly (it was done when they were added).
type Spawn struct {
	Jobs []WorkflowJobParams
}

// Edge is one dependency of a workflow: Child waits for Parent.
type Edge struct {
	Parent          uint64
	Child           uint64
	OnParentFailure OnParentFailure
}

// Workflow is one workflow with its jobs and edges.
type Workflow struct {
	ID          uint64
	WorkflowKey string
	CreateTime  time.Time
	RequestHash string
	Jobs        []Job
	Edges       []Edge
}

// WorkflowSummary is one row of a workflow list.
type WorkflowSummary struct {
	ID          uint64
	WorkflowKey string
	CreateTime  time.Time
	Jobs        int
	Succeeded   int
	Failed      int
	Canceled    int
	Running     int
}

// Status is the workflow's state from its jobs' counts: RUNNING while a
// job is not finished, else FAILED when one failed, CANCELED when one was
// canceled, else SUCCESS.
func (w WorkflowSummary) Status() string {
	switch {
	case w.Succeeded+w.Failed+w.Canceled < w.Jobs:
		return "RUNNING"
	case w.Failed > 0:
		return "FAILED"
	case w.Canceled > 0:
		return "CANCELED"
	default:
		return "SUCCESS"
	}
}

// ParentOutput is one parent of a running job, as its handler reads it.
type ParentOutput struct {
	JobID  uint64
	JobKey string
	Status JobState
	// Output is the parent's recorded output; nil when it has none.
	Output json.RawMessage
}

// WorkflowKeyTakenError is a workflow submit refused because one of its
// job keys already names a job outside the workflow; it is an
// ErrKeyConflict.
type WorkflowKeyTakenError struct{ JobKey string }

func (e *WorkflowKeyTakenError) Error() string {
	return fmt.Sprintf("job_key %q already names another job", e.JobKey)
}

// Unwrap makes the error an ErrKeyConflict.
func (e *WorkflowKeyTakenError) Unwrap() error { return ErrKeyConflict }

// GraphError is a workflow graph refused: Field names the offending job or
// edge ("jobs[3].depends_on[0]") and Rule says what is wrong.
type GraphError struct {
	Field string
	Rule  string
}

func (e *GraphError) Error() string { return e.Field + ": " + e.Rule }

// CheckGraph checks a workflow's jobs: at most MaxWorkflowJobs jobs and
// MaxWorkflowEdges dependencies (MaxParentsPerJob per job), distinct job
// keys, each dependency naming another job of the list once, with a known
// policy, and no cycle. The error names the job or edge and the rule.
func CheckGraph(jobs []WorkflowJobParams) error {
	if len(jobs) == 0 {
		return &GraphError{"jobs", "at least one job is required"}
	}
	if len(jobs) > MaxWorkflowJobs {
		return &GraphError{"jobs", fmt.Sprintf("at most %d jobs per workflow, got %d", MaxWorkflowJobs, len(jobs))}
	}
	index := make(map[string]int, len(jobs))
	for i, j := range jobs {
		if k, dup := index[j.JobKey]; dup {
			return &GraphError{fmt.Sprintf("jobs[%d].job_key", i), fmt.Sprintf("%q is already the key of jobs[%d]: job keys must be distinct", j.JobKey, k)}
		}
		index[j.JobKey] = i
	}
	edges := 0
	children := make([][]int, len(jobs))
	indeg := make([]int, len(jobs))
	for i, j := range jobs {
		if len(j.DependsOn) > MaxParentsPerJob {
			return &GraphError{fmt.Sprintf("jobs[%d].depends_on", i), fmt.Sprintf("at most %d parents per job, got %d", MaxParentsPerJob, len(j.DependsOn))}
		}
		edges += len(j.DependsOn)
		if edges > MaxWorkflowEdges {
			return &GraphError{"jobs", fmt.Sprintf("at most %d dependencies per workflow", MaxWorkflowEdges)}
		}
		seen := make(map[string]bool, len(j.DependsOn))
		for k, d := range j.DependsOn {
			field := fmt.Sprintf("jobs[%d].depends_on[%d]", i, k)
			p, ok := index[d.JobKey]
			switch {
			case !ok:
				return &GraphError{field, fmt.Sprintf("%q is not the job_key of a job of this workflow", d.JobKey)}
			case p == i:
				return &GraphError{field, fmt.Sprintf("job %q depends on itself", j.JobKey)}
			case seen[d.JobKey]:
				return &GraphError{field, fmt.Sprintf("%q is listed twice", d.JobKey)}
			case d.OnParentFailure != OnParentFailureCancel && d.OnParentFailure != OnParentFailureRun:
				return &GraphError{field + ".on_parent_failure", fmt.Sprintf("must be %q or %q, got %q", OnParentFailureCancel, OnParentFailureRun, d.OnParentFailure)}
			}
			seen[d.JobKey] = true
			children[p] = append(children[p], i)
			indeg[i]++
		}
	}
	// Kahn's algorithm: what is left once no job without parents remains
	// is on a cycle.
	queue := make([]int, 0, len(jobs))
	for i := range jobs {
		if indeg[i] == 0 {
			queue = append(queue, i)
		}
	}
	for n := 0; n < len(queue); n++ {
		for _, c := range children[queue[n]] {
			if indeg[c]--; indeg[c] == 0 {
				queue = append(queue, c)
			}
		}
	}
	if len(queue) == len(jobs) {
		return nil
	}
	// Every job left has a parent left: walking up from one such parent
	// to the next must come back to a job already seen, which is on a cycle.
	cur := -1
	for i := range jobs {
		if indeg[i] > 0 {
			cur = i
			break
		}
	}
	visited := map[int]bool{}
	for cur >= 0 && !visited[cur] {
		visited[cur] = true
		next := -1
		for _, d := range jobs[cur].DependsOn {
			if p := index[d.JobKey]; indeg[p] > 0 {
				next = p
				break
			}
		}
		cur = next
	}
	if cur >= 0 {
		for k, d := range jobs[cur].DependsOn {
			if p := index[d.JobKey]; indeg[p] > 0 {
				return &GraphError{fmt.Sprintf("jobs[%d].depends_on[%d]", cur, k),
					fmt.Sprintf("the edge %q → %q is on a cycle: a workflow must be acyclic", d.JobKey, jobs[cur].JobKey)}
			}
		}
	}
	return &GraphError{"jobs", "the dependencies form a cycle"}
}
