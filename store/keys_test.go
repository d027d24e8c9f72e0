package store_test

import (
	"context"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/store"
)

// The admission's fast path admits its candidates only all together: when
// one of them is no longer PARKED (a peer admitted it after the stale read
// that chose it), nothing is written and the caller takes the exact path.
func TestAdmitExactlyAllOrNothing(t *testing.T) {
	t.Parallel()
	st := testdb.Store(t)
	ctx := context.Background()
	var ids []uint64
	for _, k := range []string{"a", "b", "c"} {
		j, _, err := st.JobSubmit(ctx, jobq.SubmitParams{JobKey: k, JobType: "noop", Params: "{}", RequestHash: k, ConcurrencyKey: "dev"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	// a is admitted (WAITING), b and c are parked.
	if ok, err := store.AdmitExactly(ctx, st, ids); err != nil || ok {
		t.Fatalf("admit of a WAITING and two PARKED jobs: ok=%v err=%v, want false", ok, err)
	}
	for _, id := range ids[1:] {
		if j, _ := st.JobGet(ctx, id); j.Status != jobq.StateParked {
			t.Fatalf("job %d is %s after the refused admit, want PARKED (rolled back)", id, j.Status)
		}
	}
	if ok, err := store.AdmitExactly(ctx, st, ids[1:]); err != nil || !ok {
		t.Fatalf("admit of two PARKED jobs: ok=%v err=%v, want true", ok, err)
	}
}
