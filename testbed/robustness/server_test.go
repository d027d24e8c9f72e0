package robustness

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/scheduler/schedulertest"
	"github.com/jobq/jobq/service"
	"github.com/jobq/jobq/store"
	"github.com/jobq/jobq/testbed/faultstore"
)

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestParseServerVersion(t *testing.T) {
	t.Parallel()
	cases := []struct {
		v          string
		mariadb    bool
		major      int
		minor      int
		skipLocked bool
	}{
		{"5.7.44-log", false, 5, 7, false},
		{"8.0.0-dmr", false, 8, 0, false},
		{"8.0.1", false, 8, 0, true},
		{"8.4.3", false, 8, 4, true},
		{"10.5.23-MariaDB-1:10.5.23+maria~ubu2004", true, 10, 5, false},
		{"10.6.0-MariaDB", true, 10, 6, true},
		{"10.11.19-MariaDB-0+deb12u1", true, 10, 11, true},
		{"5.5.5-10.11.6-MariaDB-log", true, 10, 11, true}, // the handshake form some proxies report
		{"5.5.5-10.4.32-MariaDB", true, 10, 4, false},
		{"11.4.2-MariaDB", true, 11, 4, true},
		{"garbage", false, 0, 0, false},
	}
	for _, c := range cases {
		got := store.ParseServerVersion(c.v)
		if got.MariaDB != c.mariadb || got.Major != c.major || got.Minor != c.minor || got.SkipLocked != c.skipLocked {
			t.Errorf("ParseServerVersion(%q) = %+v, want mariadb %v %d.%d skip_locked %v", c.v, got, c.mariadb, c.major, c.minor, c.skipLocked)
		}
	}
}

// TestServerSupport checks detection on the real server and both paths on
// a server without SKIP LOCKED: an explicit skiplocked strategy is refused
// with a clear error; an empty strategy falls back to cas with a log line,
// and jobs still run.
func TestServerSupport(t *testing.T) {
	t.Parallel()
	dsn := testdb.DSN(t)
	st, err := store.Open(context.Background(), dsn, store.PoolConfig{MaxOpen: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	info, err := st.DetectServer(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Major == 0 || info.Description == "" || info != st.Server {
		t.Fatalf("DetectServer = %+v, Open found %+v", info, st.Server)
	}
	t.Logf("server: %s, SKIP LOCKED %v", info.Description, info.SkipLocked)

	reg := scheduler.NewRegistry()
	reg.Register("noop", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error { return nil }))
	var logs syncBuffer
	events := schedulertest.NewRecorder()
	cfg := scheduler.Config{Owner: "old-server", PollInterval: 50 * time.Millisecond, PollJitter: 10 * time.Millisecond,
		Workers: 4, Logger: slog.New(slog.NewTextHandler(&logs, nil)), Observer: events}

	explicit := cfg
	explicit.Strategy = scheduler.StrategySkipLocked
	if _, err := scheduler.New(st, reg, explicit, false); !errors.Is(err, store.ErrSkipLockedUnsupported) ||
		!strings.Contains(err.Error(), "--strategy cas") {
		t.Fatalf("skiplocked on a server without SKIP LOCKED: err = %v, want ErrSkipLockedUnsupported naming --strategy cas", err)
	}

	s, err := scheduler.New(st, reg, cfg, false)
	if err != nil {
		t.Fatalf("empty strategy without SKIP LOCKED: %v", err)
	}
	if s.Config().Strategy != scheduler.StrategyCAS {
		t.Fatalf("strategy = %q, want cas", s.Config().Strategy)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "lacks SKIP LOCKED") {
		t.Fatalf("no log line says why cas was chosen: %q", logs.String())
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	j, _, err := service.New(service.Options{Store: st, WakeFunc: s.Wake}).Submit(context.Background(), apitype.SubmitRequest{JobKey: "on-cas", JobType: "noop"})
	if err != nil {
		t.Fatal(err)
	}
	events.WaitFor(t, scheduler.EventCompleted, schedulertest.Finished(j.ID, jobq.OutcomeSuccess), 20*time.Second)

	// The store itself refuses the skiplocked claim on such a server.
	old, err := store.Open(context.Background(), dsn, store.PoolConfig{MaxOpen: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	old.Server.SkipLocked = false
	if _, err := old.JobClaimSkipLocked(context.Background(), jobq.ClaimParams{Owner: "x", Limit: 1, Lease: time.Second}); !errors.Is(err, store.ErrSkipLockedUnsupported) {
		t.Fatalf("JobClaimSkipLocked on a server without SKIP LOCKED: %v", err)
	}
}

// TestFailedClaimIsAnError makes the claim queries fail — with an error
// that is not retried, then with a deadlock retried on every attempt — and
// checks that the failure shows in the logs (ERROR), in claim_failed events
// (Stats.ClaimErrors) and in the db_error events the metrics count, and that no claim is ever
// reported as an empty result while the queries fail; once they work the
// waiting job runs.
func TestFailedClaimIsAnError(t *testing.T) {
	t.Parallel()
	for _, strategy := range []string{scheduler.StrategySkipLocked, scheduler.StrategyCAS} {
		t.Run(strategy, func(t *testing.T) {
			st := testdb.Store(t)
			fs := faultstore.Wrap(st)
			var failing atomic.Bool
			failing.Store(true)
			broken := &mysql.MySQLError{Number: 1146, Message: "Table 'jobq.job_queue' doesn't exist (injected)"}
			var mode atomic.Int32 // 0: non-retryable error, 1: deadlock
			fail := func(ctx context.Context) error {
				if !failing.Load() {
					return nil
				}
				if mode.Load() == 1 {
					return faultstore.Deadlock
				}
				return broken
			}
			for _, p := range []string{faultstore.ScanBefore, faultstore.ClaimSkipLocked, faultstore.ClaimCASBefore} {
				fs.On(p, fail)
			}
			var logs syncBuffer
			var dbErrors, emptyWhileFailing atomic.Int64
			reg := scheduler.NewRegistry()
			reg.Register("noop", scheduler.HandlerFunc(func(ctx context.Context, job *scheduler.Job) error { return nil }))
			events := schedulertest.NewRecorder()
			cfg := scheduler.Config{Owner: "claim-" + strategy, Strategy: strategy, PollInterval: 50 * time.Millisecond,
				PollJitter: 10 * time.Millisecond, Workers: 4, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
				Observer: scheduler.Observers(events, scheduler.ObserverFunc(func(e scheduler.Event) {
					switch {
					case e.Kind == scheduler.EventDBError && strings.HasPrefix(e.Op, "claim"):
						dbErrors.Add(1)
					case e.Kind == scheduler.EventClaimed && len(e.Jobs) == 0 && failing.Load():
						emptyWhileFailing.Add(1)
					}
				}))}
			s, err := scheduler.New(fs, reg, cfg, st.Server.SkipLocked)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer s.Stop()
			j, _, err := service.New(service.Options{Store: st, WakeFunc: s.Wake}).Submit(context.Background(), apitype.SubmitRequest{JobKey: "k", JobType: "noop"})
			if err != nil {
				t.Fatal(err)
			}
			events.WaitN(t, scheduler.EventClaimFailed, nil, 2, 10*time.Second)
			if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "claim failed") ||
				!strings.Contains(logs.String(), "doesn't exist") {
				t.Fatalf("claim failure not logged as an error: %q", logs.String())
			}
			mode.Store(1) // deadlocks: retried with backoff, still never "empty"
			mark := events.Mark()
			claimErr := func(e scheduler.Event) bool { return strings.HasPrefix(e.Op, "claim") }
			events.WaitAfterN(t, mark, scheduler.EventDBError, claimErr, 5, 10*time.Second)
			if n := emptyWhileFailing.Load(); n != 0 {
				t.Fatalf("%d failed claims were reported as an empty queue", n)
			}
			if got, _ := st.JobGet(context.Background(), j.ID); got.Status != jobq.StateWaiting {
				t.Fatalf("job is %s while every claim fails, want WAITING", got.Status)
			}
			failing.Store(false)
			events.WaitFor(t, scheduler.EventCompleted, schedulertest.Finished(j.ID, jobq.OutcomeSuccess), 20*time.Second)
		})
	}
}
