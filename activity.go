package jobq

import "time"

// ActivityRecentRows bounds the job_execution rows an Activity reads: only
// the newest this many (by id), so the console's overview costs the same
// whatever the table holds. Under more than this many attempts per window
// the older minutes are undercounted (Activity.Bounded says so).
const ActivityRecentRows = 100000

// MinuteActivity is what the cluster did in one minute, from job_execution.
type MinuteActivity struct {
	// MinutesAgo is 0 for the minute ending now, 1 for the one before, …
	MinutesAgo int `json:"minutes_ago"`
	// Started counts attempts claimed in the minute; PickupAvg and PickupMax
	// are their pickup latency (claim − due time, database clock).
	Started   int64         `json:"started"`
	PickupAvg time.Duration `json:"pickup_avg"`
	PickupMax time.Duration `json:"pickup_max"`
	// Finished counts attempts finished in the minute, by outcome.
	Finished map[Outcome]int64 `json:"finished"`
}

// FinishedTotal is the minute's throughput: attempts finished, any outcome.
func (m MinuteActivity) FinishedTotal() int64 {
	var n int64
	for _, v := range m.Finished {
		n += v
	}
	return n
}

// ReplicaActivity is one replica (owner) seen recently: it started attempts
// within the window or holds RUNNING jobs now.
type ReplicaActivity struct {
	Owner string `json:"owner"`
	// Attempts counts attempts it started within the window.
	Attempts int64 `json:"attempts"`
	// LastStarted and LastFinished are its latest attempt start and finish
	// within the window (nil when none).
	LastStarted  *time.Time `json:"last_started,omitempty"`
	LastFinished *time.Time `json:"last_finished,omitempty"`
	// Running counts the RUNNING jobs it holds now; LeaseUntil is the latest
	// of their leases (nil when none). A heartbeat renews all of a replica's
	// leases to NOW(6)+lease, so its last heartbeat was at LeaseUntil − lease.
	Running    int64      `json:"running"`
	LeaseUntil *time.Time `json:"lease_until,omitempty"`
}

// Activity is the recent throughput, pickup latency and replicas of the
// whole cluster, read from the database (every replica's attempts).
type Activity struct {
	DBNow time.Time `json:"db_now"`
	// Minutes lists the last Window minutes, newest first, one entry each.
	Minutes  []MinuteActivity  `json:"minutes"`
	Replicas []ReplicaActivity `json:"replicas"`
	// Bounded is true when the newest ActivityRecentRows attempts did not
	// reach back over the whole window.
	Bounded bool `json:"bounded"`
}
