package robustness

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/app"
	"github.com/jobq/jobq/internal/redact"
	"github.com/jobq/jobq/store"
)

// TestDSNPasswordNeverShown opens stores and replicas with DSNs carrying a
// password — a refused port, an unresolvable host, a wrong password on the
// real server, an invalid parameter — and checks that neither the error nor
// anything logged contains the password.
func TestDSNPasswordNeverShown(t *testing.T) {
	t.Parallel()
	const pw = "Pw-5ecret-Do-Not-Log"
	dsns := []string{
		"jobq:" + pw + "@tcp(127.0.0.1:1)/jobq",
		"jobq:" + pw + "@tcp(no-such-host.invalid:3306)/jobq",
		"root:" + pw + "@tcp(127.0.0.1:3306)/",
		"jobq:" + pw + "@tcp(127.0.0.1:1)/jobq?timeout=soon",
		"jobq:" + pw + "@tcp(127.0.0.1:1)/jobq?tls=nonexistent-profile",
		"jobq:" + pw + "@tcp(127.0.0.1:1", // unparseable
	}
	for _, dsn := range dsns {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		_, err := store.Open(ctx, dsn, store.PoolConfig{})
		if err == nil {
			t.Fatalf("Open(%s) succeeded", redact.DSN(dsn))
		}
		if strings.Contains(err.Error(), pw) {
			t.Errorf("store.Open error shows the password: %v", err)
		}
		var logs syncBuffer
		_, err = app.Start(ctx, app.Config{DSN: dsn, Listen: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		cancel()
		if err == nil {
			t.Fatalf("app.Start(%s) succeeded", redact.DSN(dsn))
		}
		if strings.Contains(err.Error(), pw) || strings.Contains(logs.String(), pw) {
			t.Errorf("app.Start shows the password: err %v; logs %q", err, logs.String())
		}
		t.Logf("%s → %v", redact.DSN(dsn), err)
	}
	if r := redact.DSN("u:" + pw + "@tcp(h:1)/d"); strings.Contains(r, pw) || !strings.Contains(r, "***") {
		t.Errorf("RedactDSN = %q", r)
	}
}

// sqlExceptions are the statements built at run time, each safe for the
// reason given: no request data ever reaches them.
var sqlExceptions = map[string]string{
	"store/migrate.go":                 "executes the embedded migration files",
	"testbed/dbprovider/dbprovider.go": "CREATE/DROP DATABASE of a name generated from crypto/rand hex (identifiers cannot be parameters)",
	"store/submit_many.go":             "the multi-row INSERT repeats one constant row of ? placeholders per job; every value is a parameter",
	"store/workers.go":                 "the fenced renewal CASE repeats a constant WHEN ? THEN ? per token and the log INSERT one constant row of ? placeholders per line; every value is a parameter",
	"store/keys.go":                    "the key lock's IN list, the parked pick's UNION ALL and the key upsert repeat one constant ?, (SELECT … = ? … LIMIT ?) or (?, ?, 0, NOW(6)) per key; every value is a parameter",
	"store/workflow.go":                "the edge INSERT repeats one constant row of (?, ?, ?) per dependency; every value is a parameter",
	"store/reaper.go":                  "KILL CONNECTION takes no parameter; the id is an integer read from information_schema, formatted with %d",
	"cmd/jobq/chaos_worker.go":         "remoteworker.Exec runs a job as jobq work does; it is not a database call",
}

// replicaDirs are the packages a replica runs (jobq serve); the harnesses
// (bench, chaos, loadtest, demo) run statements of their own making against
// test databases and take no request data.
var replicaDirs = []string{"store", "scheduler", "service", "httpapi", "grpcapi", "app", "jobtypes", "metrics", "testbed/dbprovider", "testbed/faultstore", "cmd"}

// TestSQLIsParameterised reads every non-test Go file of the replica's
// packages and checks that each database call's statement is a string
// literal or a constant, so values can only travel as parameters. The files
// in sqlExceptions are the documented exceptions. (gen/ is sqlc output:
// constants with ? placeholders.)
func TestSQLIsParameterised(t *testing.T) {
	t.Parallel()
	root := "../.."
	methods := map[string]int{"ExecContext": 1, "QueryContext": 1, "QueryRowContext": 1, "PrepareContext": 1,
		"Exec": 0, "Query": 0, "QueryRow": 0, "Prepare": 0}
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			dir := filepath.ToSlash(rel)
			if rel == "." || slices.ContainsFunc(replicaDirs, func(r string) bool {
				return dir == r || strings.HasPrefix(dir, r+"/") || strings.HasPrefix(r, dir+"/")
			}) {
				if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
					return filepath.SkipDir
				}
				return nil
			}
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return nil // a file mid-edit elsewhere is not this test's business
		}
		consts := map[string]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			if g, ok := n.(*ast.GenDecl); ok && g.Tok == token.CONST {
				for _, s := range g.Specs {
					for _, name := range s.(*ast.ValueSpec).Names {
						consts[name.Name] = true
					}
				}
			}
			return true
		})
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			idx, ok := methods[sel.Sel.Name]
			if !ok || len(call.Args) <= idx {
				return true
			}
			checked++
			if constantString(call.Args[idx], consts) {
				return true
			}
			if _, ok := sqlExceptions[filepath.ToSlash(rel)]; ok {
				return true
			}
			t.Errorf("%s: %s with a statement built at run time; pass values as ? parameters",
				fset.Position(call.Pos()), sel.Sel.Name)
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d database calls checked", checked)
	if checked < 10 {
		t.Fatalf("only %d database calls found: the scan is not looking at the code", checked)
	}
}

// constantString reports whether e is a string literal, a constant of the
// file, or a concatenation of those.
func constantString(e ast.Expr, consts map[string]bool) bool {
	switch v := e.(type) {
	case *ast.BasicLit:
		return v.Kind == token.STRING
	case *ast.Ident:
		return consts[v.Name]
	case *ast.BinaryExpr:
		return v.Op == token.ADD && constantString(v.X, consts) && constantString(v.Y, consts)
	case *ast.ParenExpr:
		return constantString(v.X, consts)
	}
	return false
}
