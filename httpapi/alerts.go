package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/alert"
	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/service"
)

// Alerts is the alert rules' face to the operations API (*alert.Service
// implements it).
type Alerts interface {
	Create(ctx context.Context, req apitype.AlertRuleRequest) (apitype.AlertRule, error)
	List(ctx context.Context) ([]apitype.AlertRule, error)
	Get(ctx context.Context, id uint64) (apitype.AlertRule, error)
	Delete(ctx context.Context, id uint64) error
	Deliveries(ctx context.Context, id uint64, limit int) ([]apitype.AlertDelivery, error)
}

var _ Alerts = (*alert.Service)(nil)

// routeAlerts serves the alert rules (cluster-wide: they are rows):
//
//	GET    /v1/alerts                    200 {"alerts":[AlertRule…]}
//	POST   /v1/alerts                    201 AlertRule; body AlertRuleRequest · 400 naming the field and the rule · 409 name taken
//	GET    /v1/alerts/{id}               200 AlertRule · 404
//	DELETE /v1/alerts/{id}               200 {"deleted": id} · 404
//	GET    /v1/alerts/{id}/deliveries    200 {"deliveries":[AlertDelivery…]} newest first (?limit=, 1-1000, default 100; id 0: every rule)
func (a *api) routeAlerts(mux *http.ServeMux, al Alerts) {
	mux.HandleFunc("GET /v1/alerts", func(w http.ResponseWriter, r *http.Request) {
		rs, err := al.List(r.Context())
		if err != nil {
			a.fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"alerts": rs})
	})
	mux.HandleFunc("POST /v1/alerts", func(w http.ResponseWriter, r *http.Request) {
		body, err := readLimited(w, r, a.opts.MaxBodyBytes)
		if err != nil {
			if !errors.Is(err, errTooLarge) {
				a.fail(w, &service.ValidationError{Field: "body", Rule: "could not be read: " + err.Error()})
			}
			return
		}
		var req apitype.AlertRuleRequest
		if err := service.DecodeStrict(body, &req); err != nil {
			a.fail(w, err)
			return
		}
		rule, err := al.Create(r.Context(), req)
		a.alertAnswer(w, http.StatusCreated, rule, err)
	})
	mux.HandleFunc("GET /v1/alerts/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, ok := a.alertID(w, r)
		if !ok {
			return
		}
		rule, err := al.Get(r.Context(), id)
		a.alertAnswer(w, http.StatusOK, rule, err)
	})
	mux.HandleFunc("DELETE /v1/alerts/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, ok := a.alertID(w, r)
		if !ok {
			return
		}
		a.alertAnswer(w, http.StatusOK, map[string]uint64{"deleted": id}, al.Delete(r.Context(), id))
	})
	mux.HandleFunc("GET /v1/alerts/{id}/deliveries", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
		if err != nil {
			a.fail(w, &service.ValidationError{Field: "id", Rule: "must be an alert rule id (a positive integer), or 0 for every rule"})
			return
		}
		limit := 0
		if v := r.URL.Query().Get("limit"); v != "" {
			if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 1000 {
				a.fail(w, &service.ValidationError{Field: "limit", Rule: "must be 1 to 1000"})
				return
			}
		}
		ds, err := al.Deliveries(r.Context(), id, limit)
		if err != nil {
			a.fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"deliveries": ds})
	})
}

func (a *api) alertID(w http.ResponseWriter, r *http.Request) (uint64, bool) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || id == 0 {
		a.fail(w, &service.ValidationError{Field: "id", Rule: "must be an alert rule id (a positive integer)"})
		return 0, false
	}
	return id, true
}

// alertAnswer writes v with status, or err: a *alert.ValidationError 400
// naming the field, not found 404, a taken name 409.
func (a *api) alertAnswer(w http.ResponseWriter, status int, v any, err error) {
	var ve *alert.ValidationError
	switch {
	case err == nil:
		writeJSON(w, status, v)
	case errors.As(err, &ve):
		a.fail(w, &service.ValidationError{Field: ve.Field, Rule: ve.Rule})
	case errors.Is(err, jobq.ErrNotFound):
		writeJSON(w, http.StatusNotFound, apitype.ErrorBody{Error: apitype.ErrorDetail{Code: "not_found", Field: "id", Message: "no such alert rule"}})
	case errors.Is(err, jobq.ErrKeyConflict):
		writeJSON(w, http.StatusConflict, apitype.ErrorBody{Error: apitype.ErrorDetail{Code: "already_exists", Field: "name", Message: "name: an alert rule of that name exists"}})
	default:
		a.fail(w, err)
	}
}
