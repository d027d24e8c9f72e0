package sabotage

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/scheduler"
)

// WrapHandlers replaces every handler in reg by one whose context ignores
// the loss of the run's lease (lease-cancel): a timeout, a cancel request
// or a shutdown still cancel it, a lost lease does not, so the handler
// works on after another replica took the job. Call it after every job
// type is registered.
func WrapHandlers(reg *scheduler.Registry) {
	for _, t := range reg.Types() {
		h, _ := reg.Lookup(t)
		reg.Register(t, leaseDeaf(h))
	}
}

// leaseDeaf wraps h, keeping it a TxHandler and a ParamsValidator when it
// is one.
func leaseDeaf(h scheduler.Handler) scheduler.Handler {
	d := deaf{h}
	if txh, ok := h.(scheduler.TxHandler); ok {
		return deafTx{d, txh}
	}
	return d
}

type deaf struct{ h scheduler.Handler }

// Work runs the handler with a context cancelled as ctx is, except when
// ctx's cause is scheduler.ErrLeaseLost.
func (d deaf) Work(ctx context.Context, job *scheduler.Job) error {
	inner, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	stop := context.AfterFunc(ctx, func() {
		if cause := context.Cause(ctx); !errors.Is(cause, scheduler.ErrLeaseLost) {
			cancel(cause)
		}
	})
	defer stop()
	return d.h.Work(inner, job)
}

// ValidateParams checks params as the wrapped handler does (all valid when
// it does not check).
func (d deaf) ValidateParams(params json.RawMessage) (field, rule string) {
	if v, ok := d.h.(scheduler.ParamsValidator); ok {
		return v.ValidateParams(params)
	}
	return "", ""
}

type deafTx struct {
	deaf
	tx scheduler.TxHandler
}

// WorkTx runs the wrapped handler's WorkTx.
func (d deafTx) WorkTx(ctx context.Context, tx jobq.Tx, job *scheduler.Job) error {
	return d.tx.WorkTx(ctx, tx, job)
}
