package app

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	jobqv1 "github.com/jobq/jobq/gen/jobq/v1"
	"github.com/jobq/jobq/gen/jobq/v1/jobqv1connect"
)

// WorkerService.CompleteBatch answers as the HTTP route: applied, forbidden
// for a forged secret, invalid naming the field; the same batch again is
// applied once; an empty batch is InvalidArgument naming completions.
func TestWorkerCompleteBatchOverConnect(t *testing.T) {
	w := startWorkerReplica(t, nil)
	id := w.submit("connect-batch-1", "resize")
	c := jobqv1connect.NewWorkerServiceClient(http.DefaultClient, w.base)
	jobs := w.fetch(resizeToken, "cw", []string{"resize"}, 1, 0)
	if len(jobs) != 1 || jobs[0].ID != id {
		t.Fatalf("fetch: %+v", jobs)
	}
	tok := jobs[0].TaskToken
	batch := func(cs ...*jobqv1.CompleteRequest) (*jobqv1.CompleteBatchResponse, error) {
		req := connect.NewRequest(&jobqv1.CompleteBatchRequest{Completions: cs})
		req.Header().Set("Authorization", "Bearer "+resizeToken)
		resp, err := c.CompleteBatch(context.Background(), req)
		if err != nil {
			return nil, err
		}
		return resp.Msg, nil
	}
	for round := 1; round <= 2; round++ {
		resp, err := batch(
			&jobqv1.CompleteRequest{TaskToken: tok, Outcome: "success", Output: `{"ok":true}`},
			&jobqv1.CompleteRequest{TaskToken: forge(t, tok), Outcome: "success"},
			&jobqv1.CompleteRequest{TaskToken: "jqt1.7", Outcome: "success"},
		)
		if err != nil || len(resp.Results) != 3 {
			t.Fatalf("round %d: CompleteBatch: %v %v", round, resp, err)
		}
		if r := resp.Results[0]; r.Result != "applied" || r.JobId != id || r.Status != "SUCCESS" {
			t.Errorf("round %d: first result %v, want applied SUCCESS", round, r)
		}
		if r := resp.Results[1]; r.Result != "forbidden" || r.Field != "task_token" {
			t.Errorf("round %d: forged result %v, want forbidden naming task_token", round, r)
		}
		if r := resp.Results[2]; r.Result != "invalid" || r.Code != "invalid_argument" || r.Field != "task_token" || !strings.HasPrefix(r.Message, "task_token: ") {
			t.Errorf("round %d: malformed result %v, want invalid naming task_token", round, r)
		}
		if resp.Applied != 1 || resp.Forbidden != 1 || resp.Invalid != 1 {
			t.Errorf("round %d: counts %v", round, resp)
		}
	}
	if got := fmt.Sprint(w.executions(id)); got != "[1:SUCCESS]" {
		t.Fatalf("executions %s, want one SUCCESS", got)
	}
	if _, err := batch(); connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "completions: ") {
		t.Fatalf("empty batch: %v, want InvalidArgument naming completions", err)
	}
}
