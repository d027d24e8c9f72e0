// Package docs holds jobq's documentation pages and the test that keeps
// their examples true: every fenced block whose info string says
// "runnable" (```sh runnable) is run, page by page, against a throwaway
// database, and the page fails when a command fails.
//
// How a page runs: its runnable blocks are joined, in order, into one bash
// script (set -euo pipefail; curl fails on HTTP errors), run in a temporary
// directory whose bin/jobq is the jobq built from this checkout (also first
// on PATH). A block marked "runnable background" (```sh runnable background)
// starts in the background, like a command in its own terminal; the script
// then waits until /readyz answers. A page without a background block gets
// a `jobq serve` the harness starts before its first block. Literal values
// of the examples are rewritten to the test's: 127.0.0.1:8080 becomes a free
// port, root@tcp(127.0.0.1:3306)/ the test server (JOBQ_DSN, Docker or a
// local mariadbd, as for every test), the database jobq a fresh
// jobq_docs_<random> (dropped afterwards), and mysql -uroot -h127.0.0.1
// that server's address. JOBQ_SERVER points at the replica.
package docs

import (
	"bufio"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/jobq/jobq/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// block is one fenced code block of a page.
type block struct {
	line       int    // 1-based line of the opening fence
	lang       string // the info string's first word ("sh", "go", …)
	runnable   bool
	background bool
	text       string
}

var fence = regexp.MustCompile("^```+")

// blocks returns the fenced blocks of a Markdown file.
func blocks(path string) ([]block, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []block
	var cur *block
	var marker string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if cur == nil {
			if m := fence.FindString(line); m != "" {
				info := strings.Fields(strings.TrimPrefix(line, m))
				cur, marker = &block{line: n}, m
				if len(info) > 0 {
					cur.lang = info[0]
				}
				for _, w := range info {
					cur.runnable = cur.runnable || w == "runnable"
					cur.background = cur.background || w == "background"
				}
			}
			continue
		}
		if strings.TrimSpace(line) == marker {
			out = append(out, *cur)
			cur = nil
			continue
		}
		cur.text += line + "\n"
	}
	return out, sc.Err()
}

// pages are README.md and every docs/*.md.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../README.md"}, docs...)
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// jobqBinary builds cmd/jobq once for the package and returns its folder.
func jobqBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "jobq-docs-bin-")
		if buildErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, "jobq"), "github.com/jobq/jobq/cmd/jobq").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./cmd/jobq: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// env is what a page's script runs against.
type env struct {
	server *mysql.Config // the test server, no database
	db     string        // jobq_docs_<random>
	port   int
}

func (e env) dsn(db string) string {
	c := e.server.Clone()
	c.DBName = db
	return c.FormatDSN()
}

var (
	exampleDSN   = regexp.MustCompile(`root@tcp\(127\.0\.0\.1:3306\)/(jobq\b)?`)
	exampleMySQL = regexp.MustCompile(`\bmysql -uroot -h127\.0\.0\.1\b`)
	exampleDB    = regexp.MustCompile(`\bDATABASE IF NOT EXISTS jobq\b`)
)

// rewrite turns a block's example values into the test's.
func (e env) rewrite(s string) string {
	s = strings.ReplaceAll(s, "127.0.0.1:8080", fmt.Sprintf("127.0.0.1:%d", e.port))
	s = exampleDSN.ReplaceAllStringFunc(s, func(m string) string {
		if strings.HasSuffix(m, "/jobq") {
			return e.dsn(e.db)
		}
		return e.dsn("")
	})
	host, port, _ := net.SplitHostPort(e.server.Addr)
	s = exampleMySQL.ReplaceAllString(s, fmt.Sprintf("mysql -u%s -h%s -P%s", e.server.User, host, port))
	return exampleDB.ReplaceAllString(s, "DATABASE IF NOT EXISTS "+e.db)
}

const prologue = `set -euo pipefail
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true' EXIT
curl() { command curl --silent --show-error --fail-with-body "$@"; echo; }
ready() {
  for _ in $(seq 300); do
    if command curl -sf "http://127.0.0.1:$1/readyz" >/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "no replica answered /readyz on port $1 within 30 s" >&2; return 1
}
set -x
`

// script joins a page's runnable blocks into one bash script.
func (e env) script(page string, bs []block) string {
	var b strings.Builder
	b.WriteString(prologue)
	own := false
	for _, bl := range bs {
		own = own || (bl.runnable && bl.background)
	}
	if !own {
		fmt.Fprintf(&b, "# harness: a replica for the page\njobq serve > harness-serve.log 2>&1 &\nready %d\n", e.port)
	}
	n := 0
	for _, bl := range bs {
		if !bl.runnable {
			continue
		}
		fmt.Fprintf(&b, "\n# %s:%d\n", page, bl.line)
		text := e.rewrite(bl.text)
		if bl.background {
			n++
			fmt.Fprintf(&b, "{\n%s} > background-%d.log 2>&1 &\nready %d\n", text, n, e.port)
			continue
		}
		b.WriteString(text)
	}
	return b.String()
}

// TestRunnableBlocks runs every page's runnable blocks against a fresh
// database and replica.
func TestRunnableBlocks(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	srv := testdb.Server(t)
	server, err := mysql.ParseDSN(srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range pages(t) {
		bs, err := blocks(page)
		if err != nil {
			t.Fatal(err)
		}
		runnable := 0
		for _, b := range bs {
			if b.runnable {
				runnable++
			}
		}
		if runnable == 0 {
			continue
		}
		t.Run(filepath.Base(page), func(t *testing.T) {
			if runnable > 0 && strings.Contains(strings.Join(blockTexts(bs), ""), "mysql ") {
				if _, err := exec.LookPath("mysql"); err != nil {
					t.Skip("the page's blocks call the mysql client, which is not installed")
				}
			}
			runPage(t, env{server: server, db: "jobq_docs_" + randomHex(t), port: freePort(t)}, page, bs)
		})
	}
}

func blockTexts(bs []block) []string {
	var out []string
	for _, b := range bs {
		if b.runnable {
			out = append(out, b.text)
		}
	}
	return out
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func runPage(t *testing.T, e env, page string, bs []block) {
	root, err := sql.Open("mysql", e.dsn(""))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	// The page may create the database itself (the quick start does); the
	// harness creates it otherwise. Either way it is dropped at the end.
	if _, err := root.Exec("CREATE DATABASE IF NOT EXISTS " + e.db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := root.Exec("DROP DATABASE IF EXISTS " + e.db); err != nil {
			t.Logf("drop %s: %v", e.db, err)
		}
	})
	if _, err := root.Exec("DROP DATABASE " + e.db); err != nil { // a page that creates it must be able to
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(blockTexts(bs), ""), "CREATE DATABASE") {
		if _, err := root.Exec("CREATE DATABASE " + e.db); err != nil {
			t.Fatal(err)
		}
	}

	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	bin := jobqBinary(t)
	if err := os.Symlink(filepath.Join(bin, "jobq"), filepath.Join(dir, "bin", "jobq")); err != nil {
		t.Fatal(err)
	}
	// The worker libraries, as in a checkout (the README's Python worker
	// runs with PYTHONPATH=sdk/python/src).
	sdk, err := filepath.Abs("../sdk")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(sdk, filepath.Join(dir, "sdk")); err != nil {
		t.Fatal(err)
	}
	script := e.script(page, bs)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"PATH="+filepath.Join(dir, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"),
		fmt.Sprintf("JOBQ_SERVER=http://127.0.0.1:%d", e.port),
		fmt.Sprintf("JOBQ_LISTEN=127.0.0.1:%d", e.port),
		"JOBQ_DSN="+e.dsn(e.db),
		"MYSQL_PWD="+e.server.Passwd,
	)
	cmd.WaitDelay = 10 * time.Second
	// The script and everything it starts (background blocks run `jobq
	// serve` inside a subshell, which the script's EXIT trap does not reach)
	// share one process group, ended when the script is done.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	if cmd.Process != nil {
		// Throwaway replicas of a dropped test database: nothing to drain.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err != nil {
		logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		var tails []string
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			tails = append(tails, fmt.Sprintf("--- %s ---\n%s", filepath.Base(l), tail(string(b), 3000)))
		}
		t.Fatalf("%s: runnable blocks failed: %v\n--- output ---\n%s\n%s", page, err, tail(string(out), 6000), strings.Join(tails, "\n"))
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// exampleFiles hold the Example functions (and the schedulertest test)
// the pages' Go blocks quote.
var exampleFiles = []string{"../app/example_test.go", "../client/example_test.go", "../callout/example_test.go",
	"../scheduler/schedulertest/scheduler_test.go"}

// dedent drops each line's leading tabs and spaces, so a block quoted out
// of a function body matches its source.
func dedent(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimLeft(l, "\t ")
	}
	return strings.Join(lines, "\n")
}

// TestGoBlocksAreExamples: every ```go block of a page is quoted from an
// Example function (compiled by go vet and go test; app's runs against a
// real database and checks its output), so the Go shown cannot drift from
// code that compiles and runs.
func TestGoBlocksAreExamples(t *testing.T) {
	var src strings.Builder
	for _, f := range exampleFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.WriteString(dedent(string(b)) + "\n")
	}
	n := 0
	for _, page := range pages(t) {
		bs, err := blocks(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			if b.lang != "go" {
				continue
			}
			n++
			if !strings.Contains(src.String(), dedent(b.text)) {
				t.Errorf("%s:%d: this Go block is not quoted from %v; copy it from there (or change the example and quote it again)", page, b.line, exampleFiles)
			}
		}
	}
	if n == 0 {
		t.Fatal("no Go blocks found: the check would pass anything")
	}
}
