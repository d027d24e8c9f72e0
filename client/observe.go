package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/jobq/jobq/apitype"
)

// JobLogs returns lines of a job's attempt log after line after (GET
// /v1/jobs/{id}/logs); attempt 0 means the latest attempt with a log.
func (c *Client) JobLogs(ctx context.Context, id uint64, attempt, after int) (page apitype.LogPage, err error) {
	q := url.Values{}
	if attempt > 0 {
		q.Set("attempt", strconv.Itoa(attempt))
	}
	if after > 0 {
		q.Set("after", strconv.Itoa(after))
	}
	path := "/v1/jobs/" + strconv.FormatUint(id, 10) + "/logs"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	_, err = c.do(ctx, http.MethodGet, path, nil, &page)
	return page, err
}

// ListWorkers returns the live remote workers (GET /v1/workers).
func (c *Client) ListWorkers(ctx context.Context) (list apitype.WorkerList, err error) {
	_, err = c.do(ctx, http.MethodGet, "/v1/workers", nil, &list)
	return list, err
}
