package client

import (
	"context"
	"net/http"
	"strconv"

	"github.com/jobq/jobq/apitype"
)

// CreateAlert creates an alert rule (POST /v1/alerts); a bad request is an
// *APIError 400 naming the field, a taken name 409.
func (c *Client) CreateAlert(ctx context.Context, req apitype.AlertRuleRequest) (r apitype.AlertRule, err error) {
	_, err = c.do(ctx, http.MethodPost, "/v1/alerts", req, &r)
	return r, err
}

// Alerts lists the alert rules by id.
func (c *Client) Alerts(ctx context.Context) ([]apitype.AlertRule, error) {
	var out struct {
		Alerts []apitype.AlertRule `json:"alerts"`
	}
	_, err := c.do(ctx, http.MethodGet, "/v1/alerts", nil, &out)
	return out.Alerts, err
}

// DeleteAlert deletes alert rule id (its deliveries stay).
func (c *Client) DeleteAlert(ctx context.Context, id uint64) error {
	_, err := c.do(ctx, http.MethodDelete, "/v1/alerts/"+strconv.FormatUint(id, 10), nil, nil)
	return err
}

// AlertDeliveries lists the newest limit (1-1000; 0: 100) deliveries of
// rule id (0: of every rule), newest first.
func (c *Client) AlertDeliveries(ctx context.Context, id uint64, limit int) ([]apitype.AlertDelivery, error) {
	var out struct {
		Deliveries []apitype.AlertDelivery `json:"deliveries"`
	}
	path := "/v1/alerts/" + strconv.FormatUint(id, 10) + "/deliveries"
	if limit > 0 {
		path += "?limit=" + strconv.Itoa(limit)
	}
	_, err := c.do(ctx, http.MethodGet, path, nil, &out)
	return out.Deliveries, err
}
