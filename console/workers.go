package console

import (
	"fmt"
	"net/http"

	"github.com/jobq/jobq/apitype"
)

// workersData is the workers page: the live remote workers.
type workersData struct {
	Workers []apitype.Worker
	Remote  bool // the replica runs remote job types
}

// workers shows the live remote workers (the API's GET /v1/workers).
func (c *Console) workers(w http.ResponseWriter, r *http.Request) {
	d := &workersData{}
	var ans *answer
	if c.opts.Workers != nil {
		list, err := c.opts.Workers.List(r.Context())
		if err != nil {
			ans = c.errAnswer(err, "")
		}
		d.Workers, d.Remote = list.Workers, len(c.opts.RemoteTypes) > 0
	}
	status := http.StatusOK
	if ans != nil {
		status = ans.Status
	}
	c.render(w, r, status, "workers", &page{Title: "Workers", Nav: "workers", Answer: ans, Data: d})
}

// jobLog is the log shown on a job page: the latest attempt's, first page.
type jobLog struct {
	Attempt int
	Lines   []apitype.LogLine
	More    bool // the attempt has more lines than shown
}

// logOf reads the job's latest attempt log for its page ("" on error: the
// page shows the rest).
func (c *Console) logOf(r *http.Request, id uint64) *jobLog {
	page, err := c.opts.Service.Logs(r.Context(), id, "", "", "")
	if err != nil || len(page.Lines) == 0 {
		return nil
	}
	return &jobLog{Attempt: page.Attempt, Lines: page.Lines, More: len(page.Lines) >= 1000}
}

// progressText formats an execution's progress for the timeline.
func progressText(p *float64, msg string) string {
	if p == nil {
		return ""
	}
	s := fmt.Sprintf("%.0f%%", *p*100)
	if msg != "" {
		s += " · " + msg
	}
	return s
}
