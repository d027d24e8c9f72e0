package store_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
)

// A submit returns exactly the row a read-back gives, whether the server
// takes INSERT … RETURNING (one statement) or not (INSERT, then a read by
// id), and the idempotency rules hold on both paths.
func TestSubmitReturnsTheStoredRow(t *testing.T) {
	t.Parallel()
	for _, returning := range []bool{true, false} {
		t.Run(map[bool]string{true: "returning", false: "read-back"}[returning], func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := testdb.Store(t)
			if returning && !st.Server.InsertReturning {
				t.Skipf("%s has no INSERT … RETURNING", st.Server.Description)
			}
			st.Server.InsertReturning = returning
			now, err := st.DBNow(ctx)
			if err != nil {
				t.Fatal(err)
			}
			past, future := now.Add(-time.Second).Truncate(time.Microsecond), now.Add(time.Hour).Truncate(time.Microsecond)
			for _, p := range []jobq.SubmitParams{
				{JobKey: "plain", JobType: "noop", Params: `{}`, RequestHash: "h1", MaxRetry: 3},
				{JobKey: "all-fields", JobType: "sleep", Params: `{"ms":5,"s":"é\u00e9"}`, RequestHash: "h2", Priority: 7, MaxRetry: 0, TimeoutMs: 1500},
				{JobKey: "due", JobType: "noop", Params: `{}`, RequestHash: "h3", MaxRetry: 3, RunAt: &past},
				{JobKey: "future", JobType: "noop", Params: `{}`, RequestHash: "h4", MaxRetry: 3, RunAt: &future},
			} {
				job, created, err := st.JobSubmit(ctx, p)
				if err != nil || !created {
					t.Fatalf("submit %s: created=%v err=%v", p.JobKey, created, err)
				}
				got, err := st.JobGet(ctx, job.ID)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(job, got) {
					t.Fatalf("submit %s returned\n%+v\nthe row is\n%+v", p.JobKey, job, got)
				}
				wantStatus := jobq.StateWaiting
				if p.RunAt == &future {
					wantStatus = jobq.StateScheduled
				}
				if job.Status != wantStatus || job.Params == nil || string(job.Params) != p.Params || job.RequestHash != p.RequestHash ||
					job.Priority != p.Priority || job.MaxRetry != p.MaxRetry || job.TimeoutMs != p.TimeoutMs {
					t.Fatalf("submit %s returned %+v", p.JobKey, job)
				}
				if p.RunAt != nil && !job.RunAt.Equal(*p.RunAt) {
					t.Fatalf("submit %s: run_at %s, want %s", p.JobKey, job.RunAt, *p.RunAt)
				}
				again, created, err := st.JobSubmit(ctx, p)
				if err != nil || created || !reflect.DeepEqual(again, got) {
					t.Fatalf("same key, same request: created=%v err=%v job=%+v, want the existing job", created, err, again)
				}
				other := p
				other.RequestHash += "-other"
				conflict, created, err := st.JobSubmit(ctx, other)
				if !errors.Is(err, jobq.ErrKeyConflict) || created || conflict.ID != job.ID {
					t.Fatalf("same key, other request: created=%v err=%v id=%d, want ErrKeyConflict with job %d", created, err, conflict.ID, job.ID)
				}
			}
		})
	}
}
