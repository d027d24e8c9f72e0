package scheduler

import (
	"context"

	"github.com/jobq/jobq/store"
)

// completer writes outcomes in batches: every completion waiting when a
// batch starts (up to CompleteBatch) commits in one transaction, each row
// fenced by its attempt.
type completer struct {
	s    *Scheduler
	ch   chan store.Completion
	done chan struct{}
}

func newCompleter(s *Scheduler) *completer {
	return &completer{s: s, ch: make(chan store.Completion, s.cfg.Workers+s.cfg.CompleteBatch), done: make(chan struct{})}
}

func (c *completer) submit(comp store.Completion) { c.ch <- comp }

// close flushes what is queued and waits for the completer to exit. Call
// only after every handler returned.
func (c *completer) close() {
	close(c.ch)
	<-c.done
}

func (c *completer) run() {
	defer close(c.done)
	batch := make([]store.Completion, 0, c.s.cfg.CompleteBatch)
	for comp := range c.ch {
		batch = append(batch[:0], comp)
		open := true
	fill:
		for len(batch) < c.s.cfg.CompleteBatch {
			select {
			case next, ok := <-c.ch:
				if !ok {
					open = false
					break fill
				}
				batch = append(batch, next)
			default:
				break fill
			}
		}
		c.flush(batch)
		if !open {
			return
		}
	}
}

func (c *completer) flush(batch []store.Completion) {
	s := c.s
	// A completion that cannot be written within two leases is moot: the
	// rescuer will have returned the job.
	ctx, cancel := context.WithTimeout(context.Background(), 2*s.cfg.Lease)
	defer cancel()
	var applied []bool
	err := s.dbRetry(ctx, "complete", 0, func() error {
		var e error
		applied, e = s.store.JobCompleteMany(ctx, batch)
		return e
	})
	if err != nil {
		s.log.Error("completion failed; the leases will expire and the jobs will be rescued",
			"component", "completer", "jobs", len(batch), "err", err)
		for _, comp := range batch {
			s.finishRun(comp, false, err)
		}
		return
	}
	for i, comp := range batch {
		s.finishRun(comp, applied[i], nil)
	}
}
