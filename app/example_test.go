package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/app"
	"github.com/jobq/jobq/client"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/scheduler"
)

// The examples read JOBQ_DSN as a program would; the tests' TestMain points
// it at a fresh database.
func TestMain(m *testing.M) { testdb.MainWithExampleDB(m) }

// invoiceHandler sends invoices. Its effect, a row in invoice_sent, is
// written by WorkTx in the transaction that commits the job's fenced
// completion: it commits exactly once, or not at all when the run lost its
// lease (another replica then runs the job again).
type invoiceHandler struct{}

type invoiceParams struct {
	Customer int `json:"customer"`
	Cents    int `json:"cents"`
}

// Work runs first, outside any transaction: the place for slow work
// (rendering a PDF, calling an API). A nil return completes the job;
// an error fails the attempt, retried with backoff while retries are left.
func (invoiceHandler) Work(ctx context.Context, job *scheduler.Job) error {
	var p invoiceParams
	if err := json.Unmarshal(job.Params, &p); err != nil {
		return fmt.Errorf("params: %w: %w", err, scheduler.ErrDiscard) // no retry
	}
	return nil
}

// WorkTx runs after Work returned nil, inside the completion's transaction.
func (invoiceHandler) WorkTx(ctx context.Context, tx jobq.Tx, job *scheduler.Job) error {
	var p invoiceParams
	if err := json.Unmarshal(job.Params, &p); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, "INSERT INTO invoice_sent (job_id, customer, cents) VALUES (?, ?, ?)",
		job.ID, p.Customer, p.Cents)
	return err
}

// Example_ownJobType runs a replica with a job type of its own and submits
// to it with the Go client: one job, then a batch.
func Example_ownJobType() {
	ctx := context.Background()

	reg := scheduler.NewRegistry() // only the types registered here; nil Registry: the built-in ones
	reg.Register("send-invoice", invoiceHandler{})
	r, err := app.Start(ctx, app.Config{
		DSN:      os.Getenv("JOBQ_DSN"), // an existing database, e.g. root@tcp(127.0.0.1:3306)/jobq
		Migrate:  true,                  // create or update jobq's tables
		Listen:   "127.0.0.1:0",         // any free port; r.Addr says which
		Registry: reg,
		Logger:   slog.New(slog.DiscardHandler), // quiet for the example
	})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Stop(ctx) // finishes running jobs, then closes the database
	if _, err := r.Store.DB().ExecContext(ctx, `CREATE TABLE IF NOT EXISTS invoice_sent
		(job_id BIGINT UNSIGNED PRIMARY KEY, customer INT NOT NULL, cents INT NOT NULL)`); err != nil {
		log.Fatal(err)
	}

	c := client.New("http://" + r.Addr)
	job, created, err := c.Submit(ctx, apitype.SubmitRequest{
		JobKey: "invoice-42", JobType: "send-invoice", Params: json.RawMessage(`{"customer":42,"cents":1999}`)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.JobKey, "created:", created, "status:", job.Status)

	// Up to 1,000 jobs in one request; the same job_key and body again is
	// "existing", not a second job.
	batch, err := c.SubmitBatch(ctx, []apitype.SubmitRequest{
		{JobKey: "invoice-43", JobType: "send-invoice", Params: json.RawMessage(`{"customer":43,"cents":500}`)},
		{JobKey: "invoice-44", JobType: "send-invoice", Params: json.RawMessage(`{"customer":44,"cents":750}`)},
		{JobKey: "invoice-42", JobType: "send-invoice", Params: json.RawMessage(`{"customer":42,"cents":1999}`)},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("batch:", batch.Created, "created,", batch.Existing, "existing")

	for _, id := range []uint64{job.ID, batch.Results[0].ID, batch.Results[1].ID} {
		for {
			j, err := c.Get(ctx, id)
			if err != nil {
				log.Fatal(err)
			}
			if j.Status == "SUCCESS" || j.Status == "FAILED" || j.Status == "CANCELED" {
				fmt.Println(j.JobKey, j.Status, "attempt", j.Attempt)
				break
			}
			time.Sleep(50 * time.Millisecond) // the example shows what an API client does: poll the job
		}
	}
	var rows, cents int
	if err := r.Store.DB().QueryRowContext(ctx, "SELECT COUNT(*), SUM(cents) FROM invoice_sent").Scan(&rows, &cents); err != nil {
		log.Fatal(err)
	}
	fmt.Println("invoice_sent:", rows, "rows,", cents, "cents")
	// Output:
	// invoice-42 created: true status: WAITING
	// batch: 2 created, 1 existing
	// invoice-42 SUCCESS attempt 1
	// invoice-43 SUCCESS attempt 1
	// invoice-44 SUCCESS attempt 1
	// invoice_sent: 3 rows, 3249 cents
}

// deploy is a workflow job's handler (docs/workflows.md): it reads the
// outputs its parents recorded.
func deploy(ctx context.Context, job *scheduler.Job) error {
	parents, err := job.Parents(ctx) // job_key, status, output of each parent
	if err != nil {
		return err
	}
	for _, p := range parents {
		fmt.Println(p.JobKey, string(p.Output))
	}
	return job.SetOutput(map[string]string{"url": "https://example.com/1.4.2"})
}

// checkAll fans out (docs/workflows.md): one check per host, and a verify
// job that waits for all of them, written with this run's success.
func checkAll(ctx context.Context, job *scheduler.Job) error {
	hosts := []string{"web-1", "web-2", "web-3"}
	var parts []scheduler.SpawnJob
	var keys []string
	for i, host := range hosts {
		k := fmt.Sprintf("%s-check-%d", job.JobKey, i)
		parts = append(parts, scheduler.SpawnJob{JobKey: k, JobType: "check", Params: json.RawMessage(`{"host":"` + host + `"}`)})
		keys = append(keys, k)
	}
	parts = append(parts, scheduler.SpawnJob{JobKey: job.JobKey + "-verify", JobType: "verify", DependsOn: keys})
	return job.Spawn(parts...) // written with this run's success
}

var _, _ = deploy, checkAll
