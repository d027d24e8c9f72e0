package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
)

// A remote worker's renewal is fenced by its attempt: after its run was
// rescued and the job fetched again (attempt 2), a heartbeat of attempt 1
// renews nothing — the answer says so, and the lease of the run holding the
// job now is where that run's claim put it. The run holding it renews its
// own lease.
func TestRemoteRenewalFencedByAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testdb.Store(t)
	st.SetRemoteTypes([]string{"resize"})
	id := submitJob(t, st, "remote-renew", "resize", 3)
	fetch := func(worker string) jobq.ClaimedJob {
		t.Helper()
		cs, err := st.JobClaimRemote(ctx, jobq.RemoteClaimParams{Owner: jobq.WorkerOwnerPrefix + worker, Types: []string{"resize"},
			Limit: 1, Lease: 30 * time.Second, Nonce: []byte("0123456789abcdef")})
		if err != nil || len(cs) != 1 || cs[0].ID != id {
			t.Fatalf("fetch by %s: %+v, %v; want job %d", worker, cs, err, id)
		}
		return cs[0]
	}
	first := fetch("w1")
	expireLease(t, st, id)
	rescue(t, st, first.Fence())
	second := fetch("w2")
	if second.Attempt != first.Attempt+1 {
		t.Fatalf("second fetch took attempt %d, want %d", second.Attempt, first.Attempt+1)
	}
	before := jobRow(t, st, id)

	got, err := st.LeaseRenewFenced(ctx, []jobq.Fence{first.Fence()}, time.Hour)
	if err != nil || len(got) != 1 {
		t.Fatalf("renew attempt %d: %+v, %v", first.Attempt, got, err)
	}
	after := jobRow(t, st, id)
	if got[0].Renewed || !after.LeaseUntil.Equal(*before.LeaseUntil) {
		t.Fatalf("a stale attempt's renewal moved the lease of the run holding the job now: answer %+v; "+
			"attempt %d's lease_until %v → %v, want unchanged", got[0], second.Attempt, before.LeaseUntil, after.LeaseUntil)
	}

	got, err = st.LeaseRenewFenced(ctx, []jobq.Fence{second.Fence()}, time.Hour)
	if err != nil || len(got) != 1 || !got[0].Renewed {
		t.Fatalf("renew attempt %d: %+v, %v; want renewed", second.Attempt, got, err)
	}
	if renewed := jobRow(t, st, id); !renewed.LeaseUntil.After(before.LeaseUntil.Add(time.Minute)) {
		t.Fatalf("attempt %d's own renewal left lease_until at %v (was %v), want about an hour ahead", second.Attempt, renewed.LeaseUntil, before.LeaseUntil)
	}
}
