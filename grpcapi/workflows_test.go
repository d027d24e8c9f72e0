package grpcapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/app"
	jobqv1 "github.com/jobq/jobq/gen/jobq/v1"
	"github.com/jobq/jobq/gen/jobq/v1/jobqv1connect"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/scheduler/schedulertest"
)

// WorkflowService over Connect: a pipeline runs to SUCCESS, a cycle is
// INVALID_ARGUMENT naming the edge, another body under the same key
// ALREADY_EXISTS, an unknown key NOT_FOUND.
func TestWorkflowServiceOverConnect(t *testing.T) {
	t.Parallel()
	rec := schedulertest.NewRecorder()
	r := startReplica(t, func(cfg *app.Config) { cfg.Scheduler.Observer = rec })
	c := jobqv1connect.NewWorkflowServiceClient(http.DefaultClient, "http://"+r.Addr)
	ctx := context.Background()
	job := func(key string, deps ...string) *jobqv1.WorkflowJob {
		j := &jobqv1.WorkflowJob{Job: &jobqv1.SubmitJobRequest{JobKey: key, JobType: "noop"}}
		for _, d := range deps {
			j.DependsOn = append(j.DependsOn, &jobqv1.Dependency{JobKey: d})
		}
		return j
	}
	req := &jobqv1.SubmitWorkflowRequest{WorkflowKey: "g1", Jobs: []*jobqv1.WorkflowJob{job("g-build"), job("g-test", "g-build"), job("g-deploy", "g-test")}}
	resp, err := c.SubmitWorkflow(ctx, connect.NewRequest(req))
	if err != nil || !resp.Msg.GetCreated() || len(resp.Msg.GetWorkflow().GetJobs()) != 3 {
		t.Fatalf("submit: %v %v", resp, err)
	}
	// Every job of the pipeline succeeds on the replica (its events); the
	// workflow then reads SUCCESS.
	for _, j := range resp.Msg.GetWorkflow().GetJobs() {
		rec.WaitFor(t, scheduler.EventCompleted, schedulertest.Finished(j.GetId(), jobq.OutcomeSuccess), 2*time.Minute)
	}
	g, err := c.GetWorkflow(ctx, connect.NewRequest(&jobqv1.GetWorkflowRequest{WorkflowKey: "g1"}))
	if err != nil {
		t.Fatal(err)
	}
	if st := g.Msg.GetWorkflow().GetStatus(); st != "SUCCESS" || len(g.Msg.GetWorkflow().GetEdges()) != 2 {
		t.Fatalf("workflow %s with edges %v once its jobs succeeded, want SUCCESS with 2 edges", st, g.Msg.GetWorkflow().GetEdges())
	}
	cyc := &jobqv1.SubmitWorkflowRequest{WorkflowKey: "g2", Jobs: []*jobqv1.WorkflowJob{job("c-a", "c-b"), job("c-b", "c-a")}}
	if _, err := c.SubmitWorkflow(ctx, connect.NewRequest(cyc)); connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "cycle") {
		t.Fatalf("cycle: %v", err)
	}
	req.Jobs = req.Jobs[:2]
	if _, err := c.SubmitWorkflow(ctx, connect.NewRequest(req)); connect.CodeOf(err) != connect.CodeAlreadyExists {
		t.Fatalf("other body: %v", err)
	}
	if _, err := c.GetWorkflow(ctx, connect.NewRequest(&jobqv1.GetWorkflowRequest{WorkflowKey: "nope"})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("unknown: %v", err)
	}
	l, err := c.ListWorkflows(ctx, connect.NewRequest(&jobqv1.ListWorkflowsRequest{}))
	if err != nil || len(l.Msg.GetWorkflows()) != 1 || l.Msg.GetWorkflows()[0].GetStatus() != "SUCCESS" {
		t.Fatalf("list: %v %v", l, err)
	}
}
