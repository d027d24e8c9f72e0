package scheduler

import (
	"context"

	"github.com/jobq/jobq"
)

// RescueNow runs one rescue pass at once and returns the runs it rescued,
// so a test rescues deterministically instead of waiting RescueInterval.
func (s *Scheduler) RescueNow(ctx context.Context) []jobq.Fence { return s.rescuer.pass(ctx) }

// PromoteNow runs one promotion at once and returns how many jobs it
// promoted, so a test promotes deterministically.
func (s *Scheduler) PromoteNow(ctx context.Context) (int, error) {
	n, err := s.promoter.promoteDue(ctx)
	if n > 0 {
		s.Wake()
	}
	return n, err
}
