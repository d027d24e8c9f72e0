// Package conformance is the worker protocol's conformance suite
// (docs/workers.md, docs/testing.md): written once in Go, it starts a real
// replica with remote job types behind a recording proxy and drives each
// worker implementation — the Go library (client.Worker, through
// goworker/), `jobq work` (with testdata/exec_worker.sh), and the Python,
// Node and Java libraries (the commands in sdk/README.md) — through the
// protocol's rules as subprocesses. Run it alone with `make sdk-test`;
// `make test` runs it too.
package conformance
