package console

import (
	"errors"
	"net/http"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/service"
)

// periodicData is one schedule's page: its definition (nil when it was
// deleted and only its ledger is left) and one page of its fire ledger,
// newest instant first.
type periodicData struct {
	Name     string
	Periodic *jobq.Periodic
	Fires    []jobq.FireEntry
	// Older is the before= cursor of the next (older) page; "" at the end.
	Older string
}

// periodic shows schedule name and its fire ledger (GET
// /v1/periodic/{name}/history), 50 instants a page; ?before= pages back.
func (c *Console) periodic(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	d := &periodicData{Name: name}
	ctx := r.Context()
	fires, err := c.opts.Ops.FireHistory(ctx, name, "", r.URL.Query().Get("before"))
	if errors.Is(err, service.ErrNotFound) {
		c.fail(w, r, http.StatusNotFound, "Not found", "schedule "+name+" not found and no ledger for it")
		return
	}
	var ans *answer
	if err != nil {
		ans = c.errAnswer(err, "")
	}
	d.Fires = fires
	if len(fires) == service.FireHistoryLimitDefault {
		d.Older = fires[len(fires)-1].Instant.Format(time.RFC3339Nano)
	}
	if p, err := c.opts.Ops.GetPeriodic(ctx, name); err == nil {
		d.Periodic = &p
	} else if !errors.Is(err, service.ErrNotFound) && ans == nil {
		ans = c.errAnswer(err, "")
	}
	status := http.StatusOK
	if ans != nil {
		status = ans.Status
	}
	c.render(w, r, status, "periodic", &page{Title: "Schedule " + name, Nav: "types", Answer: ans, Data: d})
}
