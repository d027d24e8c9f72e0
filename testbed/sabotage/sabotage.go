// Package sabotage is the testbed build's way to break jobq's guarantees on
// purpose, so the chaos checker can prove it catches their absence
// (`jobq serve --sabotage …`, `make chaos-sabotage`). It lives outside the
// product: the product's types, config, SQL and store carry no sabotage
// field, statement or branch. A sabotaged replica runs the product's
// scheduler over a decorator of its store (Store) and, for lease-cancel,
// handlers that ignore the loss of their lease (WrapHandlers).
//
// Each switch removes one guarantee:
//
//   - fencing: a success completion by id alone, without "AND attempt=?"
//     (the classic completion; its own statements, unfencedStatements).
//   - cas-guard: the cas claim on status alone, without "AND attempt=?"
//     (the classic CAS and its ABA race; casUnguarded).
//   - rescuer: no expired lease is ever rescued (the rescue pass finds none).
//   - deadlock-retry: no database error is retried (every error the
//     scheduler sees is marked permanent).
//   - lease-cancel: a handler keeps running after its run lost its lease.
//   - outcome-retry: an outcome write is tried once (its errors are marked
//     permanent).
//   - unblock-outside-tx: a workflow parent's children are unblocked after
//     its completion's transaction, in statements of their own and unfenced
//     (unblockOutsideTx), not in it.
//   - rate-window: a rate-limited job type's window is counted per replica,
//     from the starts this replica made (in memory), not cluster-wide from
//     rate_start under the type's row lock: each replica takes the whole
//     limit — of the type, or of each rate key under a per-key limit
//     (rateWindowLocal).
//   - key-early-free: a claim of a keyed job admits its key's next parked
//     job at once, unlocked and uncounted (keyEarlyFree): the slot is freed
//     while the run still holds it.
//
// With no switch on, Store passes every call through unchanged; the store
// conformance suite (scheduler/storetest) runs against it so.
package sabotage

import (
	"fmt"
	"slices"
	"strings"
)

// Switch names, as --sabotage spells them.
const (
	Fencing       = "fencing"
	CASGuard      = "cas-guard"
	Rescuer       = "rescuer"
	DeadlockRetry = "deadlock-retry"
	LeaseCancel   = "lease-cancel"
	OutcomeRetry  = "outcome-retry"
	UnblockOutTx  = "unblock-outside-tx"
	RateWindow    = "rate-window"
	KeyEarlyFree  = "key-early-free"
)

// Names lists every switch, in the order --help shows them.
var Names = []string{Fencing, CASGuard, Rescuer, DeadlockRetry, LeaseCancel, OutcomeRetry, UnblockOutTx, RateWindow, KeyEarlyFree}

// Switches says which guarantees a replica breaks.
type Switches struct {
	NoFencing        bool // success completion without "AND attempt=?"
	NoCASGuard       bool // cas claim without "AND attempt=?" (ABA)
	NoRescuer        bool // never rescue expired leases
	NoDeadlockRetry  bool // do not retry 1213/1205/lost connections
	NoLeaseCancel    bool // keep handlers running after their lease is lost
	NoOutcomeRetry   bool // write an outcome once: no retry of transient errors (read-only, lost connection)
	UnblockOutsideTx bool // unblock workflow children outside the parent's completion transaction
	RatePerReplica   bool // count a rate limit's window per replica, not across replicas
	KeyEarlyFree     bool // free a concurrency key's slot at the claim, not at the job's end
}

// Parse turns --sabotage names into Switches; an unknown name is an error
// that lists the known ones.
func Parse(names []string) (Switches, error) {
	var s Switches
	for _, n := range names {
		switch n {
		case Fencing:
			s.NoFencing = true
		case CASGuard:
			s.NoCASGuard = true
		case Rescuer:
			s.NoRescuer = true
		case DeadlockRetry:
			s.NoDeadlockRetry = true
		case LeaseCancel:
			s.NoLeaseCancel = true
		case OutcomeRetry:
			s.NoOutcomeRetry = true
		case UnblockOutTx:
			s.UnblockOutsideTx = true
		case RateWindow:
			s.RatePerReplica = true
		case KeyEarlyFree:
			s.KeyEarlyFree = true
		default:
			return Switches{}, fmt.Errorf("--sabotage: unknown switch %q (want one of %s)", n, strings.Join(Names, ", "))
		}
	}
	return s, nil
}

// Any reports whether any switch is on.
func (s Switches) Any() bool { return s != Switches{} }

// String lists the switches that are on, comma-separated, as --sabotage
// spells them.
func (s Switches) String() string {
	on := map[string]bool{Fencing: s.NoFencing, CASGuard: s.NoCASGuard, Rescuer: s.NoRescuer,
		DeadlockRetry: s.NoDeadlockRetry, LeaseCancel: s.NoLeaseCancel, OutcomeRetry: s.NoOutcomeRetry, UnblockOutTx: s.UnblockOutsideTx,
		RateWindow: s.RatePerReplica, KeyEarlyFree: s.KeyEarlyFree}
	return strings.Join(slices.DeleteFunc(slices.Clone(Names), func(n string) bool { return !on[n] }), ",")
}
