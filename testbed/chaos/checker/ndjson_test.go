package checker

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"github.com/jobq/jobq"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/*.ndjson from shippedHistories")

// shippedHistories are the hand-built histories shipped in testdata: a
// clean one and, for every check, one that fails it. want is the exact
// violation counts Check must report (some checks co-fire by design: a
// stuck job is lost too).
var shippedHistories = map[string]struct {
	build func() *builder
	want  map[string]int
}{
	"clean": {func() *builder {
		b := newBuilder()
		for i := uint64(1); i <= 5; i++ {
			b.ok(i, int(i)*100, fmt.Sprintf("replica-%d.1", i%3+1))
		}
		// A rescue after a kill, the zombie's completion refused.
		b.job(6, 700, StatusSuccess, 2, 3300)
		b.exec(6, 1, "replica-1.1", 710, 2800, OutcomeStale)
		b.exec(6, 2, "replica-2.1", 3000, 3300, OutcomeSuccess)
		b.effect(6, 1, EffectNonTx, "replica-1.1", 720)
		b.effect(6, 2, EffectNonTx, "replica-2.1", 3010)
		b.effect(6, 2, EffectTx, "replica-2.1", 3300)
		b.h.Faults = []Fault{{Kind: "kill", Target: "replica-1", Owner: "replica-1.1", Start: at(750), End: at(1750)}}
		return b
	}, map[string]int{}},
	CheckRateLimitExceeded: {func() *builder {
		// A limit of 2 starts per 1 s: jobs 1–3 start at 10, 410 and 810 ms
		// (3 in one second: one too many), job 4 at 1510 (the window from
		// 510 holds 2: allowed).
		b := newBuilder()
		for i, c := range []int{0, 400, 800, 1500} {
			b.ok(uint64(i+1), c, fmt.Sprintf("replica-%d.1", i%2+1))
		}
		b.h.RateLimits = []RateLimit{{JobType: "effect", Starts: 2, Period: time.Second}}
		return b
	}, map[string]int{CheckRateLimitExceeded: 1}},
	CheckRateLimitExceeded + ".per_key": {func() *builder {
		// A limit of 2 starts per 1 s per rate key: keys a and b each
		// start 2 in the first second (4 of the type: allowed, per key),
		// then a third of key a at 810 ms: one too many.
		return perKeyStarts(true, 0, 400, 800)
	}, map[string]int{CheckRateLimitExceeded: 1}},
	CheckLost: {func() *builder {
		b := newBuilder()
		b.ok(1, 100, "replica-1.1")
		b.job(2, 200, StatusWaiting, 0, -1)
		b.h.Submits = append(b.h.Submits, Submit{Key: key(4), SentAt: at(400), Err: "connection refused"})
		return b
	}, map[string]int{CheckLost: 1}},
	CheckAckedMissing: {func() *builder {
		b := newBuilder()
		b.ok(1, 100, "replica-1.1")
		b.h.Submits = append(b.h.Submits, Submit{Key: key(3), JobID: 3, Replica: "replica-2", SentAt: at(300), AckedAt: at(300)})
		return b
	}, map[string]int{CheckAckedMissing: 1}},
	CheckStuck: {func() *builder {
		b := newBuilder()
		b.ok(1, 100, "replica-1.1")
		j := b.job(2, 200, StatusRunning, 1, -1)
		j.Owner, j.LeaseUntil = "replica-2.1", atp(2210)
		b.exec(2, 1, "replica-2.1", 210, -1, "")
		return b
	}, map[string]int{CheckStuck: 1, CheckLost: 1}},
	CheckTxDuplicate: {func() *builder {
		b := newBuilder()
		b.ok(1, 100, "replica-1.1")
		b.effect(1, 1, EffectTx, "replica-1.1", 250)
		return b
	}, map[string]int{CheckTxDuplicate: 1}},
	CheckOverlap: {func() *builder {
		b := newBuilder()
		b.job(2, 200, StatusSuccess, 2, 3500)
		b.exec(2, 1, "replica-1.1", 210, 3000, OutcomeLeaseExpired)
		b.exec(2, 2, "replica-2.1", 2500, 3500, OutcomeSuccess)
		b.effect(2, 2, EffectTx, "replica-2.1", 3500)
		b.h.Faults = []Fault{{Kind: "kill", Target: "replica-1", Owner: "replica-1.1", Start: at(400), End: at(1400)}}
		return b
	}, map[string]int{CheckOverlap: 1}},
	CheckStaleAccepted: {func() *builder {
		b := newBuilder()
		b.job(2, 200, StatusSuccess, 2, 5600)
		b.exec(2, 1, "replica-1.1", 210, 2700, OutcomeLeaseExpired)
		b.exec(2, 2, "replica-2.1", 3000, 6000, OutcomeStale)
		b.effect(2, 1, EffectTx, "replica-1.1", 5600)
		b.h.Faults = []Fault{{Kind: "pause", Target: "replica-1", Owner: "replica-1.1", Start: at(400), End: at(5500)}}
		return b
	}, map[string]int{CheckStaleAccepted: 1}},
	CheckPhantom: {func() *builder {
		b := newBuilder()
		b.ok(1, 100, "replica-1.1")
		b.h.Jobs = append(b.h.Jobs, Job{ID: 9, Key: "not-submitted", Status: StatusSuccess, CreateTime: at(100), FinishedAt: atp(200)})
		return b
	}, map[string]int{CheckPhantom: 1}},
	CheckPoison: {func() *builder {
		b := newBuilder()
		j := b.job(2, 200, StatusFailed, 3, 7000)
		j.Type, j.MaxRetry = PoisonType, 1
		b.h.Submits[0].Type = PoisonType
		b.exec(2, 1, "replica-1.1", 210, 2800, OutcomeLeaseExpired)
		b.exec(2, 2, "replica-2.1", 3000, 6000, OutcomeLeaseExpired)
		b.exec(2, 3, "replica-3.1", 6500, 7000, OutcomeLeaseExpired)
		b.h.Faults = []Fault{
			{Kind: "crash", Target: "replica-1", Owner: "replica-1.1", Start: at(300), End: at(1300)},
			{Kind: "crash", Target: "replica-2", Owner: "replica-2.1", Start: at(3100), End: at(4100)},
			{Kind: "crash", Target: "replica-3", Owner: "replica-3.1", Start: at(6600), End: at(7600)},
		}
		return b
	}, map[string]int{CheckPoison: 1}},
	CheckClaimedEarly: {func() *builder {
		b := newBuilder()
		b.job(2, 200, StatusSuccess, 3, 2400)
		b.exec(2, 1, "replica-1.1", 210, 1000, OutcomeFailed)
		b.exec(2, 2, "replica-2.1", 1500, 2000, OutcomeFailed)
		b.exec(2, 3, "replica-3.1", 2100, 2400, OutcomeSuccess)
		b.h.Executions[0].DueAt, b.h.Executions[1].DueAt, b.h.Executions[2].DueAt = atp(200), atp(1200), atp(2300)
		b.effect(2, 3, EffectTx, "replica-3.1", 2400)
		return b
	}, map[string]int{CheckClaimedEarly: 1}},
	CheckWorkAfterLoss: {func() *builder { return leaseLossHistory(5600) }, map[string]int{CheckWorkAfterLoss: 1}},
	CheckUnexplainedRescue: {func() *builder {
		b := rescueHistory()
		b.h.Effects = slices.DeleteFunc(b.h.Effects, func(e Effect) bool { return e.Kind == EffectEnd })
		return b
	}, map[string]int{CheckUnexplainedRescue: 1}},
	CheckUnexplainedRelease: {func() *builder {
		b := releaseHistory("released: its lease ran out before the handler started")
		b.h.Stopped = at(2400)
		return b
	}, map[string]int{CheckUnexplainedRelease: 1}},
	CheckLateCompletionAccepted: {func() *builder {
		b := newBuilder()
		b.remoteOK(1, 0, wA)
		b.pausedWorker(2, 200, AckApplied)
		return b
	}, map[string]int{CheckLateCompletionAccepted: 1, CheckAppliedTwice: 1, CheckLostAfterAck: 1}},
	CheckAppliedTwice: {func() *builder {
		b := newBuilder()
		b.remoteOK(1, 0, wA)
		b.ack(1, 1, wA, "failure", 400, 200, AckApplied, true)
		return b
	}, map[string]int{CheckAppliedTwice: 1, CheckLostAfterAck: 1}},
	CheckWorkerOverlap: {func() *builder {
		b := newBuilder()
		b.job(1, 0, StatusSuccess, 2, 3200)
		b.exec(1, 1, wA, 10, 3000, OutcomeLeaseExpired)
		b.exec(1, 2, wB, 2700, 3200, OutcomeSuccess)
		b.ack(1, 2, wB, "success", 3195, 200, AckApplied, true)
		b.h.Faults = append(b.h.Faults, Fault{Kind: "worker-kill", Target: "go-1", Owner: wA, Start: at(100), End: at(2100)})
		return b
	}, map[string]int{CheckWorkerOverlap: 1, CheckOverlap: 1}},
	CheckLostAfterAck: {func() *builder {
		b := newBuilder()
		b.remoteOK(1, 0, wA)
		b.remoteOK(2, 10, wB)
		b.h.Jobs[1].Status, b.h.Jobs[1].FinishedAt = StatusWaiting, nil
		return b
	}, map[string]int{CheckLostAfterAck: 1, CheckLost: 1}},
	CheckMissingExecution: {func() *builder {
		b := newBuilder()
		b.job(1, 0, StatusSuccess, 2, 3000)
		b.exec(1, 2, "b", 2600, 3000, OutcomeSuccess)
		return b
	}, map[string]int{CheckMissingExecution: 1}},
	CheckStatusVsLastExecution: {func() *builder {
		b := newBuilder()
		b.job(4, 400, StatusFailed, 1, 1500)
		b.exec(4, 1, "replica-1.1", 410, 1500, OutcomeSuccess)
		return b
	}, map[string]int{CheckStatusVsLastExecution: 1}},
	CheckRerunAfterSuccess: {func() *builder {
		b := rescueHistory()
		b.h.Faults = []Fault{{Kind: "read-only", Start: at(300), End: at(1000), Detail: "read_only=1 for 700ms"}}
		b.h.Executions[1].Outcome = OutcomeStale
		return b
	}, map[string]int{CheckRerunAfterSuccess: 1}},
	CheckFailedAfterSuccess: {func() *builder {
		b := newBuilder()
		j := b.job(1, 100, StatusFailed, 1, 2600)
		j.MaxRetry, j.LastError = 0, "lease expired"
		b.exec(1, 1, "replica-1.1", 110, 2600, OutcomeLeaseExpired)
		b.effect(1, 1, EffectNonTx, "replica-1.1", 120)
		b.effect(1, 1, EffectEnd, "replica-1.1", 400)
		b.h.Faults = []Fault{{Kind: "read-only", Start: at(300), End: at(1000)}}
		return b
	}, map[string]int{CheckFailedAfterSuccess: 1, CheckUnexplainedRescue: 1}},
	CheckKeyOverlap: {func() *builder {
		b := keyBuilder()
		b.h.Executions[1].StartedAt = at(150) // job 2 claimed while job 1 of its key ran
		return b
	}, map[string]int{CheckKeyOverlap: 1}},
	// The workflow checks, on the diamond 1 → {2, 3} → 4 of workflow_test.go.
	CheckChildBeforeParentSuccess: {func() *builder {
		b := wfBuilder()
		b.h.Executions[3].StartedAt = at(450) // job 4 claimed before its parents 2 and 3 succeeded at 500
		return b
	}, map[string]int{CheckChildBeforeParentSuccess: 2}},
	CheckChildRunTwice: {func() *builder {
		b := wfBuilder()
		b.h.Jobs[3].Attempt = 2
		b.exec(4, 2, "r2", 900, 1000, OutcomeSuccess)
		return b
	}, map[string]int{CheckChildRunTwice: 1, CheckStaleAccepted: 1}},
	CheckStuckWaitingOnDoneParents: {func() *builder {
		b := wfBuilder()
		// Job 4 never unblocked although 2 and 3 succeeded.
		b.h.Jobs[3].Status, b.h.Jobs[3].Attempt, b.h.Jobs[3].FinishedAt = StatusBlocked, 0, nil
		b.h.Executions = b.h.Executions[:3]
		b.h.Effects = b.h.Effects[:6]
		return b
	}, map[string]int{CheckStuckWaitingOnDoneParents: 1, CheckLost: 1}},
	CheckFireMissing: {func() *builder {
		// The misfire row of an instant was never written.
		b := schedBuilder()
		f := b.h.Schedules[0].Fires
		b.h.Schedules[0].Fires = append(f[:3], f[4:]...)
		return b
	}, map[string]int{CheckFireMissing: 1}},
	CheckFireDoubled: {func() *builder {
		// A second job for one instant.
		b := schedBuilder()
		b.h.Jobs = append(b.h.Jobs, Job{ID: 4, Key: jobq.PeriodicKey("tick", at(2000)), Type: "effect", Status: StatusSuccess,
			Attempt: 1, MaxRetry: 3, CreateTime: at(2100), FinishedAt: atp(2300)})
		b.exec(4, 1, "replica-2.1", 2110, 2300, OutcomeSuccess)
		b.h.Submits = append(b.h.Submits, Submit{Key: b.h.Jobs[3].Key, Type: "effect", JobID: 4, SentAt: at(2100), AckedAt: at(2100)})
		return b
	}, map[string]int{CheckFireDoubled: 1}},
	CheckRanAfterParentFailed: {func() *builder {
		b := wfBuilder()
		b.h.Jobs[1].Status = StatusFailed
		b.h.Executions[1].Outcome = OutcomeFailed
		b.h.Effects = slices.Delete(b.h.Effects, 3, 4) // a failed attempt commits no tx effect
		return b
	}, map[string]int{CheckRanAfterParentFailed: 1}},
}

// expectLine is the comment a shipped history starts with: the violations
// Check must find in it.
func expectLine(want map[string]int) string {
	var parts []string
	for _, c := range append([]string{}, Checks()...) {
		if n, ok := want[c]; ok {
			parts = append(parts, fmt.Sprintf("%s=%d", c, n))
		}
	}
	if len(parts) == 0 {
		return "# expect: valid"
	}
	return "# expect: " + strings.Join(parts, " ")
}

func parseExpect(t *testing.T, b []byte) map[string]int {
	t.Helper()
	first, _, _ := bytes.Cut(b, []byte("\n"))
	s, ok := strings.CutPrefix(string(first), "# expect: ")
	if !ok {
		t.Fatalf("first line %q: want \"# expect: …\"", first)
	}
	want := map[string]int{}
	if s == "valid" {
		return want
	}
	for _, f := range strings.Fields(s) {
		c, n, _ := strings.Cut(f, "=")
		k, err := strconv.Atoi(n)
		if err != nil {
			t.Fatalf("expect %q: %v", f, err)
		}
		want[c] = k
	}
	return want
}

// TestShippedHistories judges every testdata/*.ndjson: the clean one is
// valid, each other finds exactly the violations its first line names,
// and every check has one. With -update they are rewritten first.
func TestShippedHistories(t *testing.T) {
	if *update {
		for name, sh := range shippedHistories {
			var buf bytes.Buffer
			buf.WriteString(expectLine(sh.want) + "\n")
			if err := WriteNDJSON(&buf, sh.build().h); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join("testdata", name+".ndjson"), buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	files, err := filepath.Glob("testdata/*.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".ndjson")
		have[name] = true
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			want := parseExpect(t, b)
			check, _, _ := strings.Cut(name, ".") // check.variant: another failing history of check
			if name != "clean" && want[check] == 0 {
				t.Fatalf("%s: expect line %v does not name check %s", f, want, check)
			}
			h, err := ReadNDJSONFile(f)
			if err != nil {
				t.Fatal(err)
			}
			r := Check(h)
			wantExactly(t, r, want)
			if r.Valid != (len(want) == 0) {
				t.Fatalf("valid = %v with violations %v", r.Valid, r.Violations)
			}
		})
	}
	for _, c := range append([]string{"clean"}, Checks()...) {
		if !have[c] {
			t.Errorf("no testdata/%s.ndjson: every check ships a failing history", c)
		}
	}
}

// A history written as NDJSON and read back is the same history: Check
// gives the same Result on both, for every shipped history.
func TestNDJSONRoundTrip(t *testing.T) {
	for name, sh := range shippedHistories {
		h := sh.build().h
		h.SlowRenewals = []SlowRenewal{{Owner: "replica-1.1", At: at(900)}}
		h.Stalls = []Stall{{Owner: "replica-2.1", From: at(1000), To: at(1500)}}
		h.Stopped = at(29000)
		h.Renewals = append(h.Renewals, Renewal{Worker: wA, JobID: 1, Attempt: 1, LeaseUntil: at(2000)})
		var buf bytes.Buffer
		if err := WriteNDJSON(&buf, h); err != nil {
			t.Fatal(err)
		}
		got, err := ReadNDJSON(&buf)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if a, b := Check(h), Check(got); !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: result differs after the round trip:\n%+v\n%+v", name, a, b)
		}
		if got.Lease != h.Lease || got.RescueInterval != h.RescueInterval || !got.Start.Equal(h.Start) || !got.End.Equal(h.End) ||
			len(got.Jobs) != len(h.Jobs) || len(got.Executions) != len(h.Executions) || len(got.Effects) != len(h.Effects) ||
			len(got.Faults) != len(h.Faults) || len(got.Submits) != len(h.Submits) || len(got.Stalls) != 1 || len(got.SlowRenewals) != 1 || !got.Stopped.Equal(h.Stopped) ||
			len(got.Acks) != len(h.Acks) || len(got.Renewals) != len(h.Renewals) || !reflect.DeepEqual(got.Edges, h.Edges) {
			t.Fatalf("%s: history differs after the round trip:\n%+v\n%+v", name, h, got)
		}
	}
}

// Lines that break the format are refused with the line number and the rule.
func TestNDJSONRejectsBadLines(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"type":"claim","t":"2026-01-02T03:04:05Z","job_id":1}`, `line 1 (claim): needs "job_id" > 0 and "attempt" ≥ 1`},
		{`{"type":"finish","t":"2026-01-02T03:04:05Z","job_id":1,"attempt":1,"outcome":"SUCCESS"}`, "no earlier claim of job 1 attempt 1"},
		{`{"type":"ack","t":"2026-01-02T03:04:05Z","key":"a","job_id":1}`, "an earlier submit"},
		{`{"type":"submit","key":"a"}`, `"t" is required`},
		{`{"type":"nope","t":"2026-01-02T03:04:05Z"}`, "unknown type"},
		{`{"type":"edge","t":"2026-01-02T03:04:05Z","parent":2,"child":2}`, `needs "parent" > 0 and "child" > 0, two different jobs`},
		{`{"type":"edge","t":"2026-01-02T03:04:05Z","parent":1,"child":2,"on_parent_failure":"skip"}`, `on_parent_failure "skip"`},
		{`{"type":"submit","t":"2026-01-02T03:04:05Z","key":"a","colour":1}`, `unknown field "colour"`},
		{"{\"type\":\"claim\",\"t\":\"2026-01-02T03:04:05Z\",\"job_id\":1,\"attempt\":1}\n" +
			`{"type":"finish","t":"2026-01-02T03:04:06Z","job_id":1,"attempt":1,"outcome":"DONE"}`, `line 2 (finish): outcome "DONE"`},
	} {
		_, err := ReadNDJSON(strings.NewReader(tc.in))
		if !errors.Is(err, ErrHistory) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ReadNDJSON(%s) = %v, want ErrHistory with %q", tc.in, err, tc.want)
		}
	}
}

// A history of events only (no meta, no job lines) gets its final job
// states derived: an acknowledged job never claimed is lost, one whose
// attempt is open past the lease is stuck.
func TestNDJSONDerivesJobs(t *testing.T) {
	in := `{"type":"submit","t":"2026-01-02T03:04:00Z","key":"a"}
{"type":"ack","t":"2026-01-02T03:04:00.01Z","key":"a","job_id":1}
{"type":"submit","t":"2026-01-02T03:04:01Z","key":"b"}
{"type":"ack","t":"2026-01-02T03:04:01.01Z","key":"b","job_id":2}
{"type":"claim","t":"2026-01-02T03:04:01.5Z","job_id":2,"attempt":1,"owner":"w1"}
{"type":"submit","t":"2026-01-02T03:04:02Z","key":"c"}
{"type":"ack","t":"2026-01-02T03:04:02.01Z","key":"c","job_id":3}
{"type":"claim","t":"2026-01-02T03:04:02.5Z","job_id":3,"attempt":1,"owner":"w1"}
{"type":"finish","t":"2026-01-02T03:04:03Z","job_id":3,"attempt":1,"outcome":"SUCCESS"}
{"type":"submit","t":"2026-01-02T03:06:00Z","key":"d"}
`
	h, err := ReadNDJSON(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if h.Lease != 30*time.Second || !h.End.Equal(time.Date(2026, 1, 2, 3, 6, 0, 0, time.UTC)) {
		t.Fatalf("lease %v end %v", h.Lease, h.End)
	}
	wantExactly(t, Check(h), map[string]int{CheckLost: 2, CheckStuck: 1})
}

// The CSV adapter: a clean log passes; a log where a job ran twice at once
// and succeeded twice (overlap, and a
// completion accepted from a run that no longer held the job), and one still open long past the lease,
// fails the checks that say so.
func TestCSVAdapter(t *testing.T) {
	for _, tc := range []struct {
		file string
		want map[string]int
	}{
		{"testdata/csv/clean.csv", map[string]int{}},
		{"testdata/csv/failing.csv", map[string]int{CheckOverlap: 1, CheckStaleAccepted: 1, CheckLost: 1, CheckStuck: 1}},
	} {
		f, err := os.Open(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		h, err := ReadCSV(f, 10*time.Second)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		wantExactly(t, Check(h), tc.want)
	}
	_, err := ReadCSV(strings.NewReader("id,begin\n1,2\n"), time.Second)
	if !errors.Is(err, ErrHistory) || !strings.Contains(err.Error(), `has no "job" column`) {
		t.Fatalf("bad header: %v", err)
	}
	_, err = ReadCSV(strings.NewReader("job,start,end\na,2026-01-02T03:04:05Z,2026-01-02T03:04:04Z\n"), time.Second)
	if !errors.Is(err, ErrHistory) || !strings.Contains(err.Error(), `csv line 2: "end" is before "start"`) {
		t.Fatalf("end before start: %v", err)
	}
}

// An attempt recorded as finished before it started (a sabotaged build's
// unfenced write, whose NOW(6) predates the claim it waited behind) is
// written finishing at its start and reads back: the history stays loadable.
func TestNDJSONFinishBeforeStartReadsBack(t *testing.T) {
	fin := at(400)
	h := History{Start: at(0), End: at(1000),
		Jobs:       []Job{{ID: 1, Key: "k", Type: "t", Status: "SUCCESS", Attempt: 1, MaxRetry: 3, CreateTime: at(0), FinishedAt: &fin}},
		Executions: []Execution{{JobID: 1, Attempt: 1, Owner: "r1", StartedAt: at(500), FinishedAt: &fin, Outcome: OutcomeSuccess}}}
	var buf bytes.Buffer
	if err := WriteNDJSON(&buf, h); err != nil {
		t.Fatal(err)
	}
	got, err := ReadNDJSON(&buf)
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	if len(got.Executions) != 1 || got.Executions[0].FinishedAt == nil || !got.Executions[0].FinishedAt.Equal(at(500)) {
		t.Fatalf("executions %+v, want one finishing at its start", got.Executions)
	}
}
