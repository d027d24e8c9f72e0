package robustness

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/app"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/scheduler/schedulertest"
	"github.com/jobq/jobq/testbed/jobtypes"
)

// TestPoolSmallerThanWorkers runs a replica with 2 database connections and
// 20 workers — handlers that use the pool themselves, transactional
// completions, retries — while 8 clients submit over HTTP. Work must
// degrade, never deadlock, and the replica must keep serving.
func TestPoolSmallerThanWorkers(t *testing.T) {
	t.Parallel()
	dsn := testdb.DSN(t)
	events := schedulertest.NewRecorder()
	r, err := app.Start(context.Background(), app.Config{
		DSN: dsn, Listen: "127.0.0.1:0", PoolMaxOpen: 2, Logger: quiet(), RegisterFunc: jobtypes.RegisterTestbed,
		Scheduler: scheduler.Config{Observer: events, Workers: 20, PollInterval: 50 * time.Millisecond, PollJitter: 10 * time.Millisecond,
			Lease: 5 * time.Second, RescueInterval: time.Second, RetryBackoffBase: 20 * time.Millisecond, Logger: quiet()},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop(context.Background())
	if got := r.Store.DB().Stats().MaxOpenConnections; got != 2 {
		t.Fatalf("pool max open = %d, want 2", got)
	}
	types := []string{`"noop"`, `"effect"`, `"sleep","params":{"ms":5}`, `"flaky","params":{"failures":1}`}
	const clients, perClient = 8, 30
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perClient {
				body := fmt.Sprintf(`{"job_key":"pool-%d-%d","job_type":%s}`, c, i, types[(c+i)%len(types)])
				resp, err := http.Post("http://"+r.Addr+"/v1/jobs", "application/json", bytes.NewBufferString(body))
				if err != nil {
					errs <- err
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					errs <- fmt.Errorf("submit %s: status %d", body, resp.StatusCode)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Every job succeeds (a flaky one on its second attempt); a deadlock
	// shows as the wait's timeout, which lists the completions seen.
	events.WaitN(t, scheduler.EventCompleted, schedulertest.Applied(jobq.OutcomeSuccess), clients*perClient, 60*time.Second)
	select {
	case err := <-r.Err():
		t.Fatalf("the API server stopped: %v", err)
	default:
	}
	st := r.Scheduler.Stats()
	t.Logf("pool 2, workers 20: %d jobs, %d claimed, %d retried, %d db retries; pool waits %d (%s)",
		clients*perClient, st.Claimed, st.Retried, st.DBRetries, r.Store.DB().Stats().WaitCount, r.Store.DB().Stats().WaitDuration)
	resp, err := http.Get("http://" + r.Addr + "/readyz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz after the run: %v %v", resp, err)
	}
	resp.Body.Close()
}
