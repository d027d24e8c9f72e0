package bench

import (
	"strings"
	"testing"
)

// The workflow table shows each round's ratio, the median and the spread,
// and a row of phases per round.
func TestWriteWorkflowTableRatiosAndPhases(t *testing.T) {
	r := &WorkflowResult{Server: "MariaDB", UnblockSamples: 1, Drains: []WorkflowDrain{
		{Name: "independent 10,000", Jobs: 10000, Rounds: []float64{1000, 2000, 4000}, Rate: 2000},
		{Name: "10 × (1 → 1,000 → 1)", Jobs: 10020, Rounds: []float64{800, 1500, 2000}, Rate: 1500},
	}, FanPhases: []FanPhases{{RootsDone: 40, FirstMidStart: 30, LastMidDone: 1200, LastSinkStart: 1210, End: 1215}}}
	var b strings.Builder
	WriteWorkflowTable(&b, r)
	for _, want := range []string{"| 0.80, 0.75, 0.50 | 0.75× (0.50–0.80) (target ≥ 0.7) |", "| 1 | 40 | 30 | 1200 | 1210 | 1215 |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
