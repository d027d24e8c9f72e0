package store

import (
	"context"
	"database/sql"
	"time"
)

// SetAfterClaimLock makes st call f inside each claim's transaction right
// after its locking read (JobClaimSkipLocked, JobClaimRemote).
func SetAfterClaimLock(st *Store, f func(ctx context.Context, tx *sql.Tx)) { st.afterClaimLock = f }

// SetClaimSlotWait makes st's claims wait up to d (whole seconds) for a
// claim slot instead of ClaimSlotWait.
func SetClaimSlotWait(st *Store, d time.Duration) { st.claimSlotWait = d }

// SetAfterSlotWait makes st call f in the MySQL dialect's slot wait between
// its wait statement and putting the session's lock wait timeout back.
func SetAfterSlotWait(st *Store, f func()) { st.afterSlotWait = f }

// SetBeforeSplitWrite makes st call f in completeSplit between its
// fence-state read and its writes (a run can turn stale in that window).
func SetBeforeSplitWrite(st *Store, f func()) { st.beforeSplitWrite = f }

// AdmitExactly is admitExactly in its own transaction.
func AdmitExactly(ctx context.Context, st *Store, ids []uint64) (ok bool, err error) {
	err = st.WithTx(ctx, func(tx *sql.Tx) error {
		ok, err = admitExactly(ctx, tx, ids)
		return err
	})
	return ok, err
}
