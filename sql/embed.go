// Package jobqsql embeds jobq's schema migrations (sql/migrations) so that
// `jobq migrate` needs no files on disk. The queries in sql/queries are
// compiled by sqlc into gen/jobqdb and embedded too, so `jobq bench` can
// EXPLAIN every statement the scheduler runs.
package jobqsql

import "embed"

// Migrations holds migrations/NNN_name.up.sql and NNN_name.down.sql.
//
//go:embed migrations/*.sql
var Migrations embed.FS

// Queries holds queries/*.sql, the sqlc sources of gen/jobqdb.
//
//go:embed queries/*.sql
var Queries embed.FS
