package chaos

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The replicas' logs give the checker the renewals the database did not
// answer in time and the heartbeat stalls; other warnings, and renewals
// that failed otherwise, are not such.
func TestReplicaLogEvidence(t *testing.T) {
	dir := t.TempDir()
	log := `{"time":"2026-12-01T02:57:15.317817841Z","level":"WARN","msg":"lease renewal failed","component":"scheduler","owner":"replica-1.1","component":"heartbeat","runs":16,"err":"lease renew: context deadline exceeded"}
{"time":"2026-12-01T02:57:16.1Z","level":"WARN","msg":"lease renewal failed","owner":"replica-1.1","err":"lease renew: Error 1213 (40001): Deadlock found"}
{"time":"2026-12-01T02:57:16.2Z","level":"WARN","msg":"run lost its lease; cancelling its handler","owner":"replica-1.1","err":"context deadline exceeded"}
not json
{"time":"2026-12-01T02:57:17.5Z","level":"WARN","msg":"no lease renewal succeeded in time; cancelling the handler before its lease expires","owner":"replica-1.1","job_id":1017,"attempt":1}
{"time":"2026-12-01T02:57:20Z","level":"WARN","msg":"heartbeat ran late: this process was not scheduled in time (CPU starvation, a stop or a long pause); leases may have expired meanwhile","component":"scheduler","owner":"replica-1.1","component":"heartbeat","late_ms":1730,"lease_ms":2000,"runs":3}
{"time":"2026-12-01T02:57:21Z","level":"WARN","msg":"heartbeat ran late: no delay","owner":"replica-1.1"}
{"time":"2026-12-01T02:57:22Z","level":"ERROR","msg":"completion failed past the runs' lease deadline; the leases will expire and the jobs will be rescued","owner":"replica-1.1","component":"completer","jobs":3,"job_ids":[1,2,3],"cause":"deadlock","err":"complete: Error 1213 (40001): Deadlock found","tries":9,"retried_ms":1710}
{"time":"2026-12-01T02:57:23Z","level":"ERROR","msg":"transactional completion failed, not retried; the leases will expire and the jobs will be rescued","owner":"replica-1.1","cause":"deadlock","err":"Error 1213"}
`
	if err := os.WriteFile(filepath.Join(dir, "replica-1.1.log"), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	got, stalls, err := ReplicaLogEvidence(dir, func(t time.Time) time.Time { return t.Add(time.Second) })
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Time{time.Date(2026, 12, 1, 2, 57, 16, 317817841, time.UTC), time.Date(2026, 12, 1, 2, 57, 18, 500000000, time.UTC),
		time.Date(2026, 12, 1, 2, 57, 23, 0, time.UTC)}
	if len(got) != len(want) {
		t.Fatalf("slow renewals = %+v, want replica-1.1 at %v", got, want)
	}
	for i := range want {
		if got[i].Owner != "replica-1.1" || !got[i].At.Equal(want[i]) {
			t.Fatalf("slow renewals = %+v, want replica-1.1 at %v", got, want)
		}
	}
	from, to := time.Date(2026, 12, 1, 2, 57, 19, 270000000, time.UTC), time.Date(2026, 12, 1, 2, 57, 21, 0, time.UTC)
	if len(stalls) != 1 || stalls[0].Owner != "replica-1.1" || !stalls[0].From.Equal(from) || !stalls[0].To.Equal(to) {
		t.Fatalf("stalls = %+v, want replica-1.1 from %v to %v", stalls, from, to)
	}
}
