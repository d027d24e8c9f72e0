package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/jobq/jobq/apitype"
)

// SetPaused pauses (paused=true) or resumes a job type.
func (c *Client) SetPaused(ctx context.Context, jobType string, paused bool) (tc apitype.TypeControl, err error) {
	verb := "/resume"
	if paused {
		verb = "/pause"
	}
	_, err = c.do(ctx, http.MethodPost, "/v1/types/"+url.PathEscape(jobType)+verb, nil, &tc)
	return tc, err
}

// SetLimit sets a job type's cluster-wide limit of RUNNING jobs (0 removes it).
func (c *Client) SetLimit(ctx context.Context, jobType string, maxRunning int) (tc apitype.TypeControl, err error) {
	_, err = c.do(ctx, http.MethodPut, "/v1/types/"+url.PathEscape(jobType)+"/limit", apitype.LimitRequest{MaxRunning: &maxRunning}, &tc)
	return tc, err
}

// SetRateLimit sets a job type's cluster-wide rate limit: at most starts
// starts in any window of period (a Go duration, "1s"), of the whole type
// or (perKey) of each rate key of the type.
func (c *Client) SetRateLimit(ctx context.Context, jobType string, starts int, period string, perKey bool) (tc apitype.TypeControl, err error) {
	_, err = c.do(ctx, http.MethodPut, "/v1/types/"+url.PathEscape(jobType)+"/rate-limit", apitype.RateLimitRequest{Starts: &starts, Period: period, PerKey: perKey}, &tc)
	return tc, err
}

// ClearRateLimit removes a job type's rate limit.
func (c *Client) ClearRateLimit(ctx context.Context, jobType string) (tc apitype.TypeControl, err error) {
	_, err = c.do(ctx, http.MethodDelete, "/v1/types/"+url.PathEscape(jobType)+"/rate-limit", nil, &tc)
	return tc, err
}

// Types lists the job types' control rows.
func (c *Client) Types(ctx context.Context) ([]apitype.TypeControl, error) {
	var out struct {
		Types []apitype.TypeControl `json:"types"`
	}
	_, err := c.do(ctx, http.MethodGet, "/v1/types", nil, &out)
	return out.Types, err
}

// PutPeriodic creates or replaces a schedule; created is true for a new one.
func (c *Client) PutPeriodic(ctx context.Context, req apitype.PeriodicRequest) (p apitype.Periodic, created bool, err error) {
	status, err := c.do(ctx, http.MethodPost, "/v1/periodic", req, &p)
	return p, status == http.StatusCreated, err
}

// ListPeriodic lists the schedules.
func (c *Client) ListPeriodic(ctx context.Context) ([]apitype.Periodic, error) {
	var out struct {
		Periodic []apitype.Periodic `json:"periodic"`
	}
	_, err := c.do(ctx, http.MethodGet, "/v1/periodic", nil, &out)
	return out.Periodic, err
}

// DeletePeriodic removes a schedule.
func (c *Client) DeletePeriodic(ctx context.Context, name string) error {
	_, err := c.do(ctx, http.MethodDelete, "/v1/periodic/"+url.PathEscape(name), nil, nil)
	return err
}

// PeriodicHistory returns one page of schedule name's fire ledger, newest
// instant first: limit rows (0 = the server's default, 50; at most 1000)
// with instants before before (zero = from the newest). Pass the page's
// NextBefore as before to read the next, older page. An unknown schedule
// is an *APIError with Status 404.
func (c *Client) PeriodicHistory(ctx context.Context, name string, limit int, before time.Time) (h apitype.FireHistory, err error) {
	q := url.Values{}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if !before.IsZero() {
		q.Set("before", before.UTC().Format(time.RFC3339Nano))
	}
	path := "/v1/periodic/" + url.PathEscape(name) + "/history"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	_, err = c.do(ctx, http.MethodGet, path, nil, &h)
	return h, err
}

// RetryBulk re-queues every FAILED or CANCELED job (of one type, if set).
func (c *Client) RetryBulk(ctx context.Context, req apitype.RetryBulkRequest) (res apitype.RetryBulkResult, err error) {
	_, err = c.bulk().do(ctx, http.MethodPost, "/v1/jobs/retry", req, &res)
	return res, err
}

// Purge deletes terminal jobs finished more than olderThan ("7d", "36h") ago.
func (c *Client) Purge(ctx context.Context, olderThan string) (res apitype.PurgeResult, err error) {
	_, err = c.bulk().do(ctx, http.MethodPost, "/v1/jobs/purge", apitype.PurgeRequest{OlderThan: olderThan}, &res)
	return res, err
}

// BulkTimeout bounds a bulk operation (purge, bulk retry) instead of the
// client's per-request timeout: on a large table it takes longer than 30 s,
// and a client that gives up leaves it half done (the server stops between
// batches). The server gives these routes as long to answer.
const BulkTimeout = 10 * time.Minute

// bulk returns c with its HTTP timeout raised to BulkTimeout when shorter.
func (c *Client) bulk() *Client {
	if c.HTTP == nil || c.HTTP.Timeout == 0 || c.HTTP.Timeout >= BulkTimeout {
		return c
	}
	hc := *c.HTTP
	hc.Timeout = BulkTimeout
	cc := *c
	cc.HTTP = &hc
	return &cc
}

// Stats returns the queue snapshot; window "" means 1m.
func (c *Client) Stats(ctx context.Context, window string) (st apitype.QueueStats, err error) {
	path := "/v1/stats"
	if window != "" {
		path += "?window=" + url.QueryEscape(window)
	}
	_, err = c.do(ctx, http.MethodGet, path, nil, &st)
	return st, err
}
