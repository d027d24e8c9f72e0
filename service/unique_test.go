package service_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/service"
)

// Uniqueness windows are validated at the edge: a bad value names its
// field, and a workflow's jobs refuse them.
func TestValidateUniquenessWindow(t *testing.T) {
	s := service.New(service.Options{})
	ms := func(v int64) *int64 { return &v }
	for _, tc := range []struct {
		req   apitype.SubmitRequest
		field string
	}{
		{apitype.SubmitRequest{JobKey: "k", JobType: "noop", UniqueForMs: ms(0)}, "unique_for_ms"},
		{apitype.SubmitRequest{JobKey: "k", JobType: "noop", UniqueForMs: ms(service.MaxUniqueForMs + 1)}, "unique_for_ms"},
		{apitype.SubmitRequest{JobKey: "k", JobType: "noop", UniqueWhile: "done"}, "unique_while"},
		// A keyed job's job_key is held for good: no window beside a key.
		{apitype.SubmitRequest{JobKey: "k", JobType: "noop", UniqueForMs: ms(1000), ConcurrencyKey: "device-1"}, "concurrency_key"},
		{apitype.SubmitRequest{JobKey: "k", JobType: "noop", UniqueWhile: "active", ConcurrencyKey: "device-1"}, "concurrency_key"},
	} {
		_, err := s.ValidateSubmit(tc.req)
		var ve *service.ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("%+v: %v, want a ValidationError on %s", tc.req, err, tc.field)
		}
	}
	p, err := s.ValidateSubmit(apitype.SubmitRequest{JobKey: "k", JobType: "noop", UniqueForMs: ms(1000), UniqueWhile: "active"})
	if err != nil || p.UniqueForMs != 1000 || !p.UniqueWhileActive {
		t.Fatalf("valid window: %+v, %v", p, err)
	}
	plain, _ := s.ValidateSubmit(apitype.SubmitRequest{JobKey: "k", JobType: "noop"})
	if plain.RequestHash != p.RequestHash {
		t.Fatalf("the window changed the request hash")
	}
	req, err := service.DecodeSubmit([]byte(`{"job_key":"k","job_type":"noop","unique_for_ms":5000,"unique_while":"active"}`))
	if err != nil || req.UniqueForMs == nil || *req.UniqueForMs != 5000 || req.UniqueWhile != "active" {
		t.Fatalf("decode: %+v, %v", req, err)
	}
	limit := 2
	// A workflow's job refuses a window and a key, naming the field it has.
	for _, tc := range []struct {
		job   apitype.SubmitRequest
		field string
	}{
		{apitype.SubmitRequest{JobKey: "a", JobType: "noop", UniqueWhile: "active"}, "jobs[0].unique_while"},
		{apitype.SubmitRequest{JobKey: "a", JobType: "noop", UniqueForMs: ms(1000)}, "jobs[0].unique_for_ms"},
		{apitype.SubmitRequest{JobKey: "a", JobType: "noop", ConcurrencyKey: "device-1"}, "jobs[0].concurrency_key"},
		{apitype.SubmitRequest{JobKey: "a", JobType: "noop", ConcurrencyLimit: &limit}, "jobs[0].concurrency_limit"},
	} {
		_, err = s.ValidateWorkflow(apitype.WorkflowSubmitRequest{WorkflowKey: "w", Jobs: []apitype.WorkflowJob{{SubmitRequest: tc.job}}})
		var ve *service.ValidationError
		if !errors.As(err, &ve) || !strings.HasSuffix(ve.Field, tc.field) {
			t.Errorf("workflow job %+v: %v, want a ValidationError on %s", tc.job, err, tc.field)
		}
	}
}
