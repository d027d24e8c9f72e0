package bench

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jobq/jobq/httpapi"
	"github.com/jobq/jobq/jobtypes"
	"github.com/jobq/jobq/service"
	"github.com/jobq/jobq/store"
)

// apiServer is one in-process jobq HTTP API (the same handler `jobq serve`
// mounts) on a loopback port.
type apiServer struct {
	url string
	srv *http.Server
}

// startAPI serves the jobq API over st on 127.0.0.1:0. wake (may be nil) is
// the local wake-up called after each created job, wakeAt (may be nil) the
// promoter's after each job created SCHEDULED (as app wires them).
func startAPI(st *store.Store, wake func(), wakeAt func(runAt, dbNow time.Time)) (*apiServer, error) {
	// noop for the throughput and latency points, sleep for the capacity
	// model's check run (jobs that take time).
	known := func(t string) bool { return t == jobtypes.Noop || t == jobtypes.Sleep }
	svc := service.New(st, known, wake)
	if wakeAt != nil {
		svc.SetWakeAtFunc(wakeAt)
	}
	h := httpapi.New(svc, httpapi.Options{ReadyFunc: st.Ping, Logger: quietLogger()})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	a := &apiServer{url: "http://" + ln.Addr().String(), srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}
	go func() { _ = a.srv.Serve(ln) }()
	return a, nil
}

func (a *apiServer) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = a.srv.Shutdown(ctx)
}

// quietLogger drops everything below error (replicas' info logs would bury
// the progress display).
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
