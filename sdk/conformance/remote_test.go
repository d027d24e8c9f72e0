package conformance

import (
	"github.com/jobq/jobq/app"
	"github.com/jobq/jobq/service"
)

// workerToken is the suite's worker token, scoped to the suite's job
// types; every worker gets it as JOBQ_WORKER_TOKEN. The replica has no
// admin token, so the suite's own calls (submit, get, cancel) need none.
const workerToken = "wk_conformance_0123456789abcdef"

// remoteTypes declares types remote on the replica (jobq serve
// --remote-type) and gives the workers a token scoped to them.
func remoteTypes(cfg *app.Config, types []string) {
	cfg.Scheduler.RemoteTypes = types
	cfg.WorkerTokens = []service.WorkerCredential{{Token: workerToken, Scope: service.WorkerScope{Types: types}}}
}
