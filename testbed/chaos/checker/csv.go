package checker

import (
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ReadCSV reads a plain execution log — one row per run of a job, with a
// header — into a History, for schedulers that log no more than that.
// Columns (case-insensitive, any order):
//
//   - job (required): the job's id or name in the other scheduler;
//   - start (required): when the run began (its claim);
//   - end: when it ended (empty: still running at the end of the log);
//   - outcome: SUCCESS, FAILED, CANCELED, STALE (a completion the scheduler
//     refused), LEASE_EXPIRED (declared dead and taken back) or RELEASED;
//     lower case accepted; empty means SUCCESS when end is set;
//   - attempt: the run's number (default: 1, 2, 3 … in start order);
//   - worker: who ran it;
//   - submitted: when the job was submitted and acknowledged (default: its
//     first start).
//
// Times are RFC 3339 or Unix epoch milliseconds. Each job becomes an
// acknowledged submit, each row a claim and (with an end) a finish; a run
// that ended SUCCESS, FAILED or CANCELED also gets an "end" effect (its
// work ended then). Final job states are derived (DeriveJobs); lease is the
// other scheduler's lease or timeout (stuck = RUNNING past it).
func ReadCSV(r io.Reader, lease time.Duration) (History, error) {
	cr := csv.NewReader(r)
	cr.TrimLeadingSpace = true
	cr.Comment = '#'
	head, err := cr.Read()
	if err != nil {
		return History{}, fmt.Errorf("%w: csv header: %v", ErrHistory, err)
	}
	col := map[string]int{}
	for i, name := range head {
		col[strings.ToLower(strings.TrimSpace(name))] = i
	}
	for _, need := range []string{"job", "start"} {
		if _, ok := col[need]; !ok {
			return History{}, fmt.Errorf("%w: csv header %q has no %q column (want job,start[,end,outcome,attempt,worker,submitted])", ErrHistory, strings.Join(head, ","), need)
		}
	}
	get := func(rec []string, name string) string {
		if i, ok := col[name]; ok && i < len(rec) {
			return strings.TrimSpace(rec[i])
		}
		return ""
	}
	type row struct {
		start, end  time.Time
		hasEnd      bool
		outcome     string
		attempt     int
		worker      string
		submitted   time.Time
		hasSubmitAt bool
	}
	ids := map[string]uint64{}
	var keys []string
	runs := map[uint64][]row{}
	var first, last time.Time
	seen := func(t time.Time) {
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	line := 1
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		line++
		if err != nil {
			return History{}, fmt.Errorf("%w: csv: %v", ErrHistory, err)
		}
		bad := func(rule string) error { return fmt.Errorf("%w: csv line %d: %s", ErrHistory, line, rule) }
		job := get(rec, "job")
		if job == "" {
			return History{}, bad(`"job" is empty`)
		}
		var w row
		if w.start, err = parseCSVTime(get(rec, "start")); err != nil {
			return History{}, bad(`"start": ` + err.Error())
		}
		seen(w.start)
		if s := get(rec, "end"); s != "" {
			if w.end, err = parseCSVTime(s); err != nil {
				return History{}, bad(`"end": ` + err.Error())
			}
			if w.end.Before(w.start) {
				return History{}, bad(`"end" is before "start"`)
			}
			w.hasEnd = true
			seen(w.end)
		}
		w.outcome = strings.ToUpper(get(rec, "outcome"))
		switch w.outcome {
		case "":
			if w.hasEnd {
				w.outcome = OutcomeSuccess
			}
		case OutcomeSuccess, OutcomeFailed, OutcomeCanceled, OutcomeStale, OutcomeLeaseExpired, OutcomeReleased:
			if !w.hasEnd {
				return History{}, bad(`"outcome" given without "end"`)
			}
		default:
			return History{}, bad(fmt.Sprintf(`"outcome" %q: want SUCCESS, FAILED, CANCELED, STALE, LEASE_EXPIRED or RELEASED`, w.outcome))
		}
		if s := get(rec, "attempt"); s != "" {
			if w.attempt, err = strconv.Atoi(s); err != nil || w.attempt < 1 {
				return History{}, bad(`"attempt" must be an integer ≥ 1`)
			}
		}
		w.worker = get(rec, "worker")
		if s := get(rec, "submitted"); s != "" {
			if w.submitted, err = parseCSVTime(s); err != nil {
				return History{}, bad(`"submitted": ` + err.Error())
			}
			w.hasSubmitAt = true
			seen(w.submitted)
		}
		id, ok := ids[job]
		if !ok {
			id = uint64(len(ids) + 1)
			ids[job] = id
			keys = append(keys, job)
		}
		runs[id] = append(runs[id], w)
	}
	h := History{Lease: lease, RescueInterval: time.Second, Start: first, End: last}
	for i, key := range keys {
		id := uint64(i + 1)
		rs := runs[id]
		slices.SortStableFunc(rs, func(a, b row) int { return a.start.Compare(b.start) })
		sub := rs[0].start
		for _, w := range rs {
			if w.hasSubmitAt {
				sub = w.submitted
				break
			}
		}
		h.Submits = append(h.Submits, Submit{Key: key, JobID: id, SentAt: sub, AckedAt: sub, Tries: 1})
		for n, w := range rs {
			att := w.attempt
			if att == 0 {
				att = n + 1
			}
			x := Execution{JobID: id, Attempt: att, Owner: w.worker, StartedAt: w.start}
			if w.hasEnd {
				end := w.end
				x.FinishedAt, x.Outcome = &end, w.outcome
				switch w.outcome {
				case OutcomeSuccess, OutcomeFailed, OutcomeCanceled:
					h.Effects = append(h.Effects, Effect{JobID: id, Attempt: att, Kind: EffectEnd, Owner: w.worker, CreatedAt: end})
				}
			}
			h.Executions = append(h.Executions, x)
		}
	}
	h.Jobs = DeriveJobs(h)
	return h, nil
}

func parseCSVTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, fmt.Errorf("empty; want RFC 3339 or Unix milliseconds")
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither RFC 3339 nor Unix milliseconds", s)
	}
	return t.UTC(), nil
}
