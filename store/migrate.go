package store

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	jobqsql "github.com/jobq/jobq/sql"
)

// Migration is one numbered schema step from sql/migrations.
type Migration struct {
	Version   int
	Name      string
	Up, Down  string
	Applied   bool
	AppliedAt *time.Time
}

var migrationRe = regexp.MustCompile(`^(\d+)_([a-z0-9_]+)\.(up|down)\.sql$`)

// Migrations returns the embedded migrations in version order.
func Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(jobqsql.Migrations, "migrations")
	if err != nil {
		return nil, err
	}
	byVer := map[int]*Migration{}
	for _, e := range entries {
		m := migrationRe.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, errorf("migration file %q does not match NNN_name.(up|down).sql", e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		body, err := fs.ReadFile(jobqsql.Migrations, "migrations/"+e.Name())
		if err != nil {
			return nil, err
		}
		mg := byVer[v]
		if mg == nil {
			mg = &Migration{Version: v, Name: m[2]}
			byVer[v] = mg
		}
		if m[3] == "up" {
			mg.Up = string(body)
		} else {
			mg.Down = string(body)
		}
	}
	out := make([]Migration, 0, len(byVer))
	for _, m := range byVer {
		if m.Up == "" || m.Down == "" {
			return nil, errorf("migration %03d_%s needs both .up.sql and .down.sql", m.Version, m.Name)
		}
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// splitStatements splits a migration file into statements: "--" comment
// lines are dropped and statements end with ";" at the end of a line.
func splitStatements(body string) []string {
	var stmts []string
	var cur strings.Builder
	for _, line := range strings.Split(body, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(t, ";") {
			stmts = append(stmts, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		stmts = append(stmts, s)
	}
	return stmts
}

const migrationsTable = `CREATE TABLE IF NOT EXISTS jobq_schema_migrations (
    version    INT NOT NULL PRIMARY KEY,
    name       VARCHAR(128) NOT NULL,
    applied_at DATETIME(6) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`

// ErrNoDatabase is returned by the migration commands when the DSN names no
// database (the path after the last '/' is empty).
var ErrNoDatabase = errors.New("the DSN names no database: end it with /<database>, e.g. root@tcp(127.0.0.1:3306)/jobq (create the database first: CREATE DATABASE jobq)")

// withMigrationLock runs fn on one connection holding GET_LOCK, so replicas
// starting together migrate once.
func (s *Store) withMigrationLock(ctx context.Context, fn func(conn *sql.Conn) error) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var dbName sql.NullString
	if err := conn.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&dbName); err != nil {
		return errorf("migration: %w", err)
	}
	if !dbName.Valid {
		return ErrNoDatabase
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(CONCAT(DATABASE(), '.jobq_migrate'), 60)").Scan(&got); err != nil {
		return errorf("migration lock: %w", err)
	}
	if got.Int64 != 1 {
		return errorf("migration lock: another process holds it for over 60s")
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK(CONCAT(DATABASE(), '.jobq_migrate'))")
	if _, err := conn.ExecContext(ctx, migrationsTable); err != nil {
		return errorf("create jobq_schema_migrations: %w", err)
	}
	return fn(conn)
}

func appliedVersions(ctx context.Context, conn *sql.Conn) (map[int]time.Time, error) {
	rows, err := conn.QueryContext(ctx, "SELECT version, applied_at FROM jobq_schema_migrations")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	m := map[int]time.Time{}
	for rows.Next() {
		var v int
		var t time.Time
		if err := rows.Scan(&v, &t); err != nil {
			return nil, err
		}
		m[v] = t
	}
	return m, rows.Err()
}

// MigrateUp applies every pending migration in order and returns the
// versions it applied. MySQL DDL is not transactional: a migration that fails
// halfway must be repaired by hand (its down file drops what it made).
func (s *Store) MigrateUp(ctx context.Context) ([]int, error) {
	all, err := Migrations()
	if err != nil {
		return nil, err
	}
	var done []int
	err = s.withMigrationLock(ctx, func(conn *sql.Conn) error {
		applied, err := appliedVersions(ctx, conn)
		if err != nil {
			return err
		}
		for _, m := range all {
			if _, ok := applied[m.Version]; ok {
				continue
			}
			for _, st := range splitStatements(m.Up) {
				if _, err := conn.ExecContext(ctx, st); err != nil {
					return errorf("migration %03d_%s up: %w", m.Version, m.Name, err)
				}
			}
			if _, err := conn.ExecContext(ctx, "INSERT INTO jobq_schema_migrations (version, name, applied_at) VALUES (?, ?, NOW(6))", m.Version, m.Name); err != nil {
				return err
			}
			done = append(done, m.Version)
		}
		return nil
	})
	return done, err
}

// MigrateDown reverts the newest steps applied migrations (all when
// steps <= 0) and returns the versions it reverted.
func (s *Store) MigrateDown(ctx context.Context, steps int) ([]int, error) {
	all, err := Migrations()
	if err != nil {
		return nil, err
	}
	var done []int
	err = s.withMigrationLock(ctx, func(conn *sql.Conn) error {
		applied, err := appliedVersions(ctx, conn)
		if err != nil {
			return err
		}
		for i := len(all) - 1; i >= 0; i-- {
			m := all[i]
			if _, ok := applied[m.Version]; !ok {
				continue
			}
			if steps > 0 && len(done) >= steps {
				break
			}
			for _, st := range splitStatements(m.Down) {
				if _, err := conn.ExecContext(ctx, st); err != nil {
					return errorf("migration %03d_%s down: %w", m.Version, m.Name, err)
				}
			}
			if _, err := conn.ExecContext(ctx, "DELETE FROM jobq_schema_migrations WHERE version = ?", m.Version); err != nil {
				return err
			}
			done = append(done, m.Version)
		}
		return nil
	})
	return done, err
}

// MigrateStatus lists every migration with whether and when it was applied.
func (s *Store) MigrateStatus(ctx context.Context) ([]Migration, error) {
	all, err := Migrations()
	if err != nil {
		return nil, err
	}
	err = s.withMigrationLock(ctx, func(conn *sql.Conn) error {
		applied, err := appliedVersions(ctx, conn)
		if err != nil {
			return err
		}
		for i := range all {
			if t, ok := applied[all[i].Version]; ok {
				t := t.UTC()
				all[i].Applied, all[i].AppliedAt = true, &t
			}
		}
		return nil
	})
	return all, err
}
