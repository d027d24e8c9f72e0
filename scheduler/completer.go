package scheduler

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq"
)

// completerStore is what the completer needs from the store.
type completerStore interface {
	JobCompleteMany(ctx context.Context, cs []jobq.Completion) ([]bool, error)
}

// completerParams configures the completer.
type completerParams struct {
	Store     completerStore
	Batch     int           // Config.CompleteBatch
	Linger    time.Duration // Config.CompleteLinger (≤ 0: off)
	QueueSize int           // completions that can wait unwritten
	// Work tells the completer whether handlers are still running on this
	// replica, so its linger can end as soon as none is.
	Work *workTracker
	// FinishFunc is called once per completion after its write: applied is
	// false for a stale completion; err is set when it could not be written.
	FinishFunc func(c jobq.Completion, applied bool, err error)
	// Writer retries each batch's write while its runs hold their leases.
	Writer outcomeWriter
	// Flushers is how many batches may be written at once (< 1: one).
	Flushers int
	// Slots counts the completions queued and not yet written
	// (slots.unwritten), which bound this replica's claims (nil: none).
	Slots *slots
	Log   *slog.Logger
}

// completer writes outcomes in batches: every completion waiting when a
// batch starts (up to Batch), plus those of handlers that return within
// Linger, commits in one transaction, each row fenced by its attempt. Up to
// Flushers batches are written at once, each in its own transaction: one
// replica's completions are not held behind a single commit at a time (the
// batches hold distinct runs, and every row is fenced on its own, so their
// order does not matter); while every flusher is busy, the next batch keeps
// filling.
type completer struct {
	p        completerParams
	ch       chan jobq.Completion
	done     chan struct{}
	flushers chan struct{} // a token per batch being written
	flushing sync.WaitGroup
	started  atomic.Bool
	stopOnce sync.Once
}

func newCompleter(p completerParams) *completer {
	return &completer{p: p, ch: make(chan jobq.Completion, p.QueueSize), done: make(chan struct{}),
		flushers: make(chan struct{}, max(1, p.Flushers))}
}

// Start runs the completer until Stop. Cancelling ctx does not stop it:
// every handler's outcome must be written, also after a soft stop.
func (c *completer) Start(context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return errAlreadyStarted
	}
	go c.run()
	return nil
}

// Stop flushes what is queued and waits for the completer to exit. Call it
// only after every handler returned (no submit may follow).
func (c *completer) Stop() {
	if !c.started.Load() {
		return
	}
	c.stopOnce.Do(func() { close(c.ch) })
	<-c.done
}

// submit queues one completion.
func (c *completer) submit(comp jobq.Completion) {
	if c.p.Slots != nil {
		c.p.Slots.unwritten.Add(1)
	}
	c.ch <- comp
}

func (c *completer) run() {
	defer close(c.done)
	defer c.flushing.Wait()
	for comp := range c.ch {
		batch := make([]jobq.Completion, 0, min(c.p.Batch, 1+len(c.ch)))
		batch = append(batch, comp)
		open := true
	fill:
		for len(batch) < c.p.Batch {
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
		if open && len(batch) < c.p.Batch {
			// Every flusher busy: the batch goes on filling meanwhile.
			batch, open = c.awaitFlusher(batch)
		} else {
			c.flushers <- struct{}{}
		}
		c.flushing.Add(1)
		go func() {
			defer c.flushing.Done()
			defer func() { <-c.flushers }()
			c.flush(batch)
		}()
		if !open {
			return
		}
	}
}

// awaitFlusher takes a flusher token for batch, adding to it the
// completions that arrive while every flusher is busy (up to Batch). open
// is false once the channel is closed.
func (c *completer) awaitFlusher(batch []jobq.Completion) (_ []jobq.Completion, open bool) {
	for len(batch) < c.p.Batch {
		select {
		case c.flushers <- struct{}{}:
			return batch, true
		case next, ok := <-c.ch:
			if !ok {
				c.flushers <- struct{}{}
				return batch, false
			}
			batch = append(batch, next)
		}
	}
	c.flushers <- struct{}{}
	return batch, true
}

// flush writes batch, in transactions of at most RowByRowPerCommit jobs
// written row by row, and in more when its successes would unblock more
// than UnblockPerCommit workflow children: the batch is tried
// whole with that limit in its context (jobq.WithUnblockLimit) and, when the
// store refuses it as too wide (nothing written), written again split by
// the widths the store read (splitByWidths). A store that does not apply
// the limit (a test double) has its batches written whole.
func (c *completer) flush(batch []jobq.Completion) {
	// At most RowByRowPerCommit jobs written row by row per transaction
	// (splitRowByRow), each transaction split again by unblock width.
	for _, tx := range splitRowByRow(batch) {
		width := c.flushGroup(tx, true)
		if width == nil {
			continue
		}
		for _, group := range splitByWidths(tx, width) {
			c.flushGroup(group, false)
		}
	}
}

// flushGroup writes batch in one transaction and reports each completion's
// result (FinishFunc) as soon as it committed. With limit, a batch the
// store refuses as too wide to unblock in one transaction is neither
// written nor reported: flushGroup returns its parents' widths instead.
func (c *completer) flushGroup(batch []jobq.Completion, limit bool) (width map[uint64]int) {
	p := c.p
	fences := make([]jobq.Fence, len(batch))
	for i, comp := range batch {
		fences[i] = comp.Fence
	}
	var applied []bool
	err := p.Writer.write("complete", fences, func(ctx context.Context) error {
		if limit {
			ctx = jobq.WithUnblockLimit(ctx, UnblockPerCommit)
		}
		var e error
		applied, e = p.Store.JobCompleteMany(ctx, batch)
		var wide *jobq.UnblockTooWideError
		if limit && errors.As(e, &wide) {
			width = wide.Widths
			if width == nil {
				width = map[uint64]int{} // no widths named: written again whole, without the limit
			}
			return nil
		}
		return e
	})
	if width != nil {
		return width // refused: nothing written (the try that refused it returned nil)
	}
	if err != nil {
		jobIDs := make([]uint64, len(batch))
		for i, comp := range batch {
			jobIDs[i] = comp.Fence.ID
		}
		outcomeFailureLog(p.Log, "completion", err, "component", "completer", "jobs", len(batch), "job_ids", jobIDs)
		for _, comp := range batch {
			p.FinishFunc(comp, false, err)
		}
		p.Slots.written(len(batch))
		return nil
	}
	for i, comp := range batch {
		p.FinishFunc(comp, applied[i], nil)
	}
	p.Slots.written(len(batch))
	return nil
}

// linger adds to a batch the completions of handlers still running on this
// replica, waiting at most Linger for them; it returns at once when the
// batch is full, no handler is running or lingering is disabled. open is
// false once the channel is closed.
func (c *completer) linger(batch []jobq.Completion) (_ []jobq.Completion, open bool) {
	p := c.p
	p.Work.drainIdle() // a stale token from an earlier linger
	if p.Linger <= 0 || len(batch) >= p.Batch || p.Work.running() == 0 {
		return batch, true
	}
	t := time.NewTimer(p.Linger)
	defer t.Stop()
	for len(batch) < p.Batch {
		select {
		case next, ok := <-c.ch:
			if !ok {
				return batch, false
			}
			batch = append(batch, next)
			if p.Work.running() == 0 && len(c.ch) == 0 {
				return batch, true
			}
		case <-p.Work.idle:
			return batch, true
		case <-t.C:
			return batch, true
		}
	}
	return batch, true
}
