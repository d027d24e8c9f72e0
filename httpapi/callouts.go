package httpapi

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/callout"
	"github.com/jobq/jobq/service"
)

// Callouts is the call-out executor's face to the operations API
// (*callout.Executor implements it).
type Callouts interface {
	List() []callout.Binding
	Put(ctx context.Context, b callout.Binding) error
	Delete(jobType string) bool
}

var _ Callouts = (*callout.Executor)(nil)

// CalloutRequest is the body of PUT /v1/callouts/{job_type}.
type CalloutRequest struct {
	URL    string `json:"url"`
	Secret string `json:"secret"`
}

// routeCallouts serves the call-out bindings of this replica:
//
//	GET    /v1/callouts              200 {"callouts":[Binding…]}
//	PUT    /v1/callouts/{job_type}   200 Binding; body {"url": URL, "secret": NAME (default the job type)} · 400 naming the field and the rule
//	DELETE /v1/callouts/{job_type}   200 {"deleted": job_type} · 404
func (a *api) routeCallouts(mux *http.ServeMux, c Callouts) {
	mux.HandleFunc("GET /v1/callouts", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"callouts": c.List()})
	})
	mux.HandleFunc("PUT /v1/callouts/{job_type}", func(w http.ResponseWriter, r *http.Request) {
		body, err := readLimited(w, r, a.opts.MaxBodyBytes)
		if err != nil {
			if !errors.Is(err, errTooLarge) {
				a.fail(w, &service.ValidationError{Field: "body", Rule: "could not be read: " + err.Error()})
			}
			return
		}
		var req CalloutRequest
		if err := service.DecodeStrict(body, &req); err != nil {
			a.fail(w, err)
			return
		}
		t := r.PathValue("job_type")
		b := callout.Binding{JobType: t, URL: req.URL, Secret: cmp.Or(req.Secret, t)}
		if err := c.Put(r.Context(), b); err != nil {
			var ve *callout.ValidationError
			if errors.As(err, &ve) {
				err = &service.ValidationError{Field: ve.Field, Rule: ve.Rule}
			}
			a.fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, b)
	})
	mux.HandleFunc("DELETE /v1/callouts/{job_type}", func(w http.ResponseWriter, r *http.Request) {
		t := r.PathValue("job_type")
		if !c.Delete(t) {
			writeJSON(w, http.StatusNotFound, apitype.ErrorBody{Error: apitype.ErrorDetail{Code: "not_found", Field: "job_type",
				Message: "no callout binding for job type " + strconv.Quote(t)}})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"deleted": t})
	})
}
