package bench

import (
	"context"
	"database/sql"
	"io"
	"log/slog"

	"github.com/jobq/jobq/app"
	"github.com/jobq/jobq/metrics"
	"github.com/jobq/jobq/scheduler"
)

// startReplica starts one in-process jobq replica through app.Start (what
// `jobq serve` runs) on db, the point's statement-counting pool: with sc
// its scheduler (nil: API only, as the classic design and the enqueue
// ceiling need), with withAPI its HTTP API on a free loopback port
// (Replica.Addr). The backlog sampler is off so that the replica sends only
// the statements a point measures; the console is off. Stop closes db.
func startReplica(ctx context.Context, db *sql.DB, sc *scheduler.Config, withAPI bool) (*app.Replica, error) {
	cfg := app.Config{DB: db, Listen: "127.0.0.1:0", NoAPI: !withAPI, NoScheduler: sc == nil, NoUI: true,
		Logger: quietLogger(), Metrics: metrics.Options{BacklogInterval: -1}}
	if sc != nil {
		cfg.Scheduler = *sc
	}
	return app.Start(ctx, cfg)
}

// apiURL is r's API base URL.
func apiURL(r *app.Replica) string { return "http://" + r.Addr }

// quietLogger drops everything below error (replicas' info logs would bury
// the progress display).
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
