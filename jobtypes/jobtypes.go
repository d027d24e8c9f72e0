// Package jobtypes holds jobq's built-in job types: noop, sleep and flaky,
// which every replica registers (Register). The testbed's effect and poison
// live in testbed/jobtypes and are registered only where the testbed asks.
package jobtypes

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq/scheduler"
)

// Built-in job type names.
const (
	Noop  = "noop"
	Sleep = "sleep"
	Flaky = "flaky"
)

// Params are the optional fields the built-in types read from params.
type Params struct {
	// Ms is how long sleep, flaky and effect run, in milliseconds.
	Ms int `json:"ms"`
	// Failures is how many first attempts flaky fails (defaults to 1).
	Failures *int `json:"failures"`
}

// Bounds of the built-in types' params, checked at submit (ValidateParams).
const (
	// MaxMs is the longest run sleep, flaky and effect accept: 24 h.
	MaxMs = 86_400_000
	// MaxFailures is the most first attempts flaky may fail.
	MaxFailures = 1000
)

// ValidateParams checks the params sleep, flaky and effect read: ms an
// integer in [0, MaxMs] and failures an integer in [0, MaxFailures], each
// optional. Other fields are ignored; the built-in types refuse them with
// ValidateFields.
func ValidateParams(raw json.RawMessage) (field, rule string) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return "params", "must be a JSON object"
	}
	for _, b := range []struct {
		name string
		max  int64
		unit string
	}{{"ms", MaxMs, " (milliseconds)"}, {"failures", MaxFailures, ""}} {
		v, ok := m[b.name]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || n < 0 || n > b.max {
			return "params." + b.name, fmt.Sprintf("must be an integer in [0, %d]%s, got %.40s", b.max, b.unit, v)
		}
	}
	return "", ""
}

// ValidateFields is ValidateParams that also refuses a field the type
// does not read (one of known, in the order given): `sleep {"millis":3000}`
// would otherwise be accepted and sleep 0 ms.
func ValidateFields(raw json.RawMessage, known ...string) (field, rule string) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return "params", "must be a JSON object"
	}
	names := make([]string, 0, len(m))
	for k := range m {
		if !slices.Contains(known, k) {
			names = append(names, k)
		}
	}
	if len(names) > 0 {
		slices.Sort(names)
		return "params." + names[0], fmt.Sprintf("unknown field; this job type reads only %s", strings.Join(known, ", "))
	}
	return ValidateParams(raw)
}

// checked is a built-in handler whose params are validated at submit:
// known lists the fields it reads.
type checked struct {
	scheduler.HandlerFunc
	known []string
}

// ValidateParams implements scheduler.ParamsValidator.
func (c checked) ValidateParams(raw json.RawMessage) (string, string) {
	return ValidateFields(raw, c.known...)
}

func parse(job *scheduler.Job) (Params, error) {
	var p Params
	if len(job.Params) > 0 {
		if err := json.Unmarshal(job.Params, &p); err != nil {
			return p, fmt.Errorf("%w: params: %v", scheduler.ErrDiscard, err)
		}
	}
	return p, nil
}

func sleep(ctx context.Context, ms int) error {
	if ms <= 0 {
		return nil
	}
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// Register adds noop, sleep and flaky to reg.
func Register(reg *scheduler.Registry) {
	reg.Register(Noop, scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error { return nil }))
	reg.Register(Sleep, checked{known: []string{"ms"}, HandlerFunc: func(ctx context.Context, job *scheduler.Job) error {
		p, err := parse(job)
		if err != nil {
			return err
		}
		return sleep(ctx, p.Ms)
	}})
	reg.Register(Flaky, checked{known: []string{"ms", "failures"}, HandlerFunc: func(ctx context.Context, job *scheduler.Job) error {
		p, err := parse(job)
		if err != nil {
			return err
		}
		failures := 1
		if p.Failures != nil {
			failures = *p.Failures
		}
		if err := sleep(ctx, p.Ms); err != nil {
			return err
		}
		if job.Attempt <= failures {
			return fmt.Errorf("flaky: attempt %d of the first %d fails by design", job.Attempt, failures)
		}
		return nil
	}})
}
