package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"syscall"
	"time"

	"github.com/jobq/jobq/testbed/chaos/checker"
)

// clockSkewWrap is the command prefix of a clock-skew replica: a new Linux
// time namespace whose CLOCK_MONOTONIC and CLOCK_BOOTTIME run offset by
// skew. Linux cannot offset CLOCK_REALTIME per process, and LD_PRELOAD
// clock fakers (libfaketime) do not reach a Go binary, which reads the
// clock through the vDSO; so the replica's wall clock stays true and its
// monotonic clock — the one Go's timers, leases-in-memory and heartbeats
// use — is the faked one. jobq never sends a replica clock reading to the
// database: every lease and run_at comparison is NOW(6) in SQL.
func clockSkewWrap(skew time.Duration) []string {
	s := strconv.FormatInt(int64(skew.Seconds()), 10)
	return []string{"unshare", "--time", "--monotonic=" + s, "--boottime=" + s, "--"}
}

// midJobWait bounds how long a replica fault waits for its target to hold
// a running job, so that kill, pause and term strike mid-job.
const midJobWait = 3 * time.Second

// injector runs the fault plan against a cluster.
type injector struct {
	cl   *cluster
	db   *sql.DB // direct connection, for "what does the target hold"
	toDB func(time.Time) time.Time
}

func (in *injector) runningOn(ctx context.Context, owner string) int {
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var n int
	_ = in.db.QueryRowContext(qctx, "SELECT COUNT(*) FROM job_queue WHERE status='RUNNING' AND owner=?", owner).Scan(&n)
	return n
}

// run injects the plan in order (each fault is lifted before the next one
// starts) and returns the fault log.
func (in *injector) run(ctx context.Context, start time.Time, plan []plannedFault) []checker.Fault {
	var out []checker.Fault
	for _, pf := range plan {
		if d := time.Until(start.Add(pf.At)); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return out
			case <-t.C:
			}
		}
		if ctx.Err() != nil {
			return out
		}
		f := in.inject(ctx, pf)
		in.cl.cfg.Log.Info("fault", "component", "chaos", "kind", f.Kind, "target", f.Target, "owner", f.Owner,
			"running_at_start", f.RunningAtStart, "lasted", f.End.Sub(f.Start).Round(time.Millisecond), "err", f.Err)
		out = append(out, f)
	}
	return out
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (in *injector) inject(ctx context.Context, pf plannedFault) checker.Fault {
	if pf.Cmd != nil {
		return in.runFaultCmd(ctx, pf.Cmd)
	}
	cfg := in.cl.cfg
	f := checker.Fault{Kind: pf.Kind}
	fail := func(err error) checker.Fault {
		f.Err = err.Error()
		if f.End.IsZero() {
			f.End = in.toDB(time.Now())
		}
		return f
	}
	if pf.Kind == FaultDBRestart {
		f.Detail = fmt.Sprintf("database SIGKILLed, down %s", cfg.DBDownFor)
		f.Start = in.toDB(time.Now())
		if err := in.cl.local.Kill(); err != nil {
			return fail(err)
		}
		sleepCtx(ctx, cfg.DBDownFor)
		sctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		if err := in.cl.local.Start(sctx); err != nil {
			return fail(fmt.Errorf("restart database: %w", err))
		}
		f.End = in.toDB(time.Now())
		return f
	}
	if pf.Kind == FaultReadOnly {
		f.Detail = fmt.Sprintf("SET GLOBAL read_only=1 for %s", cfg.ReadOnlyFor)
		if in.cl.local == nil {
			return fail(fmt.Errorf("fault %s needs the run's own database", pf.Kind))
		}
		f.Start = in.toDB(time.Now())
		if _, err := in.db.ExecContext(ctx, "SET GLOBAL read_only = 1"); err != nil {
			return fail(fmt.Errorf("set read_only: %w", err))
		}
		sleepCtx(ctx, cfg.ReadOnlyFor)
		if _, err := in.db.ExecContext(context.WithoutCancel(ctx), "SET GLOBAL read_only = 0"); err != nil {
			return fail(fmt.Errorf("clear read_only: %w", err))
		}
		f.End = in.toDB(time.Now())
		return f
	}
	if workerFaults[pf.Kind] {
		if err := in.injectWorker(ctx, pf, &f); err != nil {
			return fail(err)
		}
		return f
	}
	if pf.Target < 0 {
		f.Target = "" // the database
		if in.cl.topo == nil || !in.cl.topo.inject(ctx, in, pf, &f) {
			return fail(fmt.Errorf("fault %s needs a topology that has it", pf.Kind))
		}
		return f
	}
	n := in.cl.nodes[pf.Target]
	n.setBusy(true)
	defer n.setBusy(false)
	r := n.current()
	f.Target, f.Owner = n.name, n.owner()
	// Strike mid-job: wait up to midJobWait for the target to hold a run.
	for deadline := time.Now().Add(midJobWait); ; {
		f.RunningAtStart = in.runningOn(ctx, f.Owner)
		if f.RunningAtStart > 0 || pf.Kind == FaultLatency || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		sleepCtx(ctx, 20*time.Millisecond)
	}
	if in.cl.remote != nil {
		// The workers that talk to the target: their calls hang or fail
		// while it is down, so their runs are the fault's too.
		f.Workers = in.cl.remote.attachedTo(n)
	}
	restart := func() {
		sleepCtx(ctx, cfg.KillRestartDelay)
		sctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		if _, err := in.cl.startIncarnation(sctx, n); err != nil {
			f.Err = fmt.Sprintf("restart %s: %v", n.name, err)
		}
		f.End = in.toDB(time.Now())
	}
	switch pf.Kind {
	case FaultReplicaKill:
		f.Detail = fmt.Sprintf("SIGKILL while workers long-poll it, restart after %s", cfg.KillRestartDelay)
		f.Start = in.toDB(time.Now())
		r.Kill()
		restart()
	case FaultKill:
		f.Detail = fmt.Sprintf("SIGKILL, restart after %s", cfg.KillRestartDelay)
		f.Start = in.toDB(time.Now())
		r.Kill()
		restart()
	case FaultTerm:
		f.Detail = fmt.Sprintf("SIGTERM (shutdown timeout %s), restart after %s", cfg.ShutdownTimeout, cfg.KillRestartDelay)
		f.Start = in.toDB(time.Now())
		r.Stop(cfg.ShutdownTimeout + 10*time.Second)
		restart()
	case FaultPause:
		f.Detail = fmt.Sprintf("SIGSTOP for %s (lease %s), then SIGCONT", cfg.PauseFor, cfg.Lease)
		f.Start = in.toDB(time.Now())
		r.Signal(syscall.SIGSTOP)
		sleepCtx(ctx, cfg.PauseFor)
		r.Signal(syscall.SIGCONT)
		f.End = in.toDB(time.Now())
	case FaultPartition:
		f.Detail = fmt.Sprintf("database link blackholed for %s", cfg.PartitionFor)
		f.Start = in.toDB(time.Now())
		heal, err := n.link.cut()
		if err != nil {
			return fail(err)
		}
		sleepCtx(ctx, cfg.PartitionFor)
		heal()
		f.End = in.toDB(time.Now())
	case FaultLatency:
		f.Detail = fmt.Sprintf("+%s each way on the database link for %s", cfg.Latency, cfg.LatencyFor)
		f.Start = in.toDB(time.Now())
		undo, err := n.link.slow(cfg.Latency)
		if err != nil {
			return fail(err)
		}
		sleepCtx(ctx, cfg.LatencyFor)
		undo()
		f.End = in.toDB(time.Now())
	case FaultReset:
		f.Detail = fmt.Sprintf("connections reset (TCP RST) on every send for %s", cfg.ResetFor)
		f.Start = in.toDB(time.Now())
		undo, err := n.link.reset()
		if err != nil {
			return fail(err)
		}
		sleepCtx(ctx, cfg.ResetFor)
		undo()
		f.End = in.toDB(time.Now())
	case FaultClockSkew:
		f.Detail = fmt.Sprintf("restarted in a time namespace with monotonic/boot clocks +%s (stays skewed)", cfg.ClockSkew)
		f.Start = in.toDB(time.Now())
		r.Stop(cfg.ShutdownTimeout + 10*time.Second)
		n.mu.Lock()
		n.wrap = clockSkewWrap(cfg.ClockSkew)
		n.mu.Unlock()
		restart()
	default:
		if in.cl.topo != nil && in.cl.topo.inject(ctx, in, pf, &f) {
			return f
		}
		return fail(fmt.Errorf("unknown fault %q", pf.Kind))
	}
	return f
}
