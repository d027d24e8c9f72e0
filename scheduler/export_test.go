package scheduler

import (
	"context"

	"github.com/jobq/jobq"
)

// RescueNow runs one rescue pass at once and returns the runs it rescued,
// so a test rescues deterministically instead of waiting RescueInterval.
func (s *Scheduler) RescueNow(ctx context.Context) []jobq.Fence { return s.rescuer.pass(ctx) }
