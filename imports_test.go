package jobq_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/jobq/jobq"

// importRules are the arrows the package house forbids (see
// docs/architecture.md). A rule names the packages it applies to, the
// packages they must not import, and whether it covers only direct imports
// or everything linked in (transitive).
var importRules = []struct {
	name       string
	from       []string // import paths (module-relative; "" is the root)
	forbidden  []string // module-relative or third-party import paths
	transitive bool
}{
	{
		name: "transports speak service and apitype, never the adapter",
		from: []string{"httpapi", "grpcapi"}, forbidden: []string{"store", "gen/jobqdb", "github.com/go-sql-driver/mysql"},
	},
	{
		name: "the Go client links no server package",
		from: []string{"client"}, transitive: true,
		forbidden: []string{"store", "gen/jobqdb", "scheduler", "service", "httpapi", "grpcapi", "cronplan", "app",
			"github.com/go-sql-driver/mysql", "github.com/robfig/cron/v3"},
	},
	{
		name: "the vocabulary and API types are leaves",
		from: []string{"", "apitype"},
		forbidden: []string{"store", "gen/jobqdb", "scheduler", "service", "httpapi", "grpcapi", "client",
			"github.com/go-sql-driver/mysql"},
		transitive: true,
	},
	{
		name: "the scheduler, the service and every transport link neither the MySQL driver nor the sqlc code",
		from: []string{"scheduler", "service", "httpapi", "grpcapi", "console", "auth"}, transitive: true,
		forbidden: []string{"store", "gen/jobqdb", "github.com/go-sql-driver/mysql"},
	},
	{
		name: "storeerr is driver-neutral",
		from: []string{"storeerr"}, transitive: true,
		forbidden: []string{"store", "gen/jobqdb", "scheduler", "service", "github.com/go-sql-driver/mysql"},
	},
	{
		name: "cronplan and dbprovider do not link the adapter",
		from: []string{"cronplan", "testbed/dbprovider"}, forbidden: []string{"store", "scheduler", "service"},
	},
	{
		name: "a transport does not import another transport (auth, errors and actions come from auth and service)",
		from: []string{"httpapi", "grpcapi", "console"}, forbidden: []string{"httpapi", "grpcapi", "console"},
	},
	{
		name: "the product does not link the testbed or the test helpers",
		from: []string{"", "apitype", "client", "cronplan", "store", "storeerr", "scheduler", "service", "httpapi", "grpcapi",
			"console", "metrics", "app", "jobtypes", "auth"},
		forbidden: []string{"testbed/...", "scheduler/schedulertest", "internal/testdb"}, transitive: true,
	},
	{
		name: "River and pgx stay in the River peer's own module (testbed/bench/riverpeer)",
		from: []string{"cmd/jobq", "testbed/bench"}, transitive: true,
		forbidden: []string{"github.com/riverqueue/...", "github.com/jackc/pgx/v5", "github.com/jackc/pgx/v5/..."},
	},
}

// full turns a module-relative path into an import path; third-party paths
// (with a dot in the first element) pass unchanged.
func full(p string) string {
	if p == "" {
		return module
	}
	if first, _, _ := strings.Cut(p, "/"); strings.Contains(first, ".") {
		return p
	}
	return module + "/" + p
}

// violations applies importRules to imports (package → what it imports,
// directly for direct rules, everything linked for transitive ones).
func violations(direct, deps map[string][]string) []string {
	var out []string
	for _, r := range importRules {
		for _, from := range r.from {
			imports := direct[full(from)]
			if r.transitive {
				imports = deps[full(from)]
			}
			verb := " imports "
			if r.transitive {
				verb = " links "
			}
			for _, f := range r.forbidden {
				if prefix, ok := strings.CutSuffix(f, "/..."); ok {
					for _, imp := range imports {
						if strings.HasPrefix(imp, full(prefix)+"/") {
							out = append(out, full(from)+verb+imp+": "+r.name)
						}
					}
					continue
				}
				if slices.Contains(imports, full(f)) {
					out = append(out, full(from)+verb+full(f)+": "+r.name)
				}
			}
		}
	}
	return out
}

// goList returns, for each package in the module, its direct imports and
// (with deps) every package it links.
func goList(t *testing.T, pkgs []string, deps bool) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, p := range pkgs {
		args := []string{"list", "-f", `{{join .Imports " "}}`, full(p)}
		if deps {
			args = []string{"list", "-deps", full(p)}
		}
		b, err := exec.Command("go", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, b)
		}
		out[full(p)] = strings.Fields(string(b))
	}
	return out
}

// TestImportRules fails when a package imports across a forbidden arrow,
// for example httpapi importing store or the client linking the scheduler.
func TestImportRules(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	var pkgs []string
	for _, r := range importRules {
		pkgs = append(pkgs, r.from...)
	}
	for _, v := range violations(goList(t, pkgs, false), goList(t, pkgs, true)) {
		t.Error(v)
	}
}

// TestImportRulesCatchPlantedViolations checks the checker itself: each
// planted import must be reported.
func TestImportRulesCatchPlantedViolations(t *testing.T) {
	direct := map[string][]string{
		full("httpapi"): {full("service"), full("store")},
		full("console"): {full("auth"), full("httpapi"), full("service")},
	}
	deps := map[string][]string{
		full("client"):        {full("apitype"), full("scheduler"), "github.com/go-sql-driver/mysql"},
		full("scheduler"):     {full("storeerr"), full("store"), full("testbed/faultstore")},
		full("console"):       {full("service"), full("gen/jobqdb"), "github.com/go-sql-driver/mysql"},
		full("testbed/bench"): {"github.com/riverqueue/river", "github.com/jackc/pgx/v5"},
	}
	got := violations(direct, deps)
	want := []string{
		full("httpapi") + " imports " + full("store") + ": " + importRules[0].name,
		full("client") + " links " + full("scheduler") + ": " + importRules[1].name,
		full("client") + " links github.com/go-sql-driver/mysql: " + importRules[1].name,
		full("scheduler") + " links " + full("store") + ": " + importRules[3].name,
		full("console") + " links " + full("gen/jobqdb") + ": " + importRules[3].name,
		full("console") + " links github.com/go-sql-driver/mysql: " + importRules[3].name,
		full("console") + " imports " + full("httpapi") + ": " + importRules[6].name,
		full("scheduler") + " links " + full("testbed/faultstore") + ": " + importRules[7].name,
		full("testbed/bench") + " links github.com/riverqueue/river: " + importRules[8].name,
		full("testbed/bench") + " links github.com/jackc/pgx/v5: " + importRules[8].name,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("violations =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
