package app

import (
	"context"
	"net/http"

	"github.com/jobq/jobq/auth"
	"github.com/jobq/jobq/grpcapi"
	"github.com/jobq/jobq/service"
)

// withGRPC returns the replica's one handler: JobService (and OpsService, when ops is set) over gRPC,
// gRPC-Web and Connect, gRPC health and server reflection (package grpcapi)
// on their gRPC paths, and api (the HTTP API) on every other path. With
// cfg.AuthTokens, JobService and reflection need the same bearer token as
// the HTTP API (auth.RequireBearer); health checks stay open. It also
// returns the http.Server protocols that serve both on one plain-TCP port
// (HTTP/1.1 and unencrypted HTTP/2 with prior knowledge, i.e. h2c, which
// gRPC clients use) and a hook for http.Server.RegisterOnShutdown that ends
// open WatchJob streams so a graceful shutdown does not wait on them.
// A set cfg.MaxBodyBytes sets the gRPC message limit to that plus 64 KiB
// for the fields around params; else grpcapi.MaxRequestBytesDefault applies.
func withGRPC(api http.Handler, svc *service.Service, ops *service.Ops, workers *service.Workers, ready func(context.Context) error, cfg Config) (http.Handler, *http.Protocols, func()) {
	var maxMsg int64
	if cfg.MaxBodyBytes > 0 {
		maxMsg = cfg.MaxBodyBytes + 64<<10
	}
	g := grpcapi.New(svc, grpcapi.Options{MaxRequestBytes: maxMsg, ReadyFunc: ready, Logger: cfg.Logger, Ops: ops, Workers: workers})
	var gate func(http.Handler) http.Handler
	switch {
	case len(cfg.WorkerTokens) > 0:
		gate = func(h http.Handler) http.Handler {
			return auth.Authenticate(cfg.AuthTokens, cfg.WorkerTokens, cfg.Logger, h)
		}
	case len(cfg.AuthTokens) > 0:
		gate = func(h http.Handler) http.Handler { return auth.RequireBearer(cfg.AuthTokens, cfg.Logger, h) }
	}
	mux := http.NewServeMux()
	mux.Handle("/", api)
	g.Register(mux, gate)
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return mux, p, g.Shutdown
}
