package console

import (
	"errors"
	"fmt"
	"html"
	"html/template"
	"net/http"
	"strings"

	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/service"
)

// maxGraphJobs bounds the jobs the workflow page draws; a larger workflow
// is listed as a table only.
const maxGraphJobs = 400

// workflowsData is the workflows page: the newest workflows.
type workflowsData struct {
	Workflows []apitype.WorkflowSummary
	Next      string
}

func (c *Console) workflows(w http.ResponseWriter, r *http.Request) {
	d := &workflowsData{}
	var ans *answer
	ws, next, err := c.opts.Service.ListWorkflows(r.Context(), "", r.URL.Query().Get("cursor"))
	if err != nil {
		ans = c.errAnswer(err, "")
	}
	for _, s := range ws {
		d.Workflows = append(d.Workflows, apitype.WorkflowSummaryFrom(s))
	}
	d.Next = next
	status := http.StatusOK
	if ans != nil {
		status = ans.Status
	}
	c.render(w, r, status, "workflows", &page{Title: "Workflows", Nav: "workflows", Answer: ans, Data: d})
}

// workflowData is one workflow's page: its graph and its jobs.
type workflowData struct {
	Workflow apitype.Workflow
	Graph    template.HTML // "" when the workflow is too large to draw
}

func (c *Console) workflow(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	wf, err := c.opts.Service.GetWorkflow(r.Context(), key)
	if errors.Is(err, service.ErrNotFound) {
		c.fail(w, r, http.StatusNotFound, "Not found", "workflow "+key+" not found")
		return
	}
	if err != nil {
		ans := c.errAnswer(err, "")
		c.render(w, r, ans.Status, "workflow", &page{Title: "Workflow", Nav: "workflows", Answer: ans, Data: &workflowData{}})
		return
	}
	d := &workflowData{Workflow: apitype.WorkflowFrom(wf)}
	if len(d.Workflow.Jobs) <= maxGraphJobs {
		d.Graph = graphSVG(d.Workflow)
	}
	c.render(w, r, http.StatusOK, "workflow", &page{Title: "Workflow " + key, Nav: "workflows", Data: d})
}

// graphSVG draws a workflow in layers: a job's layer is the length of the
// longest path from a root to it, so every edge points right. Each job is
// a box coloured by its state (the console's st-* colours) linking to its
// page.
func graphSVG(wf apitype.Workflow) template.HTML {
	const boxW, boxH, gapX, gapY = 170, 34, 60, 14
	idx := make(map[string]int, len(wf.Jobs))
	for i, j := range wf.Jobs {
		idx[j.JobKey] = i
	}
	layer := make([]int, len(wf.Jobs))
	// Jobs come in id order and a parent is inserted before or with its
	// children, but spawned jobs can reorder: relax until stable.
	for changed, rounds := true, 0; changed && rounds <= len(wf.Jobs); rounds++ {
		changed = false
		for i, j := range wf.Jobs {
			for _, p := range j.DependsOn {
				if k, ok := idx[p]; ok && layer[k]+1 > layer[i] {
					layer[i], changed = layer[k]+1, true
				}
			}
		}
	}
	row := make([]int, len(wf.Jobs))
	count := map[int]int{}
	maxLayer, maxRow := 0, 0
	for i := range wf.Jobs {
		row[i] = count[layer[i]]
		count[layer[i]]++
		maxLayer, maxRow = max(maxLayer, layer[i]), max(maxRow, row[i])
	}
	x := func(i int) int { return 10 + layer[i]*(boxW+gapX) }
	y := func(i int) int { return 10 + row[i]*(boxH+gapY) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg id="graph" class="graph" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img" aria-label="workflow graph">`,
		20+(maxLayer+1)*(boxW+gapX), 20+(maxRow+1)*(boxH+gapY))
	for _, e := range wf.Edges {
		p, okp := idx[e.Parent]
		ch, okc := idx[e.Child]
		if !okp || !okc {
			continue
		}
		dash := ""
		if e.OnParentFailure == "run" {
			dash = ` stroke-dasharray="4 3"`
		}
		fmt.Fprintf(&b, `<line class="edge" x1="%d" y1="%d" x2="%d" y2="%d"%s/>`, x(p)+boxW, y(p)+boxH/2, x(ch), y(ch)+boxH/2, dash)
	}
	for i, j := range wf.Jobs {
		st := strings.ToLower(string(j.Status))
		label := j.JobKey
		if r := []rune(label); len(r) > 22 {
			label = string(r[:21]) + "…"
		}
		fmt.Fprintf(&b, `<a href="/ui/jobs/%d" data-job="%s" data-status="%s"><title>%s (%s, attempt %d)</title><rect class="node st-%s" x="%d" y="%d" width="%d" height="%d" rx="5"/><text x="%d" y="%d">%s</text><text class="st" x="%d" y="%d">%s</text></a>`,
			j.ID, html.EscapeString(j.JobKey), st, html.EscapeString(j.JobKey), j.Status, j.Attempt, st, x(i), y(i), boxW, boxH,
			x(i)+8, y(i)+14, html.EscapeString(label), x(i)+8, y(i)+28, j.Status)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every value in it is escaped above
}
