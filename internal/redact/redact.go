// Package redact holds the one helper every layer needs to talk about a MySQL
// DSN without leaking its password: DSN. It lives apart from store so that
// dbprovider, the harnesses and the CLI can print a DSN without linking the
// adapter.
package redact

import "github.com/go-sql-driver/mysql"

// DSN returns dsn with its password replaced by "***", for logs and
// errors; "<unparseable dsn>" when dsn does not parse.
func DSN(dsn string) string {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "<unparseable dsn>"
	}
	if cfg.Passwd != "" {
		cfg.Passwd = "***"
	}
	return cfg.FormatDSN()
}
