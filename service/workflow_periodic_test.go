package service_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/service"
)

// A schedule whose target is a workflow template starts, at each instant,
// one workflow '<name>@<instant>' with every job of the template keyed
// '<name>@<instant>/<job_key>' and its dependencies — once per instant,
// however often the instant is fired. Templates are validated like a
// workflow submit, plus the key length the instant adds.
func TestPeriodicStartsAWorkflowPerInstant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testdb.Store(t)
	ops := service.NewOps(service.OpsOptions{Store: st, KnownTypeFunc: func(t string) bool { return t == "noop" }})
	tmpl := &apitype.PeriodicWorkflow{Jobs: []apitype.WorkflowJob{
		{SubmitRequest: apitype.SubmitRequest{JobKey: "build", JobType: "noop"}},
		{SubmitRequest: apitype.SubmitRequest{JobKey: "deploy", JobType: "noop"}, DependsOn: []apitype.DependencyRef{{JobKey: "build"}}},
	}}
	for _, tc := range []struct {
		req  apitype.PeriodicRequest
		want string
	}{
		{apitype.PeriodicRequest{Name: "n", Cron: "@hourly", JobType: "noop", Workflow: tmpl}, "workflow: replaces job_type"},
		{apitype.PeriodicRequest{Name: "n", Cron: "@hourly", Workflow: &apitype.PeriodicWorkflow{Jobs: []apitype.WorkflowJob{
			{SubmitRequest: apitype.SubmitRequest{JobKey: strings.Repeat("k", 42), JobType: "noop"}}}}}, "workflow.jobs[0].job_key: at most"},
		{apitype.PeriodicRequest{Name: "n", Cron: "@hourly", Workflow: &apitype.PeriodicWorkflow{Jobs: []apitype.WorkflowJob{
			{SubmitRequest: apitype.SubmitRequest{JobKey: "a", JobType: "noop"}, DependsOn: []apitype.DependencyRef{{JobKey: "a"}}}}}}, "workflow.jobs[0].depends_on[0]"},
	} {
		_, _, err := ops.PutPeriodic(ctx, tc.req, jobq.PeriodicSourceAPI)
		var ve *service.ValidationError
		if !errors.As(err, &ve) || !strings.Contains(ve.Error(), tc.want) {
			t.Fatalf("%+v: %v, want a ValidationError with %q", tc.req, err, tc.want)
		}
	}
	p, created, err := ops.PutPeriodic(ctx, apitype.PeriodicRequest{Name: "nightly", Cron: "@hourly", Workflow: tmpl}, jobq.PeriodicSourceAPI)
	if err != nil || !created || len(p.Workflow) != 2 || p.JobType != "" {
		t.Fatalf("put: %+v %v %v", p, created, err)
	}
	if a := apitype.PeriodicFrom(p); a.Workflow == nil || len(a.Workflow.Jobs[1].DependsOn) != 1 {
		t.Fatalf("API form: %+v", a.Workflow)
	}
	at := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	plan := func(jobq.Periodic, time.Time) jobq.PeriodicPlan {
		return jobq.PeriodicPlan{Enqueue: []time.Time{at}, Next: at.Add(time.Hour), LateAfter: 100 * 365 * 24 * time.Hour}
	}
	for range 2 { // the second fire of the same instant starts nothing more
		if _, err := st.PeriodicFire(ctx, "nightly", plan); err != nil {
			t.Fatal(err)
		}
	}
	w, err := st.WorkflowGetByKey(ctx, "nightly@2026-12-02T01:00:00Z")
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Jobs) != 2 || w.Jobs[0].JobKey != "nightly@2026-12-02T01:00:00Z/build" || w.Jobs[0].Status != jobq.StateWaiting ||
		w.Jobs[1].Status != jobq.StateBlocked || len(w.Edges) != 1 {
		t.Fatalf("started workflow: %+v", w)
	}
	list, err := st.WorkflowList(ctx, 0, 10)
	if err != nil || len(list) != 1 {
		t.Fatalf("workflows after two fires of one instant: %d %v, want 1", len(list), err)
	}
}
