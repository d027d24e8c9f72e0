// Command mutants plants known bugs in jobq one at a time and runs the tests
// that must catch each: `make mutants` (not in CI; minutes per mutant).
//
// It checks out HEAD into a temporary git worktree, runs every listed test
// once on the unmodified code (they must pass, or the table would mean
// nothing), then for each mutant applies its edits (exact text
// replacements, each of which must match exactly once), runs its tests,
// records caught (a test failed) or survived (all passed), and restores the
// tree. A mutant whose edits no longer match, or that does not compile, is
// reported as such, never as caught. The worktree is removed at the end.
//
// A mutant is caught by the first of its checks that fails; later ones run
// only when the earlier ones pass.
//
// Usage: go run ./testbed/mutants [-run REGEXP] [-v]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// edit replaces Old (which must occur exactly once in File) with New.
type edit struct{ File, Old, New string }

// check is one package and the tests in it (a go test -run pattern).
type check struct{ Pkg, Run string }

type mutant struct {
	Name   string
	Bug    string
	Edits  []edit
	Checks []check
}

const gen = "gen/jobqdb/jobs.sql.go"

var mutants = []mutant{
	{
		Name: "renew-by-id", Bug: "1: lease renewal by id alone (owner condition dropped)",
		Edits: []edit{
			{gen, "AND status = 'RUNNING' AND owner = ? AND cancel_requested = 0\nFOR UPDATE SKIP LOCKED", "AND status = 'RUNNING' AND ? IS NOT NULL AND cancel_requested = 0\nFOR UPDATE SKIP LOCKED"},
			{gen, "AND status = 'RUNNING' AND owner = ? AND cancel_requested = 0\n`", "AND status = 'RUNNING' AND ? IS NOT NULL AND cancel_requested = 0\n`"},
		},
		Checks: []check{{"./store/", "^TestLeaseRenewOfLostRunMatchesNothing$"}, {"./scheduler/", "^TestLostRunIsNotRenewedAndItsHandlerCancelled$"}},
	},
	{
		Name: "claim-replica-clock", Bug: "2: skiplocked claim stamps started_at and lease_until from the replica's clock",
		Edits: []edit{
			{gen, "    lease_until = NOW(6) + INTERVAL ? MICROSECOND,\n    started_at = NOW(6),\n    finished_at = NULL,\n    update_time = NOW(6)\nWHERE id IN (/*SLICE:ids*/?) AND status = 'WAITING'",
				"    lease_until = ? + INTERVAL ? MICROSECOND,\n    started_at = ?,\n    finished_at = NULL,\n    update_time = NOW(6)\nWHERE id IN (/*SLICE:ids*/?) AND status = 'WAITING'"},
			{gen, "queryParams = append(queryParams, arg.Owner)\n\tqueryParams = append(queryParams, arg.LeaseUs)\n",
				"now := time.Now().UTC()\n\tqueryParams = append(queryParams, arg.Owner, now)\n\tqueryParams = append(queryParams, arg.LeaseUs, now)\n"},
		},
		Checks: []check{{"./store/", "^TestClaimStampsDatabaseClock$"}},
	},
	{
		Name: "cas-claim-replica-clock", Bug: "2: cas claim stamps started_at and lease_until from the replica's clock",
		Edits: []edit{
			{gen, "    lease_until = NOW(6) + INTERVAL ? MICROSECOND,\n    started_at = NOW(6),\n    finished_at = NULL,\n    update_time = NOW(6)\nWHERE id = ? AND status = 'WAITING' AND attempt = ?",
				"    lease_until = ? + INTERVAL ? MICROSECOND,\n    started_at = ?,\n    finished_at = NULL,\n    update_time = NOW(6)\nWHERE id = ? AND status = 'WAITING' AND attempt = ?"},
			{gen, "jobClaimCAS,\n\t\targ.Owner,\n\t\targ.LeaseUs,\n", "jobClaimCAS,\n\t\targ.Owner,\n\t\ttime.Now().UTC(),\n\t\targ.LeaseUs,\n\t\ttime.Now().UTC(),\n"},
		},
		Checks: []check{{"./store/", "^TestClaimStampsDatabaseClock$"}},
	},
	{
		Name: "hash-without-run_at", Bug: "3: idempotency hash leaves out run_at",
		Edits:  []edit{{"service/service.go", "p.MaxRetry, p.TimeoutMs, runAt})", "p.MaxRetry, p.TimeoutMs, runAt[:0]})"}},
		Checks: []check{{"./httpapi/", "^TestIdempotencyHashCoversEveryField$"}},
	},
	{
		Name: "hash-without-max_retry", Bug: "3: idempotency hash leaves out max_retry",
		Edits:  []edit{{"service/service.go", "p.MaxRetry, p.TimeoutMs, runAt})", "p.TimeoutMs, runAt})"}},
		Checks: []check{{"./httpapi/", "^TestIdempotencyHashCoversEveryField$"}},
	},
	{
		Name: "hash-without-timeout_ms", Bug: "3: idempotency hash leaves out timeout_ms",
		Edits:  []edit{{"service/service.go", "p.MaxRetry, p.TimeoutMs, runAt})", "p.MaxRetry, runAt})"}},
		Checks: []check{{"./httpapi/", "^TestIdempotencyHashCoversEveryField$"}},
	},
	{
		Name: "hash-run_at-offset", Bug: "3: run_at hashed with its UTC offset (same instant, another offset → 409)",
		Edits:  []edit{{"service/service.go", "\t\tt = t.UTC()\n", ""}},
		Checks: []check{{"./httpapi/", "^TestIdempotencyHashCoversEveryField$"}},
	},
	{
		Name: "success-fenced-by-status", Bug: "4: success completion fenced by status alone (attempt term dropped)",
		Edits: []edit{{gen, "SET status = IF(cancel_requested = 1, 'CANCELED', 'SUCCESS'),\n    lease_until = NULL,\n    finished_at = NOW(6),\n    update_time = NOW(6)\nWHERE id = ? AND attempt = ? AND status = 'RUNNING'",
			"SET status = IF(cancel_requested = 1, 'CANCELED', 'SUCCESS'),\n    lease_until = NULL,\n    finished_at = NOW(6),\n    update_time = NOW(6)\nWHERE id = ? AND ? IS NOT NULL AND status = 'RUNNING'"}},
		Checks: []check{{"./store/", "^TestLateSuccessRefusedWhileNextRunIsRunning$"}},
	},
	{
		Name: "batched-success-fenced-by-status", Bug: "4: batched success completion fenced by status alone",
		Edits:  []edit{{"gen/jobqdb/complete_many.sql.go", "WHERE id IN (/*SLICE:ids*/?) AND status = 'RUNNING'\n  AND attempt = ?", "WHERE id IN (/*SLICE:ids*/?) AND status = 'RUNNING'\n  AND ? IS NOT NULL"}},
		Checks: []check{{"./store/", "^TestLateSuccessRefusedWhileNextRunIsRunning$"}},
	},
	{
		Name: "rescue-one-extra", Bug: "5: rescuer allows one extra rescue (retry_times <= max_retry)",
		Edits:  []edit{{gen, "                  WHEN retry_times < max_retry THEN 'WAITING'", "                  WHEN retry_times <= max_retry THEN 'WAITING'"}},
		Checks: []check{{"./store/", "^TestRescueGrantsMaxRetryThenFails$"}},
	},
	{
		Name: "skiplocked-ignores-run_at", Bug: "6: skiplocked claim ignores run_at",
		Edits: []edit{{gen, "FROM job_queue\nWHERE status = 'WAITING' AND lane = 0 AND run_at <= NOW(6)\n  AND job_type NOT IN (SELECT c.job_type FROM job_type_control AS c WHERE c.paused = 1 OR c.max_running > 0)\nORDER BY priority DESC, run_at, id\nLIMIT ?\nFOR UPDATE SKIP LOCKED",
			"FROM job_queue\nWHERE status = 'WAITING' AND lane = 0\n  AND job_type NOT IN (SELECT c.job_type FROM job_type_control AS c WHERE c.paused = 1 OR c.max_running > 0)\nORDER BY priority DESC, run_at, id\nLIMIT ?\nFOR UPDATE SKIP LOCKED"}},
		Checks: []check{{"./scheduler/", "^TestNoExecutionBeforeDue$"}},
	},
	{
		Name: "claim-priority-asc", Bug: "7: skiplocked claim orders priority ASC",
		Edits:  []edit{{gen, "ORDER BY priority DESC, run_at, id\nLIMIT ?\nFOR UPDATE SKIP LOCKED", "ORDER BY priority ASC, run_at, id\nLIMIT ?\nFOR UPDATE SKIP LOCKED"}},
		Checks: []check{{"./scheduler/", "^TestPriorityOrder$"}},
	},
	{
		Name: "scan-priority-asc", Bug: "7: cas scan orders priority ASC",
		Edits:  []edit{{gen, "ORDER BY priority DESC, run_at, id\nLIMIT ?\n`\n\ntype JobScanAvailableRow", "ORDER BY priority ASC, run_at, id\nLIMIT ?\n`\n\ntype JobScanAvailableRow"}},
		Checks: []check{{"./scheduler/", "^TestPriorityOrder$"}},
	},
	{
		Name: "cancel-outcome-success", Bug: "audit: batched success records SUCCESS for a job that ended CANCELED",
		Edits:  []edit{{"gen/jobqdb/complete_many.sql.go", "NOW(6), IF(q.cancel_requested = 1, 'CANCELED', 'SUCCESS'), NULL", "NOW(6), 'SUCCESS', NULL"}},
		Checks: []check{{"./store/", "^TestCancel(BeforeCompletionRecordsCanceled|RaceJobAndAuditAgree)$"}},
	},
	{
		Name: "sleep-params-unbounded", Bug: "params: built-in types accept any ms",
		Edits:  []edit{{"jobtypes/jobtypes.go", "if err != nil || n < 0 || n > b.max {", "if err != nil || n < 0 {"}},
		Checks: []check{{"./httpapi/", "^TestBuiltinParamsValidatedAtSubmit$"}},
	},
	{
		Name: "cas-unguarded", Bug: "sabotage cas-guard: cas claim on status alone (ABA)",
		Edits:  []edit{{gen, "WHERE id = ? AND status = 'WAITING' AND attempt = ?\n`\n\ntype JobClaimCASParams", "WHERE id = ? AND status = 'WAITING' AND ? IS NOT NULL\n`\n\ntype JobClaimCASParams"}},
		Checks: []check{{"./store/", "^TestCASClaimRefusesStaleCandidate$"}},
	},
	{
		Name: "rescue-ignores-lease", Bug: "sabotage rescuer: rescue without the lease condition",
		Edits: []edit{
			{gen, "WHERE id = ? AND attempt = ?\n  AND status = 'RUNNING' AND lease_until < NOW(6)", "WHERE id = ? AND attempt = ?\n  AND status = 'RUNNING'"},
			{gen, "  AND q.status = 'RUNNING' AND q.lease_until < NOW(6)\nFOR UPDATE", "  AND q.status = 'RUNNING'\nFOR UPDATE"},
		},
		Checks: []check{{"./store/", "^TestRescueSkipsLeaseRenewedAfterTheRead$"}},
	},
}

func main() {
	only := flag.String("run", "", "only mutants whose name matches this regexp")
	verbose := flag.Bool("v", false, "print the failing tests' output of each caught mutant")
	flag.Parse()
	if err := run(*only, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		os.Exit(1)
	}
}

func run(only string, verbose bool) error {
	re, err := regexp.Compile(only)
	if err != nil {
		return err
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return fmt.Errorf("not in a git checkout: %w", err)
	}
	repo := strings.TrimSpace(string(top))
	dir, err := os.MkdirTemp("", "jobq-mutants-")
	if err != nil {
		return err
	}
	if out, err := exec.Command("git", "-C", repo, "worktree", "add", "--detach", dir, "HEAD").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("git worktree add: %v\n%s", err, out)
	}
	defer func() {
		if out, err := exec.Command("git", "-C", repo, "worktree", "remove", "--force", dir).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "mutants: git worktree remove %s: %v\n%s", dir, err, out)
		}
	}()
	head, _ := exec.Command("git", "-C", repo, "rev-parse", "--short", "HEAD").Output()
	fmt.Printf("mutants of HEAD %s in %s (removed at the end)\n", strings.TrimSpace(string(head)), dir)

	var selected []mutant
	for _, m := range mutants {
		if re.MatchString(m.Name) {
			selected = append(selected, m)
		}
	}
	// Baseline: every test a selected mutant uses passes on the real code.
	seen := map[check]bool{}
	for _, m := range selected {
		for _, c := range m.Checks {
			if seen[c] {
				continue
			}
			seen[c] = true
			if out, err := goTest(dir, c); err != nil {
				return fmt.Errorf("baseline: %s -run %s fails on the unmodified code:\n%s", c.Pkg, c.Run, out)
			}
		}
	}
	fmt.Printf("baseline: %d tests pass on the unmodified code\n\n", len(seen))

	type row struct {
		m       mutant
		verdict string
		secs    float64
	}
	var rows []row
	caught := 0
	for _, m := range selected {
		start := time.Now()
		verdict, out := try(dir, m)
		if verdict == "caught" {
			caught++
		}
		rows = append(rows, row{m, verdict, time.Since(start).Seconds()})
		fmt.Printf("%-34s %-9s %5.1fs\n", m.Name, verdict, time.Since(start).Seconds())
		if verbose && out != "" {
			fmt.Println(indent(out))
		}
		if out, err := exec.Command("git", "-C", dir, "checkout", "--", ".").CombinedOutput(); err != nil {
			return fmt.Errorf("restore worktree: %v\n%s", err, out)
		}
	}
	fmt.Printf("\n| mutant | planted bug | tests | verdict |\n|---|---|---|---|\n")
	for _, r := range rows {
		var tests []string
		for _, c := range r.m.Checks {
			tests = append(tests, fmt.Sprintf("`%s` %s", c.Pkg, strings.Trim(c.Run, "^$")))
		}
		fmt.Printf("| %s | %s | %s | %s |\n", r.m.Name, r.m.Bug, strings.Join(tests, ", "), r.verdict)
	}
	fmt.Printf("\n%d caught, %d not caught (of %d mutants)\n", caught, len(rows)-caught, len(rows))
	if caught != len(rows) {
		return fmt.Errorf("%d mutants not caught", len(rows)-caught)
	}
	return nil
}

// try applies m's edits in dir and runs its checks: "caught" when a test
// failed, "survived" when all passed, "n/a" when an edit no longer
// matches, "broken" when the mutant does not build.
func try(dir string, m mutant) (verdict, output string) {
	for _, e := range m.Edits {
		path := filepath.Join(dir, e.File)
		b, err := os.ReadFile(path)
		if err != nil {
			return "n/a", err.Error()
		}
		if n := strings.Count(string(b), e.Old); n != 1 {
			return "n/a", fmt.Sprintf("%s: the text to replace occurs %d times, want 1", e.File, n)
		}
		if err := os.WriteFile(path, []byte(strings.Replace(string(b), e.Old, e.New, 1)), 0o644); err != nil {
			return "n/a", err.Error()
		}
	}
	for _, c := range m.Checks {
		out, err := goTest(dir, c)
		if err == nil {
			continue
		}
		if strings.Contains(out, "[build failed]") || strings.Contains(out, "[setup failed]") {
			return "broken", out
		}
		return "caught", out
	}
	return "survived", ""
}

func goTest(dir string, c check) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-run", c.Run, c.Pkg)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > 30 {
		lines = append(lines[:30], "…")
	}
	return "    " + strings.Join(lines, "\n    ")
}
