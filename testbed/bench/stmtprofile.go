package bench

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jobq/jobq/store"
)

// StmtProfile times a pool's statements by name: a sqlc query by its
// "-- name:" annotation, BEGIN, COMMIT and ROLLBACK as such, any other
// statement by its first words. It is how the concurrency-key bench shows
// where a drain spends its round trips (performance_schema is off on most
// servers the bench runs on, and the global counters count every client).
// The zero value is ready; a nil *StmtProfile records nothing.
type StmtProfile struct {
	mu sync.Mutex
	m  map[string]*StmtStat
}

// StmtStat is one statement name's count, total and slowest round trip
// (sent to answered, lock waits included) and how many of them failed, and
// with which server error numbers (deadlocks 1213, lock wait timeouts 1205).
type StmtStat struct {
	Name   string        `json:"name"`
	Count  int64         `json:"count"`
	Total  time.Duration `json:"total_ns"`
	Max    time.Duration `json:"max_ns"`
	Errors int64         `json:"errors"`
	// Deadlocks and LockWaitTimeouts count the failures with error 1213
	// and 1205.
	Deadlocks        int64 `json:"deadlocks"`
	LockWaitTimeouts int64 `json:"lock_wait_timeouts"`
}

func (p *StmtProfile) add(q string, d time.Duration, err error) {
	if p == nil {
		return
	}
	name := stmtName(q)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]*StmtStat{}
	}
	s := p.m[name]
	if s == nil {
		s = &StmtStat{Name: name}
		p.m[name] = s
	}
	s.Count++
	s.Total += d
	s.Max = max(s.Max, d)
	if err != nil {
		s.Errors++
		switch store.ErrorNumber(err) {
		case 1213:
			s.Deadlocks++
		case 1205:
			s.LockWaitTimeouts++
		}
	}
}

// Reset forgets what was recorded.
func (p *StmtProfile) Reset() {
	p.mu.Lock()
	p.m = nil
	p.mu.Unlock()
}

// Stats returns the statements recorded, most total time first.
func (p *StmtProfile) Stats() []StmtStat {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]StmtStat, 0, len(p.m))
	for _, s := range p.m {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b StmtStat) int { return cmp.Or(cmp.Compare(b.Total, a.Total), strings.Compare(a.Name, b.Name)) })
	return out
}

// stmtName names statement q: its sqlc name, or its first words.
func stmtName(q string) string {
	q = strings.TrimSpace(q)
	if rest, ok := strings.CutPrefix(q, "-- name: "); ok {
		if i := strings.IndexAny(rest, " \n"); i > 0 {
			return rest[:i]
		}
		return rest
	}
	f := strings.Fields(q)
	return strings.Join(f[:min(len(f), 3)], " ")
}

// WriteStmtTable prints stats as a Markdown table: per statement name the
// count, the total, mean and slowest round trip, and the failures.
func WriteStmtTable(w io.Writer, stats []StmtStat, jobs int) {
	fmt.Fprintf(w, "| statement | count | per 1,000 jobs | total s | mean ms | max ms | errors (1213 / 1205) |\n|---|--:|--:|--:|--:|--:|--:|\n")
	for _, s := range stats {
		mean := 0.0
		if s.Count > 0 {
			mean = float64(s.Total.Microseconds()) / float64(s.Count) / 1000
		}
		fmt.Fprintf(w, "| %s | %d | %.1f | %.2f | %.2f | %.1f | %d (%d / %d) |\n", s.Name, s.Count,
			float64(s.Count)*1000/float64(max(jobs, 1)), s.Total.Seconds(), mean, float64(s.Max.Microseconds())/1000,
			s.Errors, s.Deadlocks, s.LockWaitTimeouts)
	}
}
