package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/scheduler/schedulertest"
	"github.com/jobq/jobq/service"
	"github.com/jobq/jobq/store"
)

// FuzzSanitizeText checks that SanitizeText always yields text a utf8mb4
// VARCHAR(2048) accepts: valid UTF-8, no NUL, at most max runes; that text
// already storable passes unchanged; and that it is idempotent.
func FuzzSanitizeText(f *testing.F) {
	f.Add("plain", 10)
	f.Add("🙂🙂🙂", 2)
	f.Add("a\x00b\xffc\xed\xa0\x80", 5)
	f.Add(strings.Repeat("é", 3000), jobq.MaxErrorRunes)
	f.Fuzz(func(t *testing.T, s string, max int) {
		if max < 1 || max > 4096 {
			max = jobq.MaxErrorRunes
		}
		out := jobq.SanitizeText(s, max)
		if !utf8.ValidString(out) || strings.IndexByte(out, 0) >= 0 || utf8.RuneCountInString(out) > max {
			t.Fatalf("SanitizeText(%q, %d) = %q: not storable", s, max, out)
		}
		if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 && utf8.RuneCountInString(s) <= max && out != s {
			t.Fatalf("SanitizeText changed storable text %q to %q", s, out)
		}
		if again := jobq.SanitizeText(out, max); again != out {
			t.Fatalf("not idempotent: %q → %q", out, again)
		}
	})
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestFailureAlwaysRecorded runs handlers whose errors are too long,
// invalid UTF-8, full of NUL bytes or 4-byte characters, or panics, through
// the real scheduler and database. Each failure must be recorded (the job
// ends FAILED, last_error and the execution row hold the sanitised text) and
// each handler — whose side effect is counted — must run exactly
// max_retry+1 times: bookkeeping never turns into a rescue-and-rerun loop.
func TestFailureAlwaysRecorded(t *testing.T) {
	st := testdb.Store(t)
	huge := strings.Repeat("🙂", 100000)
	errs := map[string]string{
		"long-emoji":   huge,
		"invalid-utf8": "bad \xff\xfe\xed\xa0\x80 bytes" + strings.Repeat("\xc3", 5000),
		"nul":          "a\x00b\x00\x00c",
		"mixed":        strings.Repeat("x\x00🙂\xff", 3000),
		"panic":        "",
		"exact-2048":   strings.Repeat("ß", 2048),
	}
	var mu sync.Mutex
	effects := map[string]int{}
	reg := scheduler.NewRegistry()
	reg.Register("failing", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error {
		mu.Lock()
		effects[job.JobKey]++
		mu.Unlock()
		name, _, _ := strings.Cut(job.JobKey, "#")
		if name == "panic" {
			panic(huge + "\x00\xff")
		}
		return errors.New(errs[name])
	}))
	cfg := scheduler.Config{Owner: "enc", PollInterval: 50 * time.Millisecond, PollJitter: 10 * time.Millisecond,
		Lease: time.Second, RescueInterval: 100 * time.Millisecond, RetryBackoffBase: 20 * time.Millisecond,
		Workers: 8, Logger: quiet(), ShutdownTimeout: 5 * time.Second}
	events := schedulertest.NewRecorder()
	cfg.Observer = events
	s, err := scheduler.New(st, reg, cfg, st.Server.SkipLocked)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	svc := service.New(service.Options{Store: st, WakeFunc: s.Wake})
	var keys []string
	ids := map[string]uint64{}
	for name := range errs {
		for _, maxRetry := range []int{0, 1} {
			key := fmt.Sprintf("%s#%d", name, maxRetry)
			mr := maxRetry
			job, _, err := svc.Submit(context.Background(), apitype.SubmitRequest{JobKey: key, JobType: "failing", MaxRetry: &mr})
			if err != nil {
				t.Fatalf("submit %s: %v", key, err)
			}
			keys = append(keys, key)
			ids[key] = job.ID
		}
	}
	ctx := context.Background()
	for _, key := range keys {
		// Its last attempt's failure recorded (FAILED, no retry left).
		events.WaitFor(t, scheduler.EventCompleted, schedulertest.Finished(ids[key], jobq.OutcomeFailed), 30*time.Second)
		j, err := st.JobGetByKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		want := j.MaxRetry + 1
		if j.Attempt != want || j.RetryTimes != j.MaxRetry {
			t.Errorf("%s: attempt %d, retry_times %d; want %d attempts", key, j.Attempt, j.RetryTimes, want)
		}
		checkStored(t, key+" last_error", j.LastError)
		ex, err := st.JobExecutions(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(ex) != want {
			t.Fatalf("%s: %d execution rows, want %d", key, len(ex), want)
		}
		for _, e := range ex {
			if e.Outcome != jobq.OutcomeFailed {
				t.Errorf("%s attempt %d: outcome %q, want FAILED", key, e.Attempt, e.Outcome)
			}
			checkStored(t, key+" execution error", e.Error)
		}
	}
	// A FAILED job is terminal: nothing can rescue or re-run it, so the
	// counts read now are final.
	mu.Lock()
	defer mu.Unlock()
	for _, key := range keys {
		want := 1
		if strings.HasSuffix(key, "#1") {
			want = 2
		}
		if effects[key] != want {
			t.Errorf("%s: handler ran %d times, want %d", key, effects[key], want)
		}
	}
	if got := s.Stats().Stale; got != 0 {
		t.Errorf("%d stale completions: a completion failed to commit", got)
	}
}

func checkStored(t *testing.T, what, s string) {
	t.Helper()
	if s == "" {
		t.Errorf("%s is empty", what)
	}
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 || utf8.RuneCountInString(s) > jobq.MaxErrorRunes {
		t.Errorf("%s is not sanitised: %d runes, valid %v", what, utf8.RuneCountInString(s), utf8.ValidString(s))
	}
}

// TestCharsetForcedToUTF8MB4 opens the store with a DSN asking for latin1
// and checks that 4-byte characters still round-trip: NormalizeDSN forces
// utf8mb4.
func TestCharsetForcedToUTF8MB4(t *testing.T) {
	dsn := testdb.DSN(t)
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	st, err := store.Open(context.Background(), dsn+sep+"charset=latin1", store.PoolConfig{MaxOpen: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var cs string
	if err := st.DB().QueryRow("SELECT @@character_set_connection").Scan(&cs); err != nil || cs != "utf8mb4" {
		t.Fatalf("character_set_connection = %q (%v), want utf8mb4", cs, err)
	}
	key := "latin1-dsn-🙂𝄞"
	params := `{"e":"👍🏽"}`
	svc := service.New(service.Options{Store: st})
	j, _, err := svc.Submit(context.Background(), apitype.SubmitRequest{JobKey: key, JobType: "noop", Params: []byte(params)})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	got, err := st.JobGet(context.Background(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.JobKey != key || string(got.Params) != params {
		t.Fatalf("round trip: %q %s, want %q %s", got.JobKey, got.Params, key, params)
	}
	var raw sql.NullString
	if err := st.DB().QueryRow("SELECT HEX(job_key) FROM job_queue WHERE id = ?", j.ID).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%X", key); raw.String != want {
		t.Fatalf("stored bytes %s, want %s", raw.String, want)
	}
}
