package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler/storetest"
	"github.com/jobq/jobq/store"
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

// The MySQL statements pass the store contract too: the store opened in
// the forced MySQL dialect (no INSERT … RETURNING, no
// idle_transaction_timeout) on whatever server the tests run on.
func TestStoreContractMySQLDialect(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Backend {
		st, err := store.Open(context.Background(), testdb.DSN(t), store.PoolConfig{MaxOpen: 40, IdleTxTimeout: time.Second, ForceMySQLDialect: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		if st.Server.InsertReturning || st.Server.MariaDB || st.IdleTxTimeout != 0 {
			t.Fatalf("forced MySQL dialect: %+v, idle tx timeout %v", st.Server, st.IdleTxTimeout)
		}
		return storetest.Backend{Store: st, Jobs: st, ExpireLease: func(ctx context.Context, id uint64) error {
			_, err := st.DB().ExecContext(ctx, `UPDATE job_queue SET lease_until = NOW(6) - INTERVAL 1 SECOND WHERE id = ? AND status = 'RUNNING'`, id)
			return err
		}}
	})
}
