package scheduler

import (
	"context"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/store"
)

// completer writes outcomes in batches: every completion waiting when a
// batch starts (up to CompleteBatch), plus those of handlers that return
// within CompleteLinger, commits in one transaction, each row fenced by its
// attempt.
type completer struct {
	s    *Scheduler
	ch   chan jobq.Completion
	done chan struct{}
}

func newCompleter(s *Scheduler) *completer {
	return &completer{s: s, ch: make(chan jobq.Completion, s.cfg.Workers+s.cfg.CompleteBatch), done: make(chan struct{})}
}

func (c *completer) submit(comp jobq.Completion) { c.ch <- comp }

// close flushes what is queued and waits for the completer to exit. Call
// only after every handler returned.
func (c *completer) close() {
	close(c.ch)
	<-c.done
}

func (c *completer) run() {
	defer close(c.done)
	batch := make([]jobq.Completion, 0, c.s.cfg.CompleteBatch)
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
		if open {
			batch, open = c.linger(batch)
		}
		c.flush(batch)
		if !open {
			return
		}
	}
}

func (c *completer) flush(batch []jobq.Completion) {
	s := c.s
	fences := make([]jobq.Fence, len(batch))
	for i, comp := range batch {
		fences[i] = comp.Fence
	}
	var applied []bool
	err := s.writeOutcome("complete", fences, func(ctx context.Context) error {
		var e error
		applied, e = s.store.JobCompleteMany(ctx, batch)
		return e
	})
	if err != nil {
		s.log.Error("completion failed past the runs' lease deadline; the leases will expire and the jobs will be rescued",
			"component", "completer", "jobs", len(batch), "cause", store.Cause(err), "err", err)
		for _, comp := range batch {
			s.finishRun(comp, false, err)
		}
		return
	}
	for i, comp := range batch {
		s.finishRun(comp, applied[i], nil)
	}
}

// linger adds to a batch the completions of handlers still running on this
// replica, waiting at most CompleteLinger for them; it returns at once when
// the batch is full, no handler is running or lingering is disabled. open
// is false once the channel is closed.
func (c *completer) linger(batch []jobq.Completion) (_ []jobq.Completion, open bool) {
	s := c.s
	select { // a stale token from an earlier linger
	case <-s.workingIdle:
	default:
	}
	if s.cfg.CompleteLinger <= 0 || len(batch) >= s.cfg.CompleteBatch || s.working.Load() == 0 {
		return batch, true
	}
	t := time.NewTimer(s.cfg.CompleteLinger)
	defer t.Stop()
	for len(batch) < s.cfg.CompleteBatch {
		select {
		case next, ok := <-c.ch:
			if !ok {
				return batch, false
			}
			batch = append(batch, next)
			if s.working.Load() == 0 && len(c.ch) == 0 {
				return batch, true
			}
		case <-s.workingIdle:
			return batch, true
		case <-t.C:
			return batch, true
		}
	}
	return batch, true
}
