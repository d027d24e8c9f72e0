package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/store"
)

// pausedBacklog is how many due jobs of a paused type sit ahead of the one
// claimable job in TestClaimLocksSkipPausedBacklog.
const pausedBacklog = 3000

// A claim steps past a paused type's backlog without locking it: the rows
// the claim's transaction holds after its locking read are the claimed
// ones, plus a few, not one per paused job (each a row lock, with 200k
// paused jobs enough to fill the lock table).
func TestClaimLocksSkipPausedBacklog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, lane := range []int{0, 1} {
		t.Run(fmt.Sprintf("lane%d", lane), func(t *testing.T) {
			t.Parallel()
			st := testdb.Store(t)
			st.SetRemoteTypes([]string{"rpaused", "rlive"})
			paused, live := "paused", "live"
			if lane == 1 {
				paused, live = "rpaused", "rlive"
			}
			// The paused backlog, due and at a higher priority than the
			// live job, so idx_scan reads it first.
			if _, err := st.DB().ExecContext(ctx, `INSERT INTO job_queue (job_key, job_type, params, request_hash, status,
    priority, max_retry, timeout_ms, run_at, create_time, update_time, lane)
SELECT CONCAT('p', seq), ?, '{}', REPEAT('0', 64), 'WAITING', 5, 0, 1000, NOW(6) - INTERVAL 1 MINUTE, NOW(6), NOW(6), ?
FROM seq_1_to_3000`, paused, lane); err != nil {
				t.Fatal(err)
			}
			if _, _, err := st.JobSubmit(ctx, jobq.SubmitParams{JobKey: "live", JobType: live, Params: `{}`, RequestHash: "h"}); err != nil {
				t.Fatal(err)
			}
			if _, err := st.TypeSetPaused(ctx, paused, true); err != nil {
				t.Fatal(err)
			}
			var locked []int64
			store.SetAfterClaimLock(st, func(ctx context.Context, tx *sql.Tx) {
				// information_schema.innodb_trx is a cache InnoDB refreshes
				// at most every 100 ms, so this transaction may not be in it
				// yet: read until it is, with a deadline. Its count cannot
				// change meanwhile (the transaction waits on this hook).
				deadline := time.Now().Add(10 * time.Second)
				for {
					var n int64
					err := tx.QueryRowContext(ctx, `SELECT trx_rows_locked FROM information_schema.innodb_trx
WHERE trx_mysql_thread_id = CONNECTION_ID()`).Scan(&n)
					if err == nil {
						locked = append(locked, n)
						return
					}
					if !errors.Is(err, sql.ErrNoRows) || time.Now().After(deadline) {
						t.Errorf("reading the claim's row locks: %v", err)
						return
					}
				}
			})
			var got []jobq.ClaimedJob
			var err error
			if lane == 0 {
				got, err = st.JobClaimSkipLocked(ctx, jobq.ClaimParams{Owner: "r1", Limit: 10, Lease: time.Minute})
			} else {
				got, err = st.JobClaimRemote(ctx, jobq.RemoteClaimParams{Owner: "worker:w", Types: []string{paused, live}, Limit: 10, Lease: time.Minute, Nonce: []byte("n")})
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].JobKey != "live" {
				t.Fatalf("claimed %v, want only the live job", got)
			}
			if len(locked) != 1 || locked[0] > 1+5 {
				t.Fatalf("rows locked by the claim's locking read: %v, want at most %d (the claimed one + 5), not ~%d", locked, 1+5, pausedBacklog)
			}
			// Every requested type paused: nothing claimed, nothing locked.
			locked = nil
			if lane == 1 {
				got, err = st.JobClaimRemote(ctx, jobq.RemoteClaimParams{Owner: "worker:w", Types: []string{paused}, Limit: 10, Lease: time.Minute, Nonce: []byte("n")})
				if err != nil || len(got) != 0 || len(locked) != 0 {
					t.Fatalf("only paused types: claimed %v err %v, locking reads %v, want none", got, err, locked)
				}
			}
		})
	}
}
