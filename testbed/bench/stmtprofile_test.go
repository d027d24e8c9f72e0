package bench

import (
	"errors"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

func TestStmtProfileNamesAndTimesStatements(t *testing.T) {
	for q, want := range map[string]string{
		"-- name: JobAdmit :execrows\nUPDATE job_queue": "JobAdmit",
		"  SAVEPOINT jobq_admit":                        "SAVEPOINT jobq_admit",
		"SELECT k.ckey, k.max_running, k.admitted":      "SELECT k.ckey, k.max_running,",
		"COMMIT": "COMMIT",
	} {
		if got := stmtName(q); got != want {
			t.Errorf("stmtName(%q) = %q, want %q", q, got, want)
		}
	}
	var p StmtProfile
	p.add("COMMIT", time.Millisecond, nil)
	p.add("-- name: JobAdmit :execrows\nUPDATE", 3*time.Millisecond, nil)
	p.add("-- name: JobAdmit :execrows\nUPDATE", time.Millisecond, &mysql.MySQLError{Number: 1213})
	p.add("COMMIT", time.Millisecond, errors.New("bad connection"))
	got := p.Stats()
	if len(got) != 2 || got[0].Name != "JobAdmit" || got[0].Count != 2 || got[0].Total != 4*time.Millisecond ||
		got[0].Max != 3*time.Millisecond || got[0].Errors != 1 || got[0].Deadlocks != 1 {
		t.Fatalf("stats: %+v, want JobAdmit first: 2 statements, 4ms, max 3ms, one deadlock", got)
	}
	if got[1].Name != "COMMIT" || got[1].Errors != 1 || got[1].Deadlocks != 0 {
		t.Fatalf("stats[1]: %+v, want COMMIT with one failure, not a deadlock", got[1])
	}
	var nilProfile *StmtProfile
	nilProfile.add("COMMIT", time.Millisecond, nil) // records nothing, never panics
}
