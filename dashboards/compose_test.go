package dashboards_test

import (
	"context"
	"debug/elf"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/go-sql-driver/mysql"
	"gopkg.in/yaml.v3"

	"github.com/jobq/jobq/dashboards"
	"github.com/jobq/jobq/httpapi"
	"github.com/jobq/jobq/metrics"
)

var jobqServices = []string{"jobq-1", "jobq-2", "jobq-3"}

// loadCompose loads ../docker-compose.yml with the compose-spec loader,
// every profile enabled and no K6_SCRIPT in the environment.
func loadCompose(t *testing.T) (*types.Project, string) {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	opts, err := cli.NewProjectOptions([]string{filepath.Join(root, "docker-compose.yml")},
		cli.WithWorkingDirectory(root), cli.WithProfiles([]string{"*"}), cli.WithEnv([]string{}), cli.WithInterpolation(true))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("load docker-compose.yml: %v", err)
	}
	return p, root
}

// buildStatic builds ./cmd/jobq the way the Dockerfile's build stage does
// (its `go build` RUN line, with its environment) and returns the binary.
func buildStatic(t *testing.T, root string, df []instruction) string {
	t.Helper()
	var run string
	for _, in := range df {
		if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
			run = in.args
		}
	}
	m := regexp.MustCompile(`^((?:[A-Z_]+=\S+\s+)*)go build (.*) -o (\S+) (\./cmd/jobq)$`).FindStringSubmatch(run)
	if m == nil {
		t.Fatalf("Dockerfile: no `[ENV=…] go build … -o OUT ./cmd/jobq` RUN line, got %q", run)
	}
	bin := filepath.Join(t.TempDir(), "jobq")
	args := append([]string{"build"}, shellFields(m[2])...)
	cmd := exec.Command("go", append(args, "-o", bin, m[4])...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), strings.Fields(m[1])...)
	if !slices.Contains(strings.Fields(m[1]), "CGO_ENABLED=0") {
		t.Errorf("Dockerfile build: CGO_ENABLED=0 missing (the binary must be static), got %q", m[1])
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the Dockerfile's build is not static: the binary has a %v segment", p.Type)
		}
	}
	return bin
}

// shellFields splits s on spaces like a shell, keeping "double-quoted"
// runs together and dropping the quotes.
func shellFields(s string) []string {
	var out []string
	var cur strings.Builder
	quoted, any := false, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted, any = !quoted, true
		case r == ' ' && !quoted:
			if any {
				out = append(out, cur.String())
			}
			cur.Reset()
			any = false
		default:
			cur.WriteRune(r)
			any = true
		}
	}
	if any {
		out = append(out, cur.String())
	}
	return out
}

type instruction struct{ cmd, args string }

// parseDockerfile splits a Dockerfile into instructions (continuation
// lines joined, comments and the parser directive dropped).
func parseDockerfile(t *testing.T, path string) []instruction {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []instruction
	var cur string
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur == "") {
			continue
		}
		if strings.HasSuffix(trimmed, `\`) {
			cur += strings.TrimSuffix(trimmed, `\`) + " "
			continue
		}
		cur += trimmed
		cmd, args, _ := strings.Cut(cur, " ")
		out = append(out, instruction{strings.ToUpper(cmd), strings.TrimSpace(args)})
		cur = ""
	}
	return out
}

// flagValue returns the value after flag in args ("--flag v" or "--flag=v").
func flagValue(args []string, flag string) (string, bool) {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1], true
		}
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v, true
		}
	}
	return "", false
}

func env(s types.ServiceConfig, k string) string {
	if v := s.Environment[k]; v != nil {
		return *v
	}
	return ""
}

// bindSource returns the host path bound at target in s, or "".
func bindSource(s types.ServiceConfig, target string) (string, bool) {
	for _, v := range s.Volumes {
		if v.Target == target {
			return v.Source, v.ReadOnly
		}
	}
	return "", false
}

// TestComposeMatchesCode checks docker-compose.yml and the Dockerfile
// against the code: jobq serve's real flags, the API's /readyz and
// /metrics routes, the DSN, the scrape config's targets, Grafana's
// provisioning paths, and the k6 scripts; and that the Dockerfile's build
// gives a static binary run as a non-root user.
func TestComposeMatchesCode(t *testing.T) {
	p, root := loadCompose(t)
	want := []string{"grafana", "jobq-1", "jobq-2", "jobq-3", "k6", "mysql", "prometheus"}
	if got := p.ServiceNames(); !reflect.DeepEqual(sorted(got), want) {
		t.Fatalf("services = %v, want %v", sorted(got), want)
	}
	svc := func(name string) types.ServiceConfig { s, _ := p.GetService(name); return s }

	// Dockerfile: multi-stage, static, non-root, entrypoint = built binary.
	df := parseDockerfile(t, filepath.Join(root, "Dockerfile"))
	var froms int
	var user, entry, expose, health string
	var copies []string
	for _, in := range df {
		switch in.cmd {
		case "FROM":
			froms++
		case "USER":
			user = in.args
		case "ENTRYPOINT":
			entry = in.args
		case "EXPOSE":
			expose = in.args
		case "HEALTHCHECK":
			health = in.args
		case "COPY":
			copies = append(copies, in.args)
		}
	}
	if froms < 2 {
		t.Errorf("Dockerfile: %d FROM, want a multi-stage build", froms)
	}
	if u, _, _ := strings.Cut(user, ":"); u == "" || u == "0" || u == "root" {
		t.Errorf("Dockerfile: final USER %q, want a non-root user", user)
	}
	var entryArgs []string
	if err := json.Unmarshal([]byte(entry), &entryArgs); err != nil || len(entryArgs) != 1 {
		t.Fatalf("Dockerfile: ENTRYPOINT %q, want an exec-form binary", entry)
	}
	if !slices.ContainsFunc(copies, func(c string) bool { return strings.HasPrefix(c, "--from=") && strings.HasSuffix(c, " "+entryArgs[0]) }) {
		t.Errorf("Dockerfile: ENTRYPOINT %s is not the binary copied from the build stage (%v)", entryArgs[0], copies)
	}
	bin := buildStatic(t, root, df)
	help, err := exec.Command(bin, "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("jobq serve --help: %v\n%s", err, help)
	}

	// The API routes the health checks and Prometheus use exist.
	h := metrics.New(metrics.Options{}).Handler(httpapi.New(nil, httpapi.Options{ReadyFunc: func(context.Context) error { return nil }}))
	for _, path := range []string{"/readyz", metrics.Path} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK {
			t.Errorf("GET %s = %d, want 200", path, rec.Code)
		}
	}
	if !strings.Contains(health, "/readyz") || !strings.Contains(health, "127.0.0.1:"+expose+"/") {
		t.Errorf("Dockerfile HEALTHCHECK %q: want http://127.0.0.1:%s/readyz", health, expose)
	}

	// MySQL: 8.4, healthy before jobq starts, data on a named volume.
	my := svc("mysql")
	if !strings.HasPrefix(my.Image, "mysql:8.4") {
		t.Errorf("mysql image %q, want mysql:8.4", my.Image)
	}
	if my.HealthCheck == nil || len(my.HealthCheck.Test) == 0 {
		t.Error("mysql has no healthcheck")
	}
	if src, _ := bindSource(my, "/var/lib/mysql"); p.Volumes[src].Name == "" {
		t.Errorf("mysql data is not on a named volume (source %q)", src)
	}

	// jobq replicas.
	published := map[string]bool{}
	var listenPort string
	for _, name := range jobqServices {
		s := svc(name)
		if s.Build == nil || s.Build.Context != root || s.Build.Dockerfile != "Dockerfile" {
			t.Errorf("%s: build %+v, want context . and Dockerfile", name, s.Build)
		}
		if len(s.Command) == 0 || s.Command[0] != "serve" {
			t.Fatalf("%s: command %v, want `serve …`", name, s.Command)
		}
		for _, a := range s.Command[1:] {
			if f, ok := strings.CutPrefix(a, "--"); ok && !strings.Contains(string(help), "--"+strings.SplitN(f, "=", 2)[0]) {
				t.Errorf("%s: flag --%s is not a `jobq serve` flag", name, f)
			}
		}
		listen, ok := flagValue(s.Command, "--listen")
		host, port, err := net.SplitHostPort(listen)
		if !ok || err != nil || host != "0.0.0.0" {
			t.Fatalf("%s: --listen %q, want 0.0.0.0:PORT (reachable from the other containers)", name, listen)
		}
		listenPort = port
		if port != expose {
			t.Errorf("%s: listens on %s, the Dockerfile EXPOSEs %s", name, port, expose)
		}
		if len(s.Ports) != 1 || itoa(s.Ports[0].Target) != port || s.Ports[0].HostIP != "127.0.0.1" || published[s.Ports[0].Published] {
			t.Errorf("%s: ports %+v, want one loopback port, unique, to container port %s", name, s.Ports, port)
		}
		if len(s.Ports) > 0 {
			published[s.Ports[0].Published] = true
		}
		if s.HealthCheck == nil || !slices.Contains(s.HealthCheck.Test, "http://127.0.0.1:"+port+"/readyz") {
			t.Errorf("%s: healthcheck %v, want a GET of http://127.0.0.1:%s/readyz", name, s.HealthCheck, port)
		}
		cfg, err := mysql.ParseDSN(env(s, "JOBQ_DSN"))
		if err != nil {
			t.Fatalf("%s: JOBQ_DSN: %v", name, err)
		}
		if cfg.Addr != "mysql:3306" || cfg.Passwd != env(my, "MYSQL_ROOT_PASSWORD") || cfg.DBName != env(my, "MYSQL_DATABASE") {
			t.Errorf("%s: JOBQ_DSN addr %q db %q does not match the mysql service", name, cfg.Addr, cfg.DBName)
		}
		if env(s, "JOBQ_OWNER") != name {
			t.Errorf("%s: JOBQ_OWNER %q, want the service name", name, env(s, "JOBQ_OWNER"))
		}
		// Prometheus and k6 reach the replica by its service name, a Host
		// it refuses unless allowed.
		if !slices.Contains(strings.Split(env(s, "JOBQ_ALLOWED_HOSTS"), ","), name) {
			t.Errorf("%s: JOBQ_ALLOWED_HOSTS %q, want the service name in it", name, env(s, "JOBQ_ALLOWED_HOSTS"))
		}
		if d, ok := s.DependsOn["mysql"]; !ok || d.Condition != types.ServiceConditionHealthy {
			t.Errorf("%s: must depend on mysql being healthy", name)
		}
	}

	// Prometheus: the shipped config, scraping every replica at /metrics.
	pr := svc("prometheus")
	src, ro := bindSource(pr, "/etc/prometheus")
	if src != filepath.Join(root, "dashboards", "prometheus") || !ro {
		t.Errorf("prometheus: /etc/prometheus bound from %q (read-only %v), want dashboards/prometheus read-only", src, ro)
	}
	if v, _ := flagValue(pr.Command, "--config.file"); v != "/etc/prometheus/prometheus.yml" {
		t.Errorf("prometheus: --config.file %q", v)
	}
	compose := readScrape(t, "prometheus/prometheus.yml")
	var wantTargets []string
	for _, name := range jobqServices {
		wantTargets = append(wantTargets, name+":"+listenPort)
	}
	if !reflect.DeepEqual(compose.targets, wantTargets) || compose.path != metrics.Path {
		t.Errorf("prometheus.yml: job jobq scrapes %v at %s, want %v at %s", compose.targets, compose.path, wantTargets, metrics.Path)
	}
	local := readScrape(t, "prometheus/prometheus-local.yml")
	local.targets, compose.targets = nil, nil
	if !reflect.DeepEqual(local, compose) {
		t.Errorf("prometheus-local.yml differs from prometheus.yml beyond its targets:\n%+v\n%+v", local, compose)
	}
	for _, rf := range compose.rules {
		if _, err := dashboards.Files.Open("prometheus/" + rf); err != nil {
			t.Errorf("rule file %s: %v", rf, err)
		}
	}
	promPort := itoa(pr.Ports[0].Target)

	// Grafana: provisioning and dashboards mounted where the provider reads them.
	gf := svc("grafana")
	if src, _ := bindSource(gf, "/etc/grafana/provisioning"); src != filepath.Join(root, "dashboards", "grafana", "provisioning") {
		t.Errorf("grafana: provisioning bound from %q", src)
	}
	var provider struct {
		Providers []struct {
			Options struct{ Path string } `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, "grafana/provisioning/dashboards/jobq.yml", &provider)
	dashPath := provider.Providers[0].Options.Path
	if src, _ := bindSource(gf, dashPath); src != filepath.Join(root, "dashboards", "grafana", "dashboards") {
		t.Errorf("grafana: the provider reads %s, bound from %q, want dashboards/grafana/dashboards", dashPath, src)
	}
	home := env(gf, "GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH")
	if rel, ok := strings.CutPrefix(home, dashPath+"/"); !ok || !fileExists(filepath.Join(root, "dashboards", "grafana", "dashboards", rel)) {
		t.Errorf("grafana: home dashboard %q is not a shipped dashboard", home)
	}
	var ds struct {
		Datasources []struct{ Type, URL string } `yaml:"datasources"`
	}
	readYAML(t, "grafana/provisioning/datasources/prometheus.yml", &ds)
	if u, err := url.Parse(ds.Datasources[0].URL); err != nil || ds.Datasources[0].Type != "prometheus" || u.Host != "prometheus:"+promPort {
		t.Errorf("grafana datasource %+v, want the prometheus service on port %s", ds.Datasources[0], promPort)
	}

	// k6: under a profile, running a shipped script against every replica.
	k6 := svc("k6")
	if !slices.Contains(k6.Profiles, "loadtest") {
		t.Errorf("k6: profiles %v, want loadtest", k6.Profiles)
	}
	if src, _ := bindSource(k6, "/scripts"); src != filepath.Join(root, "testbed", "loadtest", "k6") {
		t.Errorf("k6: /scripts bound from %q, want testbed/loadtest/k6", src)
	}
	if len(k6.Command) != 2 || k6.Command[0] != "run" || !strings.HasPrefix(k6.Command[1], "/scripts/") {
		t.Fatalf("k6: command %v, want run /scripts/SCRIPT", k6.Command)
	}
	script, err := os.ReadFile(filepath.Join(root, "testbed", "loadtest", "k6", strings.TrimPrefix(k6.Command[1], "/scripts/")))
	if err != nil {
		t.Fatalf("k6 script: %v", err)
	}
	if !strings.Contains(string(script), "__ENV.TARGETS") {
		t.Error("k6 script does not read TARGETS")
	}
	var wantURLs []string
	for _, name := range jobqServices {
		wantURLs = append(wantURLs, "http://"+name+":"+listenPort)
	}
	if got := env(k6, "TARGETS"); got != strings.Join(wantURLs, ",") {
		t.Errorf("k6 TARGETS = %q, want %q", got, strings.Join(wantURLs, ","))
	}
}

// TestDashboardsWellFormed checks what Grafana needs from each dashboard:
// a unique uid, the datasource and instance variables, unique panel ids,
// every panel and target on the ${datasource} variable, and a PromQL query
// in every target.
func TestDashboardsWellFormed(t *testing.T) {
	ds, err := dashboards.Dashboards()
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) < 2 {
		t.Fatalf("%d dashboards, want overview and database", len(ds))
	}
	uids := map[string]bool{}
	for _, d := range ds {
		if d.UID == "" || uids[d.UID] {
			t.Errorf("dashboard %q: uid %q empty or repeated", d.Title, d.UID)
		}
		uids[d.UID] = true
		vars := map[string]string{}
		for _, v := range d.Templating.List {
			vars[v.Name] = v.Type
		}
		if vars["datasource"] != "datasource" || vars["instance"] != "query" {
			t.Errorf("%s: variables %v, want datasource and instance", d.UID, vars)
		}
		ids := map[int]bool{}
		for _, p := range d.Panels {
			if ids[p.ID] {
				t.Errorf("%s: panel id %d repeated", d.UID, p.ID)
			}
			ids[p.ID] = true
			if p.Type == "row" {
				continue
			}
			if p.GridPos.W == 0 || p.GridPos.H == 0 || p.GridPos.X+p.GridPos.W > 24 {
				t.Errorf("%s/%s: gridPos %+v", d.UID, p.Title, p.GridPos)
			}
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
				t.Errorf("%s/%s: datasource %+v, %d targets", d.UID, p.Title, p.Datasource, len(p.Targets))
			}
			for _, tg := range p.Targets {
				if tg.Expr == "" || tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
					t.Errorf("%s/%s/%s: empty expr or datasource not ${datasource}", d.UID, p.Title, tg.RefID)
				}
			}
		}
	}
}

type scrape struct {
	global  map[string]string
	rules   []string
	job     string
	path    string
	targets []string
}

// readScrape reads the jobq job of a shipped Prometheus config.
func readScrape(t *testing.T, name string) scrape {
	t.Helper()
	var cfg struct {
		Global        map[string]string `yaml:"global"`
		RuleFiles     []string          `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			MetricsPath   string `yaml:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, name, &cfg)
	if len(cfg.ScrapeConfigs) != 1 || len(cfg.ScrapeConfigs[0].StaticConfigs) != 1 {
		t.Fatalf("%s: want one scrape config with one static config", name)
	}
	sc := cfg.ScrapeConfigs[0]
	return scrape{global: cfg.Global, rules: cfg.RuleFiles, job: sc.JobName, path: sc.MetricsPath, targets: sc.StaticConfigs[0].Targets}
}

func readYAML(t *testing.T, name string, out any) {
	t.Helper()
	b, err := dashboards.Files.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func sorted(xs []string) []string { xs = slices.Clone(xs); slices.Sort(xs); return xs }

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
