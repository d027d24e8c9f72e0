package bench

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
)

// IndexWriteCounter counts the index entries each write statement changes
// for a sample of jobs, on the server's own index definitions: before and
// after every INSERT, UPDATE, DELETE or REPLACE a pool opened by
// OpenIndexCountingDB sends, on the statement's own connection (inside its
// transaction, so it sees what the statement wrote), it reads the key tuple
// of every index of job_queue (the sample's rows) and job_execution (the
// sample's rows, by job_id) — index definitions from
// information_schema.STATISTICS, virtual columns included — and counts the
// indexes whose tuple changed. A row inserted or deleted counts every index
// of its table, PRIMARY included; an updated row counts the indexes whose
// key changed (its PRIMARY key never does: the clustered record is written
// in place, which the rows-written count already says).
//
// The count is logical: an index whose key values are unchanged needs no
// entry written, which is what InnoDB does for an index on a VIRTUAL column
// whose computed value does not change (the reason for migrations 011, 016
// and 018). The extra reads make the pool slow: it is for counting, never
// for timing.
type IndexWriteCounter struct {
	mu      sync.Mutex
	sample  []uint64
	tables  []ixTable
	byStmt  map[string]int64
	byIndex map[string]int64 // "stmt\x00table.index"
	stmts   map[string]int64 // executions per statement name
}

type ixTable struct {
	name, pk, filter string // filter: the column matched against the sample's job ids
	cols             []string
	indexes          []ixDef
}

type ixDef struct {
	name string
	cols []int // positions in ixTable.cols
}

// ixTables are the tables counted and how their rows map to a job.
var ixTables = []struct{ name, pk, filter string }{
	{"job_queue", "id", "id"},
	{"job_execution", "id", "job_id"},
}

// SetSample sets the jobs counted and resets the counts.
func (c *IndexWriteCounter) SetSample(ids []uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sample = slices.Clone(ids)
	c.byStmt, c.byIndex, c.stmts = map[string]int64{}, map[string]int64{}, map[string]int64{}
}

// IndexWriteStat is one statement's index entries changed, per sample job,
// and which indexes they were (with each index's entries per job).
type IndexWriteStat struct {
	Stmt    string
	Execs   int64
	PerJob  float64
	Indexes map[string]float64 // "table.index" → entries per job
}

// Stats returns the counts per statement, per sample job, largest first.
func (c *IndexWriteCounter) Stats() []IndexWriteStat {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := float64(max(len(c.sample), 1))
	var out []IndexWriteStat
	for s, v := range c.byStmt {
		st := IndexWriteStat{Stmt: s, Execs: c.stmts[s], PerJob: float64(v) / n, Indexes: map[string]float64{}}
		for k, iv := range c.byIndex {
			if ks, ix, _ := strings.Cut(k, "\x00"); ks == s {
				st.Indexes[ix] = float64(iv) / n
			}
		}
		out = append(out, st)
	}
	for s, e := range c.stmts { // statements that changed no entry
		if _, ok := c.byStmt[s]; !ok {
			out = append(out, IndexWriteStat{Stmt: s, Execs: e, Indexes: map[string]float64{}})
		}
	}
	slices.SortFunc(out, func(a, b IndexWriteStat) int {
		return cmp.Or(cmp.Compare(b.PerJob, a.PerJob), strings.Compare(a.Stmt, b.Stmt))
	})
	return out
}

// WriteIndexWriteTable prints stats as a Markdown table.
func WriteIndexWriteTable(w io.Writer, stats []IndexWriteStat) {
	fmt.Fprintf(w, "| statement | execs | index entries changed/job | indexes |\n|---|--:|--:|---|\n")
	var total float64
	for _, s := range stats {
		names := make([]string, 0, len(s.Indexes))
		for ix, v := range s.Indexes {
			if v == 1 {
				names = append(names, ix)
			} else {
				names = append(names, fmt.Sprintf("%s ×%.2f", ix, v))
			}
		}
		slices.Sort(names)
		fmt.Fprintf(w, "| %s | %d | %.2f | %s |\n", s.Stmt, s.Execs, s.PerJob, strings.Join(names, ", "))
		total += s.PerJob
	}
	fmt.Fprintf(w, "| **total** | | **%.2f** | |\n", total)
}

// OpenIndexCountingDB opens a pool on dsn (normalised as store.Open's)
// whose write statements are counted in c.
func OpenIndexCountingDB(dsn string, maxOpen int, c *IndexWriteCounter) (*sql.DB, error) {
	return openWrappedDB(dsn, maxOpen, func(conn driver.Conn) driver.Conn {
		return &ixConn{connBase: connBase{conn}, c: c}
	})
}

type ixConn struct {
	connBase
	c *IndexWriteCounter
}

// isWrite reports whether q (after its comment lines) writes rows.
func isWrite(q string) bool {
	for {
		q = strings.TrimSpace(q)
		if !strings.HasPrefix(q, "--") {
			break
		}
		_, q, _ = strings.Cut(q, "\n")
	}
	f := strings.Fields(q)
	if len(f) == 0 {
		return false
	}
	switch strings.ToUpper(f[0]) {
	case "INSERT", "UPDATE", "DELETE", "REPLACE":
		return true
	}
	return false
}

// query runs q on this connection (in its transaction, if one is open).
// Values are copied at once: the driver reuses its buffers on Next.
func (cn *ixConn) query(ctx context.Context, q string) ([][]string, error) {
	rows, err := cn.Conn.(driver.QueryerContext).QueryContext(ctx, q, nil)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]string
	vals := make([]driver.Value, len(rows.Columns()))
	for {
		if err := rows.Next(vals); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		row := make([]string, len(vals))
		for i, v := range vals {
			row[i] = asString(v)
		}
		out = append(out, row)
	}
}

// load reads the index definitions of the counted tables, once.
func (cn *ixConn) load(ctx context.Context) error {
	if cn.c.tables != nil {
		return nil
	}
	var tables []ixTable
	for _, t := range ixTables {
		rows, err := cn.query(ctx, `SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS
			WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '`+t.name+`' ORDER BY INDEX_NAME, SEQ_IN_INDEX`)
		if err != nil {
			return fmt.Errorf("index definitions of %s: %w", t.name, err)
		}
		tt := ixTable{name: t.name, pk: t.pk, filter: t.filter}
		pos := map[string]int{}
		for _, r := range rows {
			ix, col := r[0], r[1]
			p, ok := pos[col]
			if !ok {
				p = len(tt.cols)
				pos[col] = p
				tt.cols = append(tt.cols, col)
			}
			if len(tt.indexes) == 0 || tt.indexes[len(tt.indexes)-1].name != ix {
				tt.indexes = append(tt.indexes, ixDef{name: ix})
			}
			last := &tt.indexes[len(tt.indexes)-1]
			last.cols = append(last.cols, p)
		}
		if len(tt.indexes) == 0 {
			return fmt.Errorf("index definitions of %s: none", t.name)
		}
		tables = append(tables, tt)
	}
	cn.c.tables = tables
	return nil
}

// asString renders a value; NULL as a string no column holds.
func asString(v driver.Value) string {
	switch x := v.(type) {
	case nil:
		return "\x01NULL"
	case []byte:
		return string(x)
	default:
		return fmt.Sprint(x)
	}
}

// snapshot is, per table, per primary key, each index's key tuple.
type snapshot []map[string][]string

func (cn *ixConn) snapshot(ctx context.Context) (snapshot, error) {
	ids := make([]string, len(cn.c.sample))
	for i, id := range cn.c.sample {
		ids[i] = fmt.Sprint(id)
	}
	snap := make(snapshot, len(cn.c.tables))
	for ti, t := range cn.c.tables {
		cols := make([]string, len(t.cols))
		for i, c := range t.cols {
			cols[i] = "`" + c + "`"
		}
		rows, err := cn.query(ctx, "SELECT `"+t.pk+"`, "+strings.Join(cols, ", ")+" FROM "+t.name+
			" FORCE INDEX (PRIMARY) WHERE `"+t.filter+"` IN ("+strings.Join(ids, ",")+")")
		if err != nil {
			return nil, fmt.Errorf("snapshot %s: %w", t.name, err)
		}
		m := make(map[string][]string, len(rows))
		for _, r := range rows {
			keys := make([]string, len(t.indexes))
			for i, ix := range t.indexes {
				parts := make([]string, len(ix.cols))
				for j, p := range ix.cols {
					parts[j] = r[1+p]
				}
				keys[i] = strings.Join(parts, "\x00")
			}
			m[r[0]] = keys
		}
		snap[ti] = m
	}
	return snap, nil
}

// count adds the index entries changed between before and after to stmt.
func (c *IndexWriteCounter) count(stmt string, before, after snapshot) {
	c.stmts[stmt]++
	add := func(t ixTable, i int) {
		c.byStmt[stmt]++
		c.byIndex[stmt+"\x00"+t.name+"."+t.indexes[i].name]++
	}
	for ti, t := range c.tables {
		for pk, a := range after[ti] {
			b, ok := before[ti][pk]
			for i := range t.indexes {
				if !ok || b[i] != a[i] {
					add(t, i)
				}
			}
		}
		for pk := range before[ti] {
			if _, ok := after[ti][pk]; !ok {
				for i := range t.indexes {
					add(t, i)
				}
			}
		}
	}
}

// exec runs one statement, counting its index writes when it writes and a
// sample is set.
func (cn *ixConn) exec(ctx context.Context, q string, run func() (driver.Result, error)) (driver.Result, error) {
	if !isWrite(q) {
		return run()
	}
	cn.c.mu.Lock()
	defer cn.c.mu.Unlock()
	if len(cn.c.sample) == 0 {
		return run()
	}
	if err := cn.load(ctx); err != nil {
		return nil, err
	}
	before, err := cn.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	res, err := run()
	if err != nil {
		return res, err
	}
	after, serr := cn.snapshot(ctx)
	if serr != nil {
		return nil, serr
	}
	cn.c.count(stmtName(q), before, after)
	return res, nil
}

func (cn *ixConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	return cn.exec(ctx, q, func() (driver.Result, error) {
		return cn.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
	})
}

func (cn *ixConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	return cn.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}

func (cn *ixConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	st, err := cn.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	return &ixStmt{Stmt: st, cn: cn, q: q}, nil
}

func (cn *ixConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return cn.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

type ixStmt struct {
	driver.Stmt
	cn *ixConn
	q  string
}

func (s *ixStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	return s.cn.exec(ctx, s.q, func() (driver.Result, error) {
		return s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
	})
}

func (s *ixStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	return s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
}

func (s *ixStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if c, ok := s.Stmt.(driver.NamedValueChecker); ok {
		return c.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}
