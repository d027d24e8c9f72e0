package faultstore

import (
	"context"

	"github.com/jobq/jobq"
)

// Named points of the operations methods (scheduler.OpsStore).
const (
	ClaimLimitedBefore = "JobClaimLimited.before"
	PeriodicFireBefore = "PeriodicFire.before"
	PurgeBefore        = "JobPurge.before"
)

// TypeLimits delegates to the wrapped store.
func (s *Store) TypeLimits(ctx context.Context) (map[string]int, error) {
	return s.inner.TypeLimits(ctx)
}

// TypeProbe delegates to the wrapped store.
func (s *Store) TypeProbe(ctx context.Context, jobType string) (jobq.TypeProbe, error) {
	return s.inner.TypeProbe(ctx, jobType)
}

// JobClaimLimited delegates to the wrapped store after ClaimLimitedBefore.
func (s *Store) JobClaimLimited(ctx context.Context, jobType string, p jobq.ClaimParams) ([]jobq.ClaimedJob, error) {
	if err := s.at(ctx, ClaimLimitedBefore); err != nil {
		return nil, err
	}
	return s.inner.JobClaimLimited(ctx, jobType, p)
}

// PeriodicList delegates to the wrapped store.
func (s *Store) PeriodicList(ctx context.Context) ([]jobq.Periodic, error) {
	return s.inner.PeriodicList(ctx)
}

// PeriodicFire delegates to the wrapped store after PeriodicFireBefore.
func (s *Store) PeriodicFire(ctx context.Context, name string, plan jobq.PeriodicPlanFunc) (jobq.PeriodicFireResult, error) {
	if err := s.at(ctx, PeriodicFireBefore); err != nil {
		return jobq.PeriodicFireResult{}, err
	}
	return s.inner.PeriodicFire(ctx, name, plan)
}

// PeriodicReleaseQueued delegates to the wrapped store.
func (s *Store) PeriodicReleaseQueued(ctx context.Context) ([]string, error) {
	return s.inner.PeriodicReleaseQueued(ctx)
}

// JobPurge delegates to the wrapped store after PurgeBefore.
func (s *Store) JobPurge(ctx context.Context, p jobq.PurgeParams) (jobq.PurgeResult, error) {
	if err := s.at(ctx, PurgeBefore); err != nil {
		return jobq.PurgeResult{}, err
	}
	return s.inner.JobPurge(ctx, p)
}
