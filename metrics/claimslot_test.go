package metrics_test

import (
	"testing"
	"time"

	"github.com/jobq/jobq/metrics"
	"github.com/jobq/jobq/scheduler"
)

// A claim's wait for a claim slot is counted by how it ended and timed.
func TestClaimSlotWaitsCounted(t *testing.T) {
	m := metrics.New(metrics.Options{BacklogInterval: -1})
	m.Observe(scheduler.Event{Kind: scheduler.EventClaimSlotWait, Duration: 40 * time.Millisecond, Result: "acquired"})
	m.Observe(scheduler.Event{Kind: scheduler.EventClaimSlotWait, Duration: time.Second, Result: "timed_out"})
	m.Observe(scheduler.Event{Kind: scheduler.EventClaimSlotWait, Duration: time.Second, Result: "timed_out"})
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	var waits uint64
	var seconds float64
	for _, f := range fams {
		switch f.GetName() {
		case "jobq_claim_slot_waits_total":
			for _, mt := range f.GetMetric() {
				got[mt.GetLabel()[0].GetValue()] = mt.GetCounter().GetValue()
			}
		case "jobq_claim_slot_wait_seconds":
			waits, seconds = f.GetMetric()[0].GetHistogram().GetSampleCount(), f.GetMetric()[0].GetHistogram().GetSampleSum()
		}
	}
	if got["acquired"] != 1 || got["timed_out"] != 2 {
		t.Errorf("jobq_claim_slot_waits_total = %v, want acquired 1, timed_out 2", got)
	}
	if waits != 3 || seconds < 2.04-1e-9 || seconds > 2.04+1e-9 {
		t.Errorf("jobq_claim_slot_wait_seconds count %d sum %g, want 3 and 2.04", waits, seconds)
	}
}
