package grpcapi_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/client"
)

// SubmitJobs over gRPC and Connect (the Go client) answers each job as
// SubmitJob would have, at its index, and agrees with the HTTP batch.
func TestSubmitJobsBatch(t *testing.T) {
	t.Parallel()
	r := startReplica(t)
	ctx := context.Background()
	g := client.NewGRPC("http://" + r.Addr)
	defer g.Close()
	h := client.New("http://" + r.Addr)
	prio := 5000
	jobs := []apitype.SubmitRequest{
		{JobKey: "g-0", JobType: "noop", Params: []byte(`{"a":1}`)},
		{JobKey: "g-1", JobType: "nope"},
		{JobKey: "g-2", JobType: "noop", Priority: &prio},
		{JobKey: "g-0", JobType: "noop", Params: []byte(`{"a":2}`)},
	}
	res, err := g.SubmitBatch(ctx, jobs)
	if err != nil {
		t.Fatalf("SubmitJobs: %v", err)
	}
	got := make([]string, len(res.Results))
	for i, x := range res.Results {
		got[i] = x.Status
		if x.Error != nil {
			got[i] += " " + x.Error.Code + " " + x.Error.Field
		}
	}
	want := []string{"created", "invalid invalid_argument job_type", "invalid invalid_argument priority", "conflict conflict job_key"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("results = %q, want %q", got, want)
	}
	if res.Created != 1 || res.Invalid != 2 || res.Conflict != 1 || res.Results[3].ID != res.Results[0].ID {
		t.Fatalf("counts %+v, conflict id %d, want 1 created, 2 invalid, 1 conflict on %d", res, res.Results[3].ID, res.Results[0].ID)
	}
	again, err := h.SubmitBatch(ctx, jobs[:1])
	if err != nil {
		t.Fatalf("HTTP batch: %v", err)
	}
	if again.Existing != 1 || again.Results[0].ID != res.Results[0].ID {
		t.Fatalf("HTTP re-submit = %+v, want existing %d", again, res.Results[0].ID)
	}
	if _, err := g.SubmitBatch(ctx, nil); err == nil {
		t.Fatalf("empty SubmitJobs: no error, want InvalidArgument")
	}
}
