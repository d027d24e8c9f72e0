package store_test

import (
	"context"
	"testing"

	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler/storetest"
)

// The MySQL adapter passes the store contract.
func TestStoreContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Backend {
		st := testdb.Store(t)
		return storetest.Backend{Store: st, Jobs: st, ExpireLease: func(ctx context.Context, id uint64) error {
			_, err := st.DB().ExecContext(ctx, `UPDATE job_queue SET lease_until = NOW(6) - INTERVAL 1 SECOND WHERE id = ? AND status = 'RUNNING'`, id)
			return err
		}}
	})
}
