package console

import (
	"context"
	"net/http"

	"github.com/jobq/jobq/apitype"
)

// Alerts is what the alerts page reads (*alert.Service implements it).
type Alerts interface {
	List(ctx context.Context) ([]apitype.AlertRule, error)
	Deliveries(ctx context.Context, id uint64, limit int) ([]apitype.AlertDelivery, error)
}

// alertsData is the alerts page: the rules and the newest deliveries.
type alertsData struct {
	Rules      []apitype.AlertRule
	Deliveries []apitype.AlertDelivery
	Names      map[uint64]string // rule id → name
}

// alertsPageDeliveries is how many deliveries the page lists.
const alertsPageDeliveries = 50

// alerts shows the alert rules and their newest 50 deliveries (the API's
// GET /v1/alerts and GET /v1/alerts/0/deliveries); rules are managed with
// `jobq alerts` or the API.
func (c *Console) alerts(w http.ResponseWriter, r *http.Request) {
	d := &alertsData{Names: map[uint64]string{}}
	var ans *answer
	if c.opts.Alerts != nil {
		rules, err := c.opts.Alerts.List(r.Context())
		if err == nil {
			d.Deliveries, err = c.opts.Alerts.Deliveries(r.Context(), 0, alertsPageDeliveries)
		}
		if err != nil {
			ans = c.errAnswer(err, "")
		}
		d.Rules = rules
		for _, rule := range rules {
			d.Names[rule.ID] = rule.Name
		}
	}
	status := http.StatusOK
	if ans != nil {
		status = ans.Status
	}
	c.render(w, r, status, "alerts", &page{Title: "Alerts", Nav: "alerts", Answer: ans, Data: d})
}
