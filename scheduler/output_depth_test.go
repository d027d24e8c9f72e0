package scheduler

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/jobq/jobq"
)

// An in-process output is refused past jobq.MaxOutputDepth, as a remote
// worker's is, and the output set before stays.
func TestSetOutputRefusesDeepNesting(t *testing.T) {
	nest := func(n int) json.RawMessage {
		return json.RawMessage(strings.Repeat(`{"a":[`, n/2) + `"]]}}[["` + strings.Repeat(`]}`, n/2))
	}
	j := &Job{}
	if err := j.SetOutput(nest(jobq.MaxOutputDepth)); err != nil {
		t.Fatalf("output %d deep: %v", jobq.MaxOutputDepth, err)
	}
	if got := jobq.JSONDepth(j.Output()); got != jobq.MaxOutputDepth {
		t.Fatalf("JSONDepth = %d, want %d (brackets inside strings do not count)", got, jobq.MaxOutputDepth)
	}
	if err := j.SetOutput(nest(jobq.MaxOutputDepth + 2)); !errors.Is(err, ErrOutputTooDeep) {
		t.Fatalf("output %d deep: %v, want ErrOutputTooDeep", jobq.MaxOutputDepth+2, err)
	}
	if err := j.SetOutput([]any{[]any{[]any{1}}}); err != nil || jobq.JSONDepth(j.Output()) != 3 {
		t.Fatalf("a marshalled output: %v, depth %d", err, jobq.JSONDepth(j.Output()))
	}
}
