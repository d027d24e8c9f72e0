package bench

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"regexp"
	"strings"

	jobqsql "github.com/jobq/jobq/sql"
)

// Query is one named statement of sql/queries (sqlc source).
type Query struct {
	Name string // sqlc name, e.g. JobLockAvailable
	SQL  string // body without comments or the trailing ';'
}

// ParseQueries splits sqlc query files into named statements.
func ParseQueries(src string) []Query {
	var out []Query
	var cur *Query
	var body strings.Builder
	flush := func() {
		if cur != nil {
			cur.SQL = strings.TrimSuffix(strings.TrimSpace(body.String()), ";")
			out = append(out, *cur)
		}
		body.Reset()
	}
	sc := bufio.NewScanner(strings.NewReader(src))
	for sc.Scan() {
		line := sc.Text()
		trim := strings.TrimSpace(line)
		if name, ok := strings.CutPrefix(trim, "-- name:"); ok {
			flush()
			f := strings.Fields(name)
			cur = &Query{Name: f[0]}
			continue
		}
		if strings.HasPrefix(trim, "--") || trim == "" {
			continue
		}
		body.WriteString(line)
		body.WriteByte('\n')
	}
	flush()
	return out
}

// SchedulerQueries returns the queries of sql/queries/*.sql embedded in the binary.
func SchedulerQueries() ([]Query, error) {
	files, err := fs.Glob(jobqsql.Queries, "queries/*.sql")
	if err != nil {
		return nil, err
	}
	var out []Query
	for _, f := range files {
		b, err := fs.ReadFile(jobqsql.Queries, f)
		if err != nil {
			return nil, err
		}
		out = append(out, ParseQueries(string(b))...)
	}
	return out, nil
}

// SteadyState lists the statements a replica runs in steady state (scan,
// claim, heartbeat, completion, rescue) with the role the fail rule keys on.
var SteadyState = []struct{ Name, Role string }{
	{"JobScanAvailable", RoleScan}, {"JobIdleProbe", RoleScan}, {"JobLockAvailable", RoleClaim}, {"JobClaimMany", RoleClaim},
	{"JobClaimCAS", RoleClaim}, {"JobGetClaimed", RoleOther},
	{"LeaseRenewSkipLocked", RoleOther}, {"LeaseRenewedIDs", RoleOther}, {"LeaseLockRenewable", RoleOther}, {"LeaseRenewMany", RoleOther}, {"JobCompleteFenced", RoleOther}, {"JobFailFenced", RoleOther},
	{"ExecutionRecord", RoleOther}, {"JobRescueCandidates", RoleOther}, {"ExecutionRecordRescue", RoleOther},
	{"JobRescueExpired", RoleOther}, {"JobScheduledNext", RoleScan}, {"JobLockDue", RoleOther},
	{"JobPromoteLocked", RoleOther},
}

// Roles of steady-state statements.
const (
	RoleScan  = "scan"
	RoleClaim = "claim"
	RoleOther = "other"
)

var (
	argRe   = regexp.MustCompile(`sqlc\.n?arg\((\w+)\)`)
	sliceRe = regexp.MustCompile(`sqlc\.slice\((\w+)\)`)
)

// Bind turns a sqlc statement into literal SQL: sqlc.slice(x) becomes the
// id list (” when ids is empty), sqlc.arg(name) takes args[name] and every bare ? (the LIMIT of
// the steady-state scans) takes args["?"]. A missing name is an error.
func Bind(q string, ids string, args map[string]string) (string, error) {
	var missing []string
	if ids == "" {
		ids = "''" // an empty list as the store binds it: never matches a job type or id
	}
	q = sliceRe.ReplaceAllString(q, ids)
	q = argRe.ReplaceAllStringFunc(q, func(m string) string {
		name := argRe.FindStringSubmatch(m)[1]
		v, ok := args[name]
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	q = strings.ReplaceAll(q, "?", args["?"])
	if len(missing) > 0 {
		return "", fmt.Errorf("bind: no value for %s", strings.Join(missing, ", "))
	}
	return q, nil
}

// PlanJudgeMinRows is the smallest table on which the index check fails a
// run: on fewer rows a full scan of job_queue is often the optimizer's
// right choice, so plans there are reported, not judged.
const PlanJudgeMinRows = 100_000

// PlanRow is one row of EXPLAIN (MySQL and MariaDB column names).
type PlanRow struct {
	Table, Type, Key, Extra string
	Rows                    int64
}

// Plan is the EXPLAIN of one steady-state statement at one table size.
type Plan struct {
	Query      string    `json:"query"`
	Role       string    `json:"role"`
	TableRows  int       `json:"table_rows"`
	SQL        string    `json:"sql"`
	Rows       []PlanRow `json:"plan"`
	Violations []string  `json:"violations"` // non-empty fails the run (scan/claim on the largest table)
	Enforced   bool      `json:"enforced"`
}

// Explain runs EXPLAIN for sqlText and parses the rows by column name.
func Explain(ctx context.Context, db *sql.DB, sqlText string) ([]PlanRow, error) {
	rows, err := db.QueryContext(ctx, "EXPLAIN "+sqlText)
	if err != nil {
		return nil, fmt.Errorf("explain: %w", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []PlanRow
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		var r PlanRow
		for i, c := range cols {
			v := vals[i].String
			switch strings.ToLower(c) {
			case "table":
				r.Table = v
			case "type":
				r.Type = v
			case "key":
				r.Key = v
			case "extra":
				r.Extra = v
			case "rows":
				fmt.Sscan(v, &r.Rows)
			}
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// PlanViolations applies the fail rule to one plan: on job_queue, a full
// table scan (type ALL), a full index scan (type index) or a filesort is a
// violation.
func PlanViolations(rows []PlanRow) []string {
	var v []string
	for _, r := range rows {
		if r.Table != "job_queue" && r.Table != "q" {
			continue
		}
		switch r.Type {
		case "ALL":
			v = append(v, fmt.Sprintf("full table scan of %s (about %d rows)", r.Table, r.Rows))
		case "index":
			v = append(v, fmt.Sprintf("full index scan of %s via %s (about %d rows)", r.Table, r.Key, r.Rows))
		}
		if strings.Contains(r.Extra, "filesort") {
			v = append(v, fmt.Sprintf("filesort on %s", r.Table))
		}
	}
	return v
}

// explainAll EXPLAINs every steady-state statement on the current table
// (with a small backlog present, some of it claimed, so every statement has
// real ids to bind). enforce marks the plans whose violations fail the run
// (scan and claim roles).
func (h *Harness) explainAll(ctx context.Context, enforce bool) ([]Plan, error) {
	qs, err := SchedulerQueries()
	if err != nil {
		return nil, err
	}
	byName := map[string]string{}
	for _, q := range qs {
		byName[q.Name] = q.SQL
	}
	if err := h.env.Reset(ctx); err != nil {
		return nil, err
	}
	if _, err := h.env.Seed(ctx, 1000); err != nil {
		return nil, err
	}
	rows, err := h.env.Admin.QueryContext(ctx, `SELECT id FROM job_queue WHERE id > ? ORDER BY id LIMIT 200`, h.env.BaseID)
	if err != nil {
		return nil, err
	}
	ids, err := scanIDs(rows)
	if err != nil {
		return nil, err
	}
	if _, err := h.env.Admin.ExecContext(ctx, `UPDATE job_queue SET status = 'RUNNING', attempt = 1, owner = 'bench',
		lease_until = NOW(6) WHERE id IN (`+idList(ids[:100])+`)`); err != nil {
		return nil, err
	}
	args := map[string]string{"?": "200", "owner": "'bench'", "lease_us": "30000000", "lease_base": "NOW(6)", "started_at": "NOW(6)", "update_time": "NOW(6)", "id": fmt.Sprint(ids[0]),
		"attempt": "1", "next_status": "'WAITING'", "backoff_us": "1000000", "retry_inc": "1", "last_error": "'x'",
		"outcome": "'SUCCESS'", "error": "NULL", "output": "NULL", "job_id": fmt.Sprint(ids[0])}
	var plans []Plan
	for _, ss := range SteadyState {
		q, ok := byName[ss.Name]
		if !ok {
			return nil, fmt.Errorf("explain: query %s not found in sql/queries", ss.Name)
		}
		text, err := Bind(q, idList(ids[:100]), args)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ss.Name, err)
		}
		pr, err := Explain(ctx, h.env.Admin, text)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ss.Name, err)
		}
		p := Plan{Query: ss.Name, Role: ss.Role, TableRows: h.env.TableRows, SQL: oneLine(text), Rows: pr,
			Violations: PlanViolations(pr), Enforced: enforce && ss.Role != RoleOther}
		plans = append(plans, p)
	}
	return plans, h.env.Reset(ctx)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
