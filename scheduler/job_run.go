package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/jobq/jobq"
)

// runReporter writes what a run reports besides its outcome: log lines and
// progress, fenced by the run (store.JobLogAppend, JobProgressSet).
type runReporter interface {
	JobLogAppend(ctx context.Context, f jobq.Fence, lines []string, check func(jobq.TokenState) error) error
	JobProgressSet(ctx context.Context, r jobq.RunReport, check func(jobq.TokenState) error) error
}

// reportTimeout bounds one Log or Progress write of an in-process handler.
const reportTimeout = 5 * time.Second

// ErrOutputTooLarge is returned by Job.SetOutput for an output over
// jobq.MaxOutputBytes; the output is left as it was.
var ErrOutputTooLarge = fmt.Errorf("jobq: output over %d bytes", jobq.MaxOutputBytes)

// ErrOutputTooDeep is returned by Job.SetOutput for an output nesting
// objects and arrays deeper than jobq.MaxOutputDepth; the output is left as
// it was.
var ErrOutputTooDeep = fmt.Errorf("jobq: output nested deeper than %d objects and arrays", jobq.MaxOutputDepth)

// SetOutput sets the run's output, recorded with its outcome when the
// handler returns nil (the attempt's execution row; the job's output on
// GET). v is marshalled to JSON (a json.RawMessage is taken as is, and
// must be valid JSON); at most jobq.MaxOutputBytes, nested at most
// jobq.MaxOutputDepth deep. Calling it again
// replaces the output.
func (j *Job) SetOutput(v any) error {
	var b []byte
	var err error
	if raw, ok := v.(json.RawMessage); ok {
		if !json.Valid(raw) {
			return errors.New("jobq: output is not valid JSON")
		}
		b = raw
	} else if b, err = json.Marshal(v); err != nil {
		return fmt.Errorf("jobq: output: %w", err)
	}
	if len(b) > jobq.MaxOutputBytes {
		return ErrOutputTooLarge
	}
	if jobq.JSONDepth(b) > jobq.MaxOutputDepth {
		return ErrOutputTooDeep
	}
	j.outMu.Lock()
	j.output = b
	j.outMu.Unlock()
	return nil
}

// Output returns the output set by SetOutput (nil when none).
func (j *Job) Output() json.RawMessage {
	j.outMu.Lock()
	defer j.outMu.Unlock()
	return j.output
}

// Log appends lines to the attempt's log (GET /v1/jobs/{id}/logs, jobq
// logs). A line over jobq.MaxLogLineBytes is cut; jobq.ErrLogFull when the
// attempt's log would pass jobq.MaxLogBytes (nothing appended); an error
// too when the run no longer holds its job. Each call is one database
// write: log steps, not every byte.
func (j *Job) Log(lines ...string) error {
	if j.report == nil || len(lines) == 0 {
		return nil
	}
	cut := make([]string, len(lines))
	for i, l := range lines {
		cut[i] = cutBytes(jobq.SanitizeText(l, jobq.MaxLogLineBytes), jobq.MaxLogLineBytes)
	}
	ctx, cancel := context.WithTimeout(context.Background(), reportTimeout)
	defer cancel()
	return j.report.JobLogAppend(ctx, j.Fence(), cut, nil)
}

// Progress records the attempt's progress (p in [0, 1]) and a message of at
// most jobq.MaxProgressMessageRunes characters (longer is cut); the last
// report is kept.
func (j *Job) Progress(p float64, msg string) error {
	if p < 0 || p > 1 || p != p {
		return fmt.Errorf("jobq: progress must be in [0, 1], got %g", p)
	}
	if j.report == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), reportTimeout)
	defer cancel()
	return j.report.JobProgressSet(ctx, jobq.RunReport{Fence: j.Fence(), Progress: p,
		Message: jobq.SanitizeText(msg, jobq.MaxProgressMessageRunes)}, nil)
}

// cutBytes cuts s to at most n bytes at a rune boundary.
func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
