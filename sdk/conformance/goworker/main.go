// Command goworker is the Go library's conformance worker
// (docs/workers.md, "The conformance worker"): a client.Worker whose one
// handler does what each job's params ask. The conformance suite in the
// parent directory starts it; its settings come from the environment.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jobq/jobq/client"
)

type params struct {
	Action   string          `json:"action"`
	Output   json.RawMessage `json:"output"`
	Error    string          `json:"error"`
	Retry    *bool           `json:"retry"`
	Ms       int             `json:"ms"`
	Lines    []string        `json:"lines"`
	Progress *float64        `json:"progress"`
	Message  string          `json:"message"`
	Bytes    int             `json:"bytes"`
}

var errCanceled = errors.New("canceled")

func handle(ctx context.Context, job *client.WorkerJob) (any, error) {
	var p params
	if err := job.Decode(&p); err != nil {
		return nil, fmt.Errorf("%w: %w", err, client.ErrNoRetry)
	}
	switch p.Action {
	case "succeed":
		if p.Output == nil {
			return nil, nil
		}
		return p.Output, nil
	case "fail":
		if p.Retry != nil && !*p.Retry {
			return nil, client.NoRetry(errors.New(p.Error))
		}
		return nil, errors.New(p.Error)
	case "sleep":
		select {
		case <-ctx.Done():
			return nil, errCanceled
		case <-time.After(time.Duration(p.Ms) * time.Millisecond):
			return map[string]int{"slept": p.Ms}, nil
		}
	case "block":
		<-ctx.Done()
		return nil, errCanceled
	case "log":
		if err := job.Log(ctx, p.Lines...); err != nil {
			return nil, err
		}
		if p.Progress != nil {
			if err := job.Progress(ctx, *p.Progress, p.Message); err != nil {
				return nil, err
			}
		}
		return map[string]int{"logged": len(p.Lines)}, nil
	case "big_output":
		return map[string]string{"data": strings.Repeat("x", p.Bytes)}, nil
	}
	return nil, fmt.Errorf("unknown action %q: %w", p.Action, client.ErrNoRetry)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	types := os.Getenv("JOBQ_TYPES")
	if types == "" {
		types = "conformance"
	}
	w, err := client.NewWorker(client.WorkerConfig{
		Server:          os.Getenv("JOBQ_SERVER"),
		Token:           os.Getenv("JOBQ_WORKER_TOKEN"),
		WorkerID:        os.Getenv("JOBQ_WORKER_ID"),
		Version:         "jobq-go-conformance",
		Concurrency:     envInt("JOBQ_CONCURRENCY", 4),
		ShutdownTimeout: time.Duration(envInt("JOBQ_SHUTDOWN_TIMEOUT_MS", 10000)) * time.Millisecond,
		Logger:          log,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "goworker:", err)
		os.Exit(2)
	}
	for _, t := range strings.Split(types, ",") {
		w.Register(strings.TrimSpace(t), handle)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "goworker:", err)
		os.Exit(1)
	}
}
