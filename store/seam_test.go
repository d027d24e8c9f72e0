package store_test

import (
	"github.com/jobq/jobq/scheduler"
	"github.com/jobq/jobq/service"
	"github.com/jobq/jobq/store"
)

// The adapter implements the interfaces the scheduler and the service run
// on. The check lives on the adapter's side of the seam (in a test, so the
// adapter links neither), and neither of them links the driver.
var (
	_ scheduler.Store       = (*store.Store)(nil)
	_ service.Store         = (*store.Store)(nil)
	_ service.OpsStore      = (*store.Store)(nil)
	_ scheduler.RemoteStore = (*store.Store)(nil)
	_ service.WorkflowStore = (*store.Store)(nil)
)
