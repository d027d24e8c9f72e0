// Package faultstore wraps a scheduler.Store with named pause points and
// injected errors, so tests (and the chaos testbed) can force an exact
// interleaving — "B has read the job but not yet CAS'd it" — without sleeps.
//
// Every method has two points, "<Method>.before" (before the inner call; a
// hook error is returned without calling the inner store) and
// "<Method>.after" (after a successful inner call; a hook error replaces the
// result, as if the commit's acknowledgement was lost). A hook's error is
// returned marked by the MySQL adapter's classification (store.Mark), as
// the adapter returns the driver's errors, so an injected deadlock or lost
// connection is retried like a real one.
package faultstore

import (
	"context"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/store"
)

// Named points, one pair per scheduler.Store method.
const (
	ScanBefore            = "JobScanAvailable.before"
	ScanAfter             = "JobScanAvailable.after" // the cas claim has read its candidates
	ClaimSkipLocked       = "JobClaimSkipLocked.before"
	ClaimCASBefore        = "JobClaimCAS.before"
	ClaimSkipLockedAfter  = "JobClaimSkipLocked.after" // the claim committed; an error here is a lost answer
	HeldByBefore          = "JobHeldBy.before"
	LeaseRenewBefore      = "LeaseRenewMany.before"
	FenceStatesBefore     = "JobFenceStates.before"
	CompleteBefore        = "JobCompleteMany.before"
	CompleteTxBefore      = "JobCompleteTx.before"
	RescueCandidatesAfter = "JobRescueCandidates.after" // the rescuer has read expired runs
	RescueExpiredBefore   = "JobRescueExpired.before"
	PromoteBefore         = "JobPromoteDue.before"
)

// Deadlock is an injected MySQL error 1213.
var Deadlock = &mysql.MySQLError{Number: 1213, SQLState: [5]byte{'4', '0', '0', '0', '1'},
	Message: "Deadlock found when trying to get lock; try restarting transaction (injected)"}

// LockWaitTimeout is an injected MySQL error 1205.
var LockWaitTimeout = &mysql.MySQLError{Number: 1205, SQLState: [5]byte{'H', 'Y', '0', '0', '0'},
	Message: "Lock wait timeout exceeded; try restarting transaction (injected)"}

// Hook runs at a point; a non-nil error is returned by the wrapped method.
// A hook may block to pause the caller.
type Hook func(ctx context.Context) error

// Store is a fault-injecting scheduler.Store.
type Store struct {
	inner scheduler.Store
	mu    sync.Mutex
	hooks map[string][]*entry
	seq   int
}

type entry struct {
	id int
	h  Hook
}

// Wrap returns a Store around inner with no faults.
func Wrap(inner scheduler.Store) *Store {
	return &Store{inner: inner, hooks: map[string][]*entry{}}
}

// On adds h at point and returns a function that removes it.
func (s *Store) On(point string, h Hook) (remove func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	e := &entry{id: s.seq, h: h}
	s.hooks[point] = append(s.hooks[point], e)
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		list := s.hooks[point]
		for i, x := range list {
			if x.id == e.id {
				s.hooks[point] = append(list[:i:i], list[i+1:]...)
				return
			}
		}
	}
}

// FailNext makes the next n calls reaching point return err.
func (s *Store) FailNext(point string, n int, err error) {
	var mu sync.Mutex
	left := n
	s.On(point, func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if left <= 0 {
			return nil
		}
		left--
		return err
	})
}

// Pause holds the first caller that reaches a point until Release.
type Pause struct {
	reached chan struct{}
	release chan struct{}
	once    sync.Once
	relOnce sync.Once
	remove  func()
}

// Reached is closed when a caller is held at the point.
func (p *Pause) Reached() <-chan struct{} { return p.reached }

// Release lets the held caller (and any later one) continue.
func (p *Pause) Release() {
	p.relOnce.Do(func() { close(p.release); p.remove() })
}

// PauseOnce holds the first call at point (for which match returns true,
// when match is non-nil) until Release.
func (s *Store) PauseOnce(point string, match func(ctx context.Context) bool) *Pause {
	p := &Pause{reached: make(chan struct{}), release: make(chan struct{})}
	var mu sync.Mutex
	taken := false
	p.remove = s.On(point, func(ctx context.Context) error {
		if match != nil && !match(ctx) {
			return nil
		}
		mu.Lock()
		first := !taken
		taken = true
		mu.Unlock()
		if !first {
			return nil
		}
		p.once.Do(func() { close(p.reached) })
		select {
		case <-p.release:
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	})
	return p
}

func (s *Store) at(ctx context.Context, point string) error {
	s.mu.Lock()
	list := append([]*entry(nil), s.hooks[point]...)
	s.mu.Unlock()
	for _, e := range list {
		if err := e.h(ctx); err != nil {
			return store.Mark(err)
		}
	}
	return nil
}

func after(s *Store, ctx context.Context, point string, err error) error {
	if err != nil {
		return err
	}
	return s.at(ctx, point)
}

// JobScanAvailable implements scheduler.Store.
func (s *Store) JobScanAvailable(ctx context.Context, limit int) ([]jobq.Fence, error) {
	if err := s.at(ctx, ScanBefore); err != nil {
		return nil, err
	}
	r, err := s.inner.JobScanAvailable(ctx, limit)
	return r, after(s, ctx, ScanAfter, err)
}

// JobClaimSkipLocked implements scheduler.Store.
func (s *Store) JobClaimSkipLocked(ctx context.Context, p jobq.ClaimParams) ([]jobq.ClaimedJob, error) {
	if err := s.at(ctx, ClaimSkipLocked); err != nil {
		return nil, err
	}
	r, err := s.inner.JobClaimSkipLocked(ctx, p)
	return r, after(s, ctx, "JobClaimSkipLocked.after", err)
}

// JobHeldBy implements scheduler.Store.
func (s *Store) JobHeldBy(ctx context.Context, owner string, within time.Duration) ([]jobq.ClaimedJob, error) {
	if err := s.at(ctx, HeldByBefore); err != nil {
		return nil, err
	}
	r, err := s.inner.JobHeldBy(ctx, owner, within)
	return r, after(s, ctx, "JobHeldBy.after", err)
}

// JobClaimCAS implements scheduler.Store.
func (s *Store) JobClaimCAS(ctx context.Context, p jobq.ClaimCASParams) ([]jobq.ClaimedJob, int, error) {
	if err := s.at(ctx, ClaimCASBefore); err != nil {
		return nil, 0, err
	}
	r, n, err := s.inner.JobClaimCAS(ctx, p)
	return r, n, after(s, ctx, "JobClaimCAS.after", err)
}

// LeaseRenewMany implements scheduler.Store.
func (s *Store) LeaseRenewMany(ctx context.Context, p jobq.LeaseRenewParams) ([]uint64, error) {
	if err := s.at(ctx, LeaseRenewBefore); err != nil {
		return nil, err
	}
	ids, err := s.inner.LeaseRenewMany(ctx, p)
	return ids, after(s, ctx, "LeaseRenewMany.after", err)
}

// JobFenceStates implements scheduler.Store.
func (s *Store) JobFenceStates(ctx context.Context, ids []uint64) ([]jobq.FenceState, error) {
	if err := s.at(ctx, FenceStatesBefore); err != nil {
		return nil, err
	}
	r, err := s.inner.JobFenceStates(ctx, ids)
	return r, after(s, ctx, "JobFenceStates.after", err)
}

// JobCompleteMany implements scheduler.Store.
func (s *Store) JobCompleteMany(ctx context.Context, cs []jobq.Completion) ([]bool, error) {
	if err := s.at(ctx, CompleteBefore); err != nil {
		return nil, err
	}
	r, err := s.inner.JobCompleteMany(ctx, cs)
	return r, after(s, ctx, "JobCompleteMany.after", err)
}

// JobCompleteTx implements scheduler.Store.
func (s *Store) JobCompleteTx(ctx context.Context, c jobq.Completion, fn func(ctx context.Context, tx jobq.Tx) error) (bool, error) {
	if err := s.at(ctx, CompleteTxBefore); err != nil {
		return false, err
	}
	r, err := s.inner.JobCompleteTx(ctx, c, fn)
	return r, after(s, ctx, "JobCompleteTx.after", err)
}

// JobRescueCandidates implements scheduler.Store.
func (s *Store) JobRescueCandidates(ctx context.Context, limit int) ([]jobq.Fence, error) {
	if err := s.at(ctx, "JobRescueCandidates.before"); err != nil {
		return nil, err
	}
	r, err := s.inner.JobRescueCandidates(ctx, limit)
	return r, after(s, ctx, RescueCandidatesAfter, err)
}

// JobRescueExpired implements scheduler.Store.
func (s *Store) JobRescueExpired(ctx context.Context, f jobq.Fence) (bool, error) {
	if err := s.at(ctx, RescueExpiredBefore); err != nil {
		return false, err
	}
	r, err := s.inner.JobRescueExpired(ctx, f)
	return r, after(s, ctx, "JobRescueExpired.after", err)
}

// JobIdleProbe implements scheduler.Store. It is the idle scan: the scan's
// fault points (ScanBefore, ScanAfter) apply to it.
func (s *Store) JobIdleProbe(ctx context.Context, limit int) (jobq.IdleProbe, error) {
	if err := s.at(ctx, ScanBefore); err != nil {
		return jobq.IdleProbe{}, err
	}
	r, err := s.inner.JobIdleProbe(ctx, limit)
	return r, after(s, ctx, ScanAfter, err)
}

// JobScheduledNext implements scheduler.Store.
func (s *Store) JobScheduledNext(ctx context.Context) (jobq.ScheduledNext, error) {
	if err := s.at(ctx, "JobScheduledNext.before"); err != nil {
		return jobq.ScheduledNext{}, err
	}
	r, err := s.inner.JobScheduledNext(ctx)
	return r, after(s, ctx, "JobScheduledNext.after", err)
}

// JobPromoteDue implements scheduler.Store.
func (s *Store) JobPromoteDue(ctx context.Context, limit int) (int, error) {
	if err := s.at(ctx, PromoteBefore); err != nil {
		return 0, err
	}
	n, err := s.inner.JobPromoteDue(ctx, limit)
	return n, after(s, ctx, "JobPromoteDue.after", err)
}

var _ scheduler.Store = (*Store)(nil)
