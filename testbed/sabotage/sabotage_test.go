package sabotage_test

import (
	"context"
	"testing"

	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler/storetest"
	"github.com/jobq/jobq/testbed/sabotage"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// With no switch on the sabotage decorator passes the store contract: a
// testbed build without --sabotage runs the product's behaviour.
func TestStoreContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Backend {
		st := testdb.Store(t)
		return storetest.Backend{Store: sabotage.Wrap(st, st.DB(), sabotage.Switches{}), Jobs: st,
			ExpireLease: func(ctx context.Context, id uint64) error {
				_, err := st.DB().ExecContext(ctx, `UPDATE job_queue SET lease_until = NOW(6) - INTERVAL 1 SECOND WHERE id = ? AND status = 'RUNNING'`, id)
				return err
			}}
	})
}

// Parse reads --sabotage names and refuses unknown ones.
func TestParse(t *testing.T) {
	sw, err := sabotage.Parse([]string{sabotage.Fencing, sabotage.LeaseCancel})
	if err != nil || sw != (sabotage.Switches{NoFencing: true, NoLeaseCancel: true}) || sw.String() != "fencing,lease-cancel" {
		t.Fatalf("Parse = %+v (%q), %v", sw, sw.String(), err)
	}
	if _, err := sabotage.Parse([]string{"nope"}); err == nil {
		t.Fatal("Parse accepted an unknown switch")
	}
	if sw, err := sabotage.Parse(nil); err != nil || sw.Any() {
		t.Fatalf("Parse(nil) = %+v, %v; want no switch", sw, err)
	}
}
