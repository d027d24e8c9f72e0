package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/jobq/jobq/testbed/chaos/checker"
)

// FaultCmd is a user-supplied fault (`jobq chaos --fault-cmd`): a shell
// command that starts it, an optional one that lifts it, and when. The
// harness runs them against the user's own stack (their failover, their
// proxy, their server's read_only) and the checker judges the run as it
// judges built-in faults: the fault is logged with Kind (which decides the
// rescues it excuses), Start when Start was launched and End when Stop
// returned (when Start returned, without Stop).
type FaultCmd struct {
	// Name labels the fault in the report ("ro", "takeover").
	Name string
	// Kind is the built-in fault kind whose excuses it takes (see
	// FaultCmdKinds). Defaults to read-only: the strictest database-wide
	// kind, excusing a rescue only when it lasted ≥ 7·Lease/15.
	Kind string
	// Start and Stop are run with `sh -c`; a non-zero exit is a fault error
	// (the run is then invalid, as when a built-in fault fails).
	Start, Stop string
	// At is the offset from the workload start; For how long after Start
	// returned Stop runs.
	At, For time.Duration
	// Timeout bounds each command. Defaults to 60s.
	Timeout time.Duration
}

// FaultCmdKinds are the kinds a FaultCmd may take, with what the checker
// excuses for each (checker.Fault.Excuses): read-only (a refusal:
// rescues only when ≥ 7·Lease/15), failover (cluster-wide: any rescue
// while it lasts and a lease after), db-restart (a database outage),
// latency, reset (nothing: lost connections must be retried).
var FaultCmdKinds = []string{FaultReadOnly, FaultFailover, FaultDBRestart, FaultLatency, FaultReset}

// faultCmdKeys splits a --fault-cmd value: a comma starts a new field only
// when a known key and "=" follow it, so commands may contain commas.
var faultCmdKeys = regexp.MustCompile(`,\s*(name|kind|start|stop|at|for|timeout)=`)

// ParseFaultCmd parses one --fault-cmd value:
//
//	name=NAME,start=CMD[,stop=CMD],at=OFFSET[,for=DURATION][,kind=KIND][,timeout=DURATION]
//
// e.g. name=ro,start=mariadb -e "SET GLOBAL read_only=1",stop=mariadb -e
// "SET GLOBAL read_only=0",at=5s,for=5s. Commands run with `sh -c`.
func ParseFaultCmd(s string) (FaultCmd, error) {
	fc := FaultCmd{Kind: FaultReadOnly, Timeout: time.Minute}
	bad := func(format string, a ...any) (FaultCmd, error) {
		return FaultCmd{}, fmt.Errorf("fault-cmd %q: "+format, append([]any{s}, a...)...)
	}
	idx := faultCmdKeys.FindAllStringIndex(s, -1)
	var fields []string
	prev := 0
	for _, m := range idx {
		fields = append(fields, s[prev:m[0]])
		prev = m[0] + 1
	}
	fields = append(fields, s[prev:])
	seen := map[string]bool{}
	for _, f := range fields {
		k, v, ok := strings.Cut(strings.TrimSpace(f), "=")
		if !ok {
			return bad("field %q: want key=value with key name, kind, start, stop, at, for or timeout", f)
		}
		if seen[k] {
			return bad("%s given twice", k)
		}
		seen[k] = true
		var err error
		switch k {
		case "name":
			fc.Name = v
		case "kind":
			fc.Kind = v
		case "start":
			fc.Start = v
		case "stop":
			fc.Stop = v
		case "at":
			fc.At, err = time.ParseDuration(v)
		case "for":
			fc.For, err = time.ParseDuration(v)
		case "timeout":
			fc.Timeout, err = time.ParseDuration(v)
		default:
			return bad("unknown key %q: want name, kind, start, stop, at, for or timeout", k)
		}
		if err != nil {
			return bad("%s: %v", k, err)
		}
	}
	switch {
	case fc.Name == "" || strings.ContainsAny(fc.Name, " /"):
		return bad("name is required (no spaces or slashes)")
	case strings.TrimSpace(fc.Start) == "":
		return bad("start is required (a shell command)")
	case !seen["at"] || fc.At < 0:
		return bad("at is required (offset from the workload start, ≥ 0)")
	case fc.For < 0 || fc.Timeout <= 0:
		return bad("for must be ≥ 0 and timeout > 0")
	case fc.For > 0 && fc.Stop == "":
		return bad("for needs a stop command")
	case !slices.Contains(FaultCmdKinds, fc.Kind):
		return bad("kind %q: want one of %s", fc.Kind, strings.Join(FaultCmdKinds, ", "))
	}
	return fc, nil
}

// runFaultCmd injects a user-supplied fault. Its commands get the run's
// database name and server address (never its credentials) in
// JOBQ_CHAOS_DATABASE and JOBQ_CHAOS_SERVER_ADDR, and write their output
// to logs/fault-<name>.log.
func (in *injector) runFaultCmd(ctx context.Context, fc *FaultCmd) checker.Fault {
	f := checker.Fault{Kind: fc.Kind}
	detail := []string{"fault-cmd " + fc.Name + ": start `" + fc.Start + "`"}
	if fc.Stop != "" {
		detail = append(detail, fmt.Sprintf("stop `%s` after %s", fc.Stop, fc.For))
	}
	f.Detail = strings.Join(detail, ", ")
	var env []string
	if c, err := mysql.ParseDSN(in.cl.dsn); err == nil {
		env = append(env, "JOBQ_CHAOS_DATABASE="+c.DBName, "JOBQ_CHAOS_SERVER_ADDR="+c.Addr)
	}
	logPath := filepath.Join(in.cl.logDir, "fault-"+fc.Name+".log")
	run := func(what, cmd string) error {
		lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer lf.Close()
		fmt.Fprintf(lf, "== %s %s: %s\n", time.Now().UTC().Format(time.RFC3339Nano), what, cmd)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fc.Timeout)
		defer cancel()
		c := exec.CommandContext(cctx, "sh", "-c", cmd)
		c.Env = append(os.Environ(), env...)
		c.Stdout, c.Stderr = lf, lf
		if err := c.Run(); err != nil {
			return fmt.Errorf("fault-cmd %s: %s command: %w (output in %s)", fc.Name, what, err, logPath)
		}
		return nil
	}
	f.Start = in.toDB(time.Now())
	if err := run("start", fc.Start); err != nil {
		f.Err = err.Error()
	}
	if fc.Stop != "" {
		sleepCtx(ctx, fc.For)
		if err := run("stop", fc.Stop); err != nil && f.Err == "" {
			f.Err = err.Error()
		}
	}
	f.End = in.toDB(time.Now())
	return f
}
