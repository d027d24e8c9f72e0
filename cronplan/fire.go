package cronplan

import (
	"time"

	"github.com/robfig/cron/v3"

	"github.com/jobq/jobq"
)

// maxCountedSkips bounds the instants PlanFire walks to count the skipped
// instants past the ones it lists (about ten days of an every-second
// schedule); "@every" schedules are counted by arithmetic, whatever the gap.
const maxCountedSkips = 1 << 20

// PlanFire is Plan plus what the fire ledger needs: the due instants the
// misfire policy drops (every instant in [cursor, now−threshold) that is
// not enqueued), the first jobq.FireLedgerMaxSkipped of them listed and the
// rest counted, and the threshold after which an enqueued instant is late.
func PlanFire(sched cron.Schedule, misfire string, threshold time.Duration, cursor, now time.Time) jobq.PeriodicPlan {
	enqueue, next := Plan(sched, misfire, threshold, cursor, now)
	plan := jobq.PeriodicPlan{Enqueue: enqueue, Next: next, LateAfter: threshold}
	if cursor.After(now) {
		return plan
	}
	onTimeFrom := now.Add(-threshold)
	catchUp := map[time.Time]bool{}
	for _, at := range enqueue {
		catchUp[at] = true
	}
	if cd, ok := sched.(cron.ConstantDelaySchedule); ok && cd.Delay > 0 {
		d := cd.Delay
		if !cursor.Before(onTimeFrom) {
			return plan
		}
		total := int64((onTimeFrom.Sub(cursor)-1)/d) + 1 // the instants cursor+k·d before onTimeFrom
		last := cursor.Add(time.Duration(total-1) * d)
		for k := int64(0); k < total; k++ {
			i := cursor.Add(time.Duration(k) * d)
			if catchUp[i] {
				continue
			}
			if len(plan.Skipped) < jobq.FireLedgerMaxSkipped {
				plan.Skipped = append(plan.Skipped, i)
				continue
			}
			plan.SkippedMoreFrom, plan.SkippedMore = i, total-k
			if catchUp[last] && last.After(i) {
				plan.SkippedMore--
			}
			break
		}
		return plan
	}
	n := 0
	for i := sched.Next(cursor.Add(-time.Nanosecond)); !i.IsZero() && i.Before(onTimeFrom) && n < maxCountedSkips; i, n = sched.Next(i), n+1 {
		if catchUp[i] {
			continue
		}
		if len(plan.Skipped) < jobq.FireLedgerMaxSkipped {
			plan.Skipped = append(plan.Skipped, i)
			continue
		}
		if plan.SkippedMore == 0 {
			plan.SkippedMoreFrom = i
		}
		plan.SkippedMore++
	}
	return plan
}

// Instants returns the instants of sched in [from, to), oldest first, at
// most limit of them; more reports that there were further ones. An
// "@every" schedule's instants are from, from+d, … (its cursor anchors them).
func Instants(sched cron.Schedule, from, to time.Time, limit int) (out []time.Time, more bool) {
	if cd, ok := sched.(cron.ConstantDelaySchedule); ok && cd.Delay > 0 {
		for i := from; i.Before(to); i = i.Add(cd.Delay) {
			if len(out) == limit {
				return out, true
			}
			out = append(out, i)
		}
		return out, false
	}
	for i := sched.Next(from.Add(-time.Nanosecond)); !i.IsZero() && i.Before(to); i = sched.Next(i) {
		if len(out) == limit {
			return out, true
		}
		out = append(out, i.UTC())
	}
	return out, false
}
