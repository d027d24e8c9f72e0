package faultstore

import (
	"context"
	"errors"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/scheduler"
)

// Named points of the operations methods (scheduler.OpsStore).
const (
	ClaimLimitedBefore = "JobClaimLimited.before"
	PeriodicFireBefore = "PeriodicFire.before"
	PurgeBefore        = "JobPurge.before"
)

// errNoOps is returned when the wrapped store does not implement
// scheduler.OpsStore.
var errNoOps = errors.New("faultstore: wrapped store does not implement scheduler.OpsStore")

var _ scheduler.OpsStore = (*Store)(nil)

func (s *Store) ops() (scheduler.OpsStore, error) {
	o, ok := s.inner.(scheduler.OpsStore)
	if !ok {
		return nil, errNoOps
	}
	return o, nil
}

// TypeLimits delegates to the wrapped store.
func (s *Store) TypeLimits(ctx context.Context) (map[string]int, error) {
	o, err := s.ops()
	if err != nil {
		return nil, err
	}
	return o.TypeLimits(ctx)
}

// TypeClaimable delegates to the wrapped store.
func (s *Store) TypeClaimable(ctx context.Context, jobType string) (bool, error) {
	o, err := s.ops()
	if err != nil {
		return false, err
	}
	return o.TypeClaimable(ctx, jobType)
}

// JobClaimLimited delegates to the wrapped store after ClaimLimitedBefore.
func (s *Store) JobClaimLimited(ctx context.Context, jobType string, p jobq.ClaimParams) ([]jobq.ClaimedJob, error) {
	o, err := s.ops()
	if err != nil {
		return nil, err
	}
	if err := s.at(ctx, ClaimLimitedBefore); err != nil {
		return nil, err
	}
	return o.JobClaimLimited(ctx, jobType, p)
}

// PeriodicList delegates to the wrapped store.
func (s *Store) PeriodicList(ctx context.Context) ([]jobq.Periodic, error) {
	o, err := s.ops()
	if err != nil {
		return nil, err
	}
	return o.PeriodicList(ctx)
}

// PeriodicFire delegates to the wrapped store after PeriodicFireBefore.
func (s *Store) PeriodicFire(ctx context.Context, name string, plan jobq.PeriodicPlanFunc) (jobq.PeriodicFireResult, error) {
	o, err := s.ops()
	if err != nil {
		return jobq.PeriodicFireResult{}, err
	}
	if err := s.at(ctx, PeriodicFireBefore); err != nil {
		return jobq.PeriodicFireResult{}, err
	}
	return o.PeriodicFire(ctx, name, plan)
}

// JobPurge delegates to the wrapped store after PurgeBefore.
func (s *Store) JobPurge(ctx context.Context, p jobq.PurgeParams) (jobq.PurgeResult, error) {
	o, err := s.ops()
	if err != nil {
		return jobq.PurgeResult{}, err
	}
	if err := s.at(ctx, PurgeBefore); err != nil {
		return jobq.PurgeResult{}, err
	}
	return o.JobPurge(ctx, p)
}
