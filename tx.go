package jobq

import (
	"context"
	"database/sql"
)

// Tx is the transaction a transactional completion hands to a handler's
// own SQL (scheduler.TxHandler): the statements it runs commit exactly
// when the run's fenced completion does. *sql.Tx satisfies it; a handler
// that needs more of *sql.Tx may type-assert, on a store built on
// database/sql.
type Tx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

var _ Tx = (*sql.Tx)(nil)
