// Package jobqsql embeds jobq's schema migrations (sql/migrations) so that
// `jobq migrate` needs no files on disk. The queries in sql/queries are
// compiled by sqlc into gen/jobqdb.
package jobqsql

import "embed"

// Migrations holds migrations/NNN_name.up.sql and NNN_name.down.sql.
//
//go:embed migrations/*.sql
var Migrations embed.FS
