// Package dashboards ships jobq's Grafana dashboards, Prometheus scrape
// configurations and alerting rules (the files under this directory), and
// lists the PromQL queries in them so tests can run every one against a real
// Prometheus.
//
// Layout:
//
//	grafana/dashboards/*.json          Grafana dashboards (overview, database)
//	grafana/provisioning/…             Grafana datasource and dashboard provisioning (docker-compose.yml)
//	prometheus/prometheus.yml          scrape config for docker-compose.yml (targets jobq-1..3:8080)
//	prometheus/prometheus-local.yml    scrape config for a host Prometheus (targets 127.0.0.1:8080..8082)
//	prometheus/alerts.yml              alerting rules; prometheus/alerts_test.yml unit-tests them (promtool)
package dashboards

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// Files holds the dashboards, provisioning files, scrape configs and rules.
//
//go:embed grafana prometheus
var Files embed.FS

// Query is one PromQL expression of a dashboard panel or an alerting rule.
type Query struct {
	// Source names where it lives: "<dashboard uid>/<panel title>/<refId>"
	// or "alerts.yml/<alert name>".
	Source string
	// Expr is the PromQL text, with Grafana variables ($instance,
	// $__rate_interval, …) left in; see Expand.
	Expr string
	// ExpectEmpty, when non-empty, says why the query may return no data in
	// a healthy cluster (a target's "jobqExpectEmpty" field).
	ExpectEmpty string
}

// Dashboard is the part of a Grafana dashboard JSON model jobq checks.
type Dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []Panel `json:"panels"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"list"`
	} `json:"templating"`
}

// Panel is one dashboard panel.
type Panel struct {
	ID         int                      `json:"id"`
	Type       string                   `json:"type"`
	Title      string                   `json:"title"`
	Datasource *Datasource              `json:"datasource"`
	GridPos    struct{ H, W, X, Y int } `json:"gridPos"`
	Targets    []Target                 `json:"targets"`
}

// Datasource references a Grafana datasource.
type Datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// Target is one query of a panel.
type Target struct {
	RefID       string      `json:"refId"`
	Expr        string      `json:"expr"`
	Datasource  *Datasource `json:"datasource"`
	ExpectEmpty string      `json:"jobqExpectEmpty"`
}

// Dashboards parses every grafana/dashboards/*.json, sorted by file name.
func Dashboards() ([]Dashboard, error) {
	names, err := fs.Glob(Files, "grafana/dashboards/*.json")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []Dashboard
	for _, n := range names {
		b, err := Files.ReadFile(n)
		if err != nil {
			return nil, err
		}
		var d Dashboard
		if err := json.Unmarshal(b, &d); err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// RuleGroups is the shape of a Prometheus rule file.
type RuleGroups struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []Rule `yaml:"rules"`
	} `yaml:"groups"`
}

// Rule is one alerting or recording rule.
type Rule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// Rules parses prometheus/alerts.yml.
func Rules() (RuleGroups, error) {
	var rg RuleGroups
	b, err := Files.ReadFile("prometheus/alerts.yml")
	if err != nil {
		return rg, err
	}
	if err := yaml.Unmarshal(b, &rg); err != nil {
		return rg, fmt.Errorf("alerts.yml: %w", err)
	}
	return rg, nil
}

// Queries returns every panel query of every dashboard, then every alert
// expression.
func Queries() ([]Query, error) {
	ds, err := Dashboards()
	if err != nil {
		return nil, err
	}
	var out []Query
	for _, d := range ds {
		for _, p := range d.Panels {
			for _, t := range p.Targets {
				out = append(out, Query{Source: path.Join(d.UID, p.Title, t.RefID), Expr: t.Expr, ExpectEmpty: t.ExpectEmpty})
			}
		}
	}
	rg, err := Rules()
	if err != nil {
		return nil, err
	}
	for _, g := range rg.Groups {
		for _, r := range g.Rules {
			out = append(out, Query{Source: "alerts.yml/" + r.Alert + r.Record, Expr: r.Expr})
		}
	}
	return out, nil
}

// Expand replaces the Grafana variables the dashboards use, for a direct
// Prometheus query: $instance becomes ".*" (all replicas) and
// $__rate_interval becomes rateInterval (a PromQL duration such as "1m";
// Grafana itself uses max(4 × scrape interval, step + scrape interval)).
func Expand(expr, rateInterval string) string {
	return strings.NewReplacer("$__rate_interval", rateInterval, "$instance", ".*").Replace(expr)
}
