package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// alertDeliveries is jobq_alert_deliveries_total, registered on first use
// (AlertOutcome) so it is served only by a replica that sends alerts.
type alertDeliveries struct {
	once sync.Once
	c    *prometheus.CounterVec
}

// AlertOutcome counts one alert delivery attempt by outcome (delivered,
// retried, failed, refused; package alert's Outcome* constants): the
// counter jobq_alert_deliveries_total{outcome}. It is alert.Config's
// OutcomeFunc.
func (m *Metrics) AlertOutcome(outcome string) {
	m.alerts.once.Do(func() {
		m.alerts.c = factory{m.Registry}.counterVec("jobq_alert_deliveries_total",
			"Alert delivery attempts this replica made, by outcome: delivered (2xx), retried (5xx, 408, 429 or a network error; sent again with backoff), failed (given up), refused (a destination the allow-list refuses; never contacted, also counted as failed).",
			"outcome")
	})
	m.alerts.c.WithLabelValues(outcome).Inc()
}
