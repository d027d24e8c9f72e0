package scheduler_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/scheduler"
)

type oldTxHandler struct{}

func (oldTxHandler) Work(context.Context, *scheduler.Job) error { return nil }

// WorkTx has the signature TxHandler had before it took a jobq.Tx.
func (oldTxHandler) WorkTx(context.Context, *sql.Tx, *scheduler.Job) error { return nil }

type txHandler struct{ oldTxHandler }

func (txHandler) WorkTx(context.Context, jobq.Tx, *scheduler.Job) error { return nil }

// A handler whose WorkTx does not implement TxHandler is refused at
// Register instead of silently losing its transactional completion.
func TestRegisterRefusesAWorkTxThatIsNotTxHandler(t *testing.T) {
	reg := scheduler.NewRegistry()
	reg.Register("tx", txHandler{}) // the current signature: accepted
	defer func() {
		v := recover()
		if msg, _ := v.(string); !strings.Contains(msg, "does not implement TxHandler") {
			t.Fatalf("Register of an old WorkTx: recovered %v, want a panic naming TxHandler", v)
		}
		if _, ok := reg.Lookup("old"); ok {
			t.Fatal("the refused handler was registered")
		}
	}()
	reg.Register("old", oldTxHandler{})
}
