package service_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/service"
)

// TestStateErrorNamesStatusAndRule checks the one place the cancel and retry
// rules are spelled: a cancel or retry the job's status does not allow is a
// *service.StateError naming the job, its status and the rule, wrapping
// ErrInvalidState, mapped to 409 failed_precondition; nothing changes.
func TestStateErrorNamesStatusAndRule(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	svc := service.New(service.Options{Store: st, KnownTypeFunc: known})
	ctx := context.Background()
	waiting, _, err := svc.Submit(ctx, apitype.SubmitRequest{JobKey: "w", JobType: "noop"})
	if err != nil {
		t.Fatal(err)
	}
	// The job ran and succeeded (as its completion would leave it).
	if _, err := st.DB().Exec("UPDATE job_queue SET status = 'SUCCESS' WHERE id = ?", waiting.ID); err != nil {
		t.Fatal(err)
	}
	_, err = svc.Cancel(ctx, waiting.ID)
	want := fmt.Sprintf("job %d is SUCCESS: cancel applies to WAITING, SCHEDULED, BLOCKED, PARKED, HELD or RUNNING jobs", waiting.ID)
	var se *service.StateError
	if !errors.As(err, &se) || !errors.Is(err, service.ErrInvalidState) {
		t.Fatalf("cancel a SUCCESS job: err = %v, want a *StateError wrapping ErrInvalidState", err)
	}
	if se.JobID != waiting.ID || se.Status != jobq.StateSuccess || se.Op != service.OpCancel || err.Error() != want {
		t.Fatalf("cancel a SUCCESS job: %+v %q, want %q", se, err, want)
	}
	status, d := service.ErrorFor(err)
	if status != http.StatusConflict || d.Code != "failed_precondition" || d.Field != "status" || d.Message != want {
		t.Fatalf("ErrorFor = %d %+v", status, d)
	}
	// A retry of a WAITING job: the rule for retry.
	again, _, err := svc.Submit(ctx, apitype.SubmitRequest{JobKey: "w2", JobType: "noop"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = svc.Retry(ctx, again.ID)
	if want := fmt.Sprintf("job %d is WAITING: retry applies to FAILED or CANCELED jobs", again.ID); err == nil || err.Error() != want {
		t.Fatalf("retry a WAITING job: %v, want %q", err, want)
	}
	if j, err := svc.Get(ctx, again.ID); err != nil || j.Status != jobq.StateWaiting || j.RetryTimes != 0 {
		t.Fatalf("the refused retry changed the job: %+v, %v", j, err)
	}
	// ErrInvalidState without a job names both rules.
	if _, d := service.ErrorFor(service.ErrInvalidState); d.Message != "cancel applies to WAITING, SCHEDULED, BLOCKED, PARKED, HELD or RUNNING jobs, retry to FAILED or CANCELED jobs" {
		t.Fatalf("bare ErrInvalidState: %q", d.Message)
	}
}
