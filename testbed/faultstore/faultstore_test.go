package faultstore_test

import (
	"context"
	"testing"

	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler/storetest"
	"github.com/jobq/jobq/testbed/faultstore"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// faultstore with no hook passes the store contract: a test that injects
// no fault runs on the store's own behaviour.
func TestStoreContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Backend {
		st := testdb.Store(t)
		return storetest.Backend{Store: faultstore.Wrap(st), Jobs: st, ExpireLease: func(ctx context.Context, id uint64) error {
			_, err := st.DB().ExecContext(ctx, `UPDATE job_queue SET lease_until = NOW(6) - INTERVAL 1 SECOND WHERE id = ? AND status = 'RUNNING'`, id)
			return err
		}}
	})
}
