package service

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/jobq/jobq"
)

// Fire history page sizes (GET /v1/periodic/{name}/history?limit=N).
const (
	FireHistoryLimitDefault = 50
	FireHistoryLimitMax     = 1000
)

// FireHistory returns one page of schedule name's fire ledger, newest
// instant first. limit is the page size as given ("" = 50, else an integer
// in [1, 1000]); before ("" = from the newest) an RFC 3339 time: only
// instants strictly before it. A bad value is a *ValidationError naming
// "limit" or "before". jobq.ErrNotFound when no schedule has the name and
// the ledger holds nothing for it (a deleted schedule keeps its ledger and
// its history stays readable).
func (o *Ops) FireHistory(ctx context.Context, name, limit, before string) ([]jobq.FireEntry, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	p := jobq.FireHistoryParams{Name: name, Limit: FireHistoryLimitDefault}
	if limit != "" {
		n, err := strconv.Atoi(limit)
		if err != nil || n < 1 || n > FireHistoryLimitMax {
			return nil, invalid("limit", "must be an integer in [1, %d], got %q", FireHistoryLimitMax, limit)
		}
		p.Limit = n
	}
	if before != "" {
		t, err := time.Parse(time.RFC3339Nano, before)
		if err != nil {
			return nil, invalid("before", "must be an RFC 3339 time (2026-01-02T15:04:05Z), got %q", before)
		}
		p.Before = t.UTC()
	}
	out, err := retryV(ctx, o.retry, "periodic.history", func() ([]jobq.FireEntry, error) { return o.store.FireHistory(ctx, p) })
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		if _, err := o.GetPeriodic(ctx, name); err != nil {
			if errors.Is(err, jobq.ErrNotFound) {
				// A page past the oldest row of a deleted schedule is empty, not
				// missing, only when the schedule had rows; check the whole ledger.
				all, herr := retryV(ctx, o.retry, "periodic.history", func() ([]jobq.FireEntry, error) {
					return o.store.FireHistory(ctx, jobq.FireHistoryParams{Name: name, Limit: 1})
				})
				if herr != nil {
					return nil, herr
				}
				if len(all) == 0 {
					return nil, jobq.ErrNotFound
				}
			} else {
				return nil, err
			}
		}
		out = []jobq.FireEntry{}
	}
	return out, nil
}
