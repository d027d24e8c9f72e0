package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/service"
)

// Unpaired surrogate escapes all decode to U+FFFD, yet they are different
// requests: re-submitting a job_key with another one is a conflict, while the
// same escapes (in any key order) or a valid pair spelled as an escape or as
// the character itself are the same request.
func TestIdempotencyTellsLoneSurrogatesApart(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	svc := service.New(service.Options{Store: st})
	ctx := context.Background()
	submit := func(key, params string) (uint64, bool, error) {
		job, created, err := svc.Submit(ctx, apitype.SubmitRequest{JobKey: key, JobType: "noop", Params: json.RawMessage(params)})
		return job.ID, created, err
	}
	id, created, err := submit("sur", `{"s":"\ud800","t":1}`)
	if err != nil || !created {
		t.Fatalf("first submit: created=%v err=%v", created, err)
	}
	for _, other := range []string{`{"s":"\udfff","t":1}`, `{"s":"\ufffd","t":1}`, `{"s":"\ud800\ud800","t":1}`} {
		if _, _, err := submit("sur", other); !errors.Is(err, service.ErrKeyConflict) {
			t.Fatalf("resubmit with %s: err = %v, want ErrKeyConflict", other, err)
		}
	}
	got, created, err := submit("sur", `{ "t": 1, "s": "\uD800" }`)
	if err != nil || created || got != id {
		t.Fatalf("same lone surrogate, other spelling: id=%d created=%v err=%v, want %d false nil", got, created, err, id)
	}
	id2, _, err := submit("pair", `{"e":"\ud83d\ude00"}`)
	if err != nil {
		t.Fatal(err)
	}
	if got, created, err := submit("pair", `{"e":"😀"}`); err != nil || created || got != id2 {
		t.Fatalf("valid pair as the character: id=%d created=%v err=%v, want %d false nil", got, created, err, id2)
	}
	var n int
	if err := st.DB().QueryRow("SELECT COUNT(*) FROM job_queue").Scan(&n); err != nil || n != 2 {
		t.Fatalf("rows = %d (%v), want 2", n, err)
	}
}
