package conformance

import "github.com/jobq/jobq/app"

// remoteTypes declares types remote on the replica (jobq serve
// --remote-type).
func remoteTypes(cfg *app.Config, types []string) {
	_ = cfg
	_ = types
}
