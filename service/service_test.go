package service_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/service"
	"github.com/jobq/jobq/store"
)

func TestMain(m *testing.M) { testdb.Main(m) }

type submitResult struct {
	job     jobq.Job
	created bool
	err     error
}

// submitConcurrently runs the n requests at once (released together) and
// returns their results in request order.
func submitConcurrently(svc *service.Service, reqs []apitype.SubmitRequest) []submitResult {
	out := make([]submitResult, len(reqs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i].job, out[i].created, out[i].err = svc.Submit(context.Background(), req)
		}()
	}
	close(start)
	wg.Wait()
	return out
}

func rows(t *testing.T, st *store.Store, jobKey string) int64 {
	t.Helper()
	var n int64
	if err := st.DB().QueryRow("SELECT COUNT(*) FROM job_queue WHERE job_key = ?", jobKey).Scan(&n); err != nil {
		t.Fatalf("count rows: %v", err)
	}
	return n
}

func known(typ string) bool { return typ == "noop" }

// Ten concurrent submits of one job_key with the same body make exactly one
// row, and every caller gets its id; exactly one of them created it.
func TestConcurrentSubmitSameKeyOneRow(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	svc := service.New(service.Options{Store: st, KnownTypeFunc: known})
	reqs := make([]apitype.SubmitRequest, 10)
	for i := range reqs {
		// The same request, with params spelled differently (key order and
		// whitespace do not make a different body).
		params := `{"a":1,"b":[true,null]}`
		if i%2 == 1 {
			params = `{ "b" : [true, null], "a" : 1 }`
		}
		reqs[i] = apitype.SubmitRequest{JobKey: "same", JobType: "noop", Params: []byte(params)}
	}
	res := submitConcurrently(svc, reqs)

	created := 0
	for i, r := range res {
		if r.err != nil {
			t.Fatalf("submit %d: %v", i, r.err)
		}
		if r.job.ID != res[0].job.ID {
			t.Fatalf("submit %d got id %d, submit 0 got %d; want the same job", i, r.job.ID, res[0].job.ID)
		}
		if r.created {
			created++
		}
	}
	if created != 1 {
		t.Fatalf("%d submits reported created, want exactly 1", created)
	}
	if n := rows(t, st, "same"); n != 1 {
		t.Fatalf("job_queue rows for the key = %d, want 1", n)
	}
	// The row holds the winner's params, compacted as sent.
	j := res[0].job
	p := string(j.Params)
	if j.Status != jobq.StateWaiting || j.JobType != "noop" || j.MaxRetry != service.MaxRetryDefault ||
		(p != `{"a":1,"b":[true,null]}` && p != `{"b":[true,null],"a":1}`) {
		t.Fatalf("job = status %s type %s params %s max_retry %d, want WAITING noop {\"a\":1,\"b\":[true,null]} (either key order) %d",
			j.Status, j.JobType, p, j.MaxRetry, service.MaxRetryDefault)
	}

	// A different body under the same key is a conflict and writes nothing.
	prio := 5
	for name, req := range map[string]apitype.SubmitRequest{
		"different params":   {JobKey: "same", JobType: "noop", Params: []byte(`{"a":2,"b":[true,null]}`)},
		"different priority": {JobKey: "same", JobType: "noop", Params: []byte(`{"a":1,"b":[true,null]}`), Priority: &prio},
	} {
		got, created, err := svc.Submit(context.Background(), req)
		if !errors.Is(err, service.ErrKeyConflict) || created {
			t.Fatalf("%s: err=%v created=%v, want ErrKeyConflict", name, err, created)
		}
		if got.ID != j.ID {
			t.Fatalf("%s: conflict names job %d, want %d", name, got.ID, j.ID)
		}
	}
	if n := rows(t, st, "same"); n != 1 {
		t.Fatalf("job_queue rows after conflicts = %d, want 1", n)
	}
}

// Ten concurrent submits of one job_key with ten different bodies: one wins,
// nine get ErrKeyConflict naming the winner, and there is one row.
func TestConcurrentSubmitDifferentBodiesConflict(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	svc := service.New(service.Options{Store: st, KnownTypeFunc: known})
	reqs := make([]apitype.SubmitRequest, 10)
	for i := range reqs {
		reqs[i] = apitype.SubmitRequest{JobKey: "contested", JobType: "noop", Params: []byte(fmt.Sprintf(`{"n":%d}`, i))}
	}
	res := submitConcurrently(svc, reqs)
	winner := -1
	for i, r := range res {
		switch {
		case r.err == nil && r.created:
			if winner >= 0 {
				t.Fatalf("submits %d and %d both created the job", winner, i)
			}
			winner = i
		case errors.Is(r.err, service.ErrKeyConflict):
		default:
			t.Fatalf("submit %d: created=%v err=%v, want created or ErrKeyConflict", i, r.created, r.err)
		}
	}
	if winner < 0 {
		t.Fatalf("no submit created the job")
	}
	for i, r := range res {
		if r.job.ID != res[winner].job.ID {
			t.Fatalf("submit %d names job %d, want the winner %d", i, r.job.ID, res[winner].job.ID)
		}
	}
	if n := rows(t, st, "contested"); n != 1 {
		t.Fatalf("job_queue rows = %d, want 1", n)
	}
	if got, want := string(res[winner].job.Params), fmt.Sprintf(`{"n":%d}`, winner); got != want {
		t.Fatalf("stored params %s, want the winner's %s", got, want)
	}
}
