package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
)

// StateOp is an operation whose effect depends on the job's status.
type StateOp string

// The state operations and the statuses each applies to (stateRules).
const (
	OpCancel StateOp = "cancel"
	OpRetry  StateOp = "retry"
)

// stateRules are the statuses each state operation applies to: the one
// place the API's cancel and retry rules are spelled. The store enforces
// them in SQL (store.JobCancel, store.JobRetry); these name them.
var stateRules = map[StateOp][]jobq.JobState{
	OpCancel: {jobq.StateWaiting, jobq.StateScheduled, jobq.StateBlocked, jobq.StateParked, jobq.StateHeld, jobq.StateRunning},
	OpRetry:  {jobq.StateFailed, jobq.StateCanceled},
}

// Applies returns the statuses op applies to, e.g. [WAITING SCHEDULED
// BLOCKED PARKED HELD RUNNING] for OpCancel.
func (op StateOp) Applies() []jobq.JobState { return stateRules[op] }

// StateError is returned by Cancel and Retry when the job's status does not
// allow the operation (a cancel of a finished job, a retry of a running
// one). It wraps ErrInvalidState; transports map it to HTTP 409
// failed_precondition and gRPC FailedPrecondition with its message.
type StateError struct {
	// JobID is the job asked for.
	JobID uint64
	// Status is the job's status when the operation was refused ("" when
	// the store did not say).
	Status jobq.JobState
	// Op is the refused operation.
	Op StateOp
}

// Error says the job's status and the rule, e.g. "job 7 is SUCCESS: cancel
// applies to WAITING, SCHEDULED, BLOCKED, PARKED, HELD or RUNNING jobs".
func (e *StateError) Error() string {
	return fmt.Sprintf("job %d is %s: %s", e.JobID, cmp.Or(string(e.Status), "in another state"), e.Op.Rule())
}

// Unwrap makes errors.Is(err, ErrInvalidState) hold.
func (e *StateError) Unwrap() error { return ErrInvalidState }

// Rule says which statuses op applies to, e.g. "cancel applies to WAITING,
// SCHEDULED, BLOCKED, PARKED, HELD or RUNNING jobs".
func (op StateOp) Rule() string {
	states := op.Applies()
	names := make([]string, len(states))
	for i, st := range states {
		names[i] = string(st)
	}
	list := names[0]
	if n := len(names); n > 1 {
		list = strings.Join(names[:n-1], ", ") + " or " + names[n-1]
	}
	return string(op) + " applies to " + list + " jobs"
}

// stateError turns the store's ErrInvalidState for job id into a
// *StateError naming the job's status; other errors pass unchanged.
func stateError(op StateOp, id uint64, job jobq.Job, err error) error {
	if errors.Is(err, ErrInvalidState) {
		return &StateError{JobID: id, Status: job.Status, Op: op}
	}
	return err
}

// StatusClientClosedRequest is the status ErrorFor gives a request whose
// client went away before its answer (its context was cancelled): 499, as
// nginx logs it. Nobody reads the answer; it keeps the access metrics
// apart from server faults.
const StatusClientClosedRequest = 499

// ErrorFor maps an error of this package to the API's HTTP status and error
// detail, for every transport that answers in the HTTP API's terms (the
// HTTP API and the web console): *ValidationError 400 invalid_argument
// naming the field, ErrNotFound 404, ErrInvalidState 409
// failed_precondition (a *StateError's message names the job's status and
// the rule), jobq.ErrUnavailable 503 (read-only, a Galera node not ready, a
// lost connection, or a conflict that outlived the retries: the client may
// retry, never a 500), context.Canceled (the client went away)
// StatusClientClosedRequest, anything else 500 with a generic message (the
// error itself is for the log). The worker protocol's refusals come first:
// *Forbidden 403 forbidden, *Conflict 409 (stale or conflict), *TooLarge 413
// too_large, each naming its field.
func ErrorFor(err error) (int, apitype.ErrorDetail) {
	var ve *ValidationError
	var se *StateError
	var fb *Forbidden
	var cf *Conflict
	var tl *TooLarge
	switch {
	case errors.As(err, &fb):
		return http.StatusForbidden, apitype.ErrorDetail{Code: "forbidden", Field: fb.Field, Message: fb.Error()}
	case errors.As(err, &cf):
		return http.StatusConflict, apitype.ErrorDetail{Code: cf.Code, Field: cf.Field, Message: cf.Error()}
	case errors.As(err, &tl):
		return http.StatusRequestEntityTooLarge, apitype.ErrorDetail{Code: "too_large", Field: tl.Field, Message: tl.Error()}
	case errors.As(err, &ve):
		return http.StatusBadRequest, apitype.ErrorDetail{Code: "invalid_argument", Field: ve.Field, Message: ve.Error()}
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound, apitype.ErrorDetail{Code: "not_found", Message: "job not found"}
	case errors.As(err, &se):
		return http.StatusConflict, apitype.ErrorDetail{Code: "failed_precondition", Field: "status", Message: se.Error()}
	case errors.Is(err, ErrInvalidState):
		return http.StatusConflict, apitype.ErrorDetail{Code: "failed_precondition", Field: "status",
			Message: OpCancel.Rule() + ", retry" + strings.TrimPrefix(OpRetry.Rule(), "retry applies")}
	case errors.Is(err, jobq.ErrUnavailable):
		return http.StatusServiceUnavailable, apitype.ErrorDetail{Code: "unavailable", Message: "database unavailable, retry later"}
	case errors.Is(err, context.Canceled):
		return StatusClientClosedRequest, apitype.ErrorDetail{Code: "canceled", Message: "the client closed the request"}
	default:
		return http.StatusInternalServerError, apitype.ErrorDetail{Code: "internal", Message: "internal error"}
	}
}
