package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/apitype"
	"github.com/jobq/jobq/client"
	"github.com/jobq/jobq/scheduler"
)

// `jobq periodic history` and GET /v1/periodic/{name}/history read the
// fire ledger the replica wrote when it fired a schedule: the instant, its
// fate and the job it enqueued; a bad limit is a 400 naming limit, an
// unknown schedule a 404.
func TestPeriodicHistoryCLI(t *testing.T) {
	_, c := startReplica(t, nil)
	srv := "--server=" + c.BaseURL
	p := decode[apitype.Periodic](t, mustCLI(t, "periodic", "add", "--name", "tick", "--cron", "* * * * * *", "--type", "noop", srv))
	first := p.NextRunAt
	k := jobq.PeriodicKey("tick", first)
	var id uint64
	events(t).WaitFor(t, scheduler.EventClaimed, func(e scheduler.Event) bool {
		for _, j := range e.Jobs {
			if j.JobKey == k {
				id = j.ID
				return true
			}
		}
		return false
	}, 5*time.Second)

	h, err := c.PeriodicHistory(context.Background(), "tick", 1000, first.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if h.Name != "tick" || len(h.History) != 1 || h.NextBefore != nil {
		t.Fatalf("history before %s = %+v, want the first instant only", first.Add(time.Second), h)
	}
	e := h.History[0]
	if !e.Instant.Equal(first) || e.Fate != jobq.FireFired || e.JobID != id || e.Reason != "" || e.Covers != 1 || e.LateMs < 0 {
		t.Fatalf("first instant's entry = %+v, want fired job %d at %s", e, id, first)
	}

	rows := decode[[]apitype.FireEntry](t, mustCLI(t, "periodic", "history", "tick", "--limit", "1", "-o", "json", srv))
	if len(rows) != 1 || rows[0].Fate != jobq.FireFired || rows[0].JobID == 0 || rows[0].Instant.Before(first) {
		t.Fatalf("periodic history --limit 1 = %+v", rows)
	}
	table := mustCLI(t, "periodic", "history", "tick", "-o", "table", srv)
	if !strings.HasPrefix(table, "INSTANT") || !strings.Contains(table, strconv.FormatUint(id, 10)) || !strings.Contains(table, "fired") {
		t.Fatalf("periodic history table:\n%s", table)
	}

	_, err = c.PeriodicHistory(context.Background(), "nope", 0, time.Time{})
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound {
		t.Fatalf("unknown schedule: err = %v, want 404", err)
	}
	for _, q := range []string{"limit=0", "limit=1001", "limit=x"} {
		resp, err := noKeepAlive.Get(c.BaseURL + "/v1/periodic/tick/history?" + q)
		if err != nil {
			t.Fatal(err)
		}
		var body apitype.ErrorBody
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || err != nil || body.Error.Field != "limit" || !strings.Contains(body.Error.Message, "[1, 1000]") {
			t.Fatalf("%s: status %d, error %+v (%v), want 400 naming limit", q, resp.StatusCode, body.Error, err)
		}
	}
}
