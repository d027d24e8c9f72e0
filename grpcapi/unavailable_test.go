package grpcapi_test

import (
	"context"
	"testing"

	"connectrpc.com/connect"
	"github.com/go-sql-driver/mysql"

	jobqv1 "github.com/jobq/jobq/gen/jobq/v1"
	"github.com/jobq/jobq/grpcapi"
	"github.com/jobq/jobq/internal/testdb"
	"github.com/jobq/jobq/service"
	"github.com/jobq/jobq/store"
)

// TestWritesRefusedAreUnavailable: a database that refuses writes (a
// read-only session, error 1792) makes SubmitJob, CancelJob and RetryJob
// answer Unavailable, never Internal.
func TestWritesRefusedAreUnavailable(t *testing.T) {
	ctx := context.Background()
	cfg, err := mysql.ParseDSN(testdb.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["tx_read_only"] = "1"
	ro, err := store.Open(ctx, cfg.FormatDSN(), store.PoolConfig{MaxOpen: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	srv := grpcapi.New(service.New(service.Options{Store: ro, KnownTypeFunc: func(string) bool { return true }}), grpcapi.Options{Logger: quietLogger()})
	_, err = srv.SubmitJob(ctx, connect.NewRequest(&jobqv1.SubmitJobRequest{JobKey: "k", JobType: "noop", Params: "{}"}))
	if got := connect.CodeOf(err); got != connect.CodeUnavailable {
		t.Fatalf("SubmitJob: code %v (%v), want Unavailable", got, err)
	}
	_, err = srv.CancelJob(ctx, connect.NewRequest(&jobqv1.CancelJobRequest{Id: 1}))
	if got := connect.CodeOf(err); got != connect.CodeUnavailable {
		t.Fatalf("CancelJob: code %v (%v), want Unavailable", got, err)
	}
	_, err = srv.RetryJob(ctx, connect.NewRequest(&jobqv1.RetryJobRequest{Id: 1}))
	if got := connect.CodeOf(err); got != connect.CodeUnavailable {
		t.Fatalf("RetryJob: code %v (%v), want Unavailable", got, err)
	}
}
