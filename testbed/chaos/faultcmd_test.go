package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/testbed/chaos/checker"
)

func TestParseFaultCmd(t *testing.T) {
	fc, err := ParseFaultCmd(`name=ro,start=mariadb -e "SET GLOBAL read_only=1, sql_log_off=0",stop=mariadb -e "SET GLOBAL read_only=0",at=5s,for=1500ms`)
	if err != nil {
		t.Fatal(err)
	}
	want := FaultCmd{Name: "ro", Kind: FaultReadOnly, Start: `mariadb -e "SET GLOBAL read_only=1, sql_log_off=0"`,
		Stop: `mariadb -e "SET GLOBAL read_only=0"`, At: 5 * time.Second, For: 1500 * time.Millisecond, Timeout: time.Minute}
	if fc != want {
		t.Fatalf("got %+v\nwant %+v", fc, want)
	}
	fc, err = ParseFaultCmd("name=switch,kind=failover,start=sh switch.sh,at=3s,timeout=20s")
	if err != nil || fc.Kind != FaultFailover || fc.Stop != "" || fc.Timeout != 20*time.Second {
		t.Fatalf("got %+v, %v", fc, err)
	}
	for in, msg := range map[string]string{
		"start=true,at=1s":                       "name is required",
		"name=a,at=1s":                           "start is required",
		"name=a,start=true":                      "at is required",
		"name=a,start=true,at=1s,for=2s":         "for needs a stop command",
		"name=a,start=true,at=1s,kind=kill":      `kind "kill": want one of read-only, failover`,
		"name=a,start=true,at=soon":              "at: time: invalid duration",
		"name=a,start=true,at=1s,name=b":         "name given twice",
		"name=a,start=true,at=1s,stop=x,for=-1s": "for must be ≥ 0",
	} {
		if _, err := ParseFaultCmd(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseFaultCmd(%q) = %v, want %q", in, err, msg)
		}
	}
}

// mariadbCLI is the mariadb client command line for root on s over TCP.
func mariadbCLI(s *topoServer) string {
	return fmt.Sprintf("mariadb --protocol=TCP -h127.0.0.1 -P%d -uroot", s.port)
}

func startTestServer(t *testing.T, dir, name string, port int, args []string) *topoServer {
	t.Helper()
	s, err := newTopoServer(context.Background(), dir, name, port, true, args)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.stop(30 * time.Second) })
	return s
}

func testDir(t *testing.T, kind string) string {
	t.Helper()
	dir, err := topoDir(kind)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// A user's own read_only flip, on an external server given by --dsn (a
// throwaway mariadbd here, standing in for the user's: the shared test
// server must not go read-only), runs as a fault and is judged like the
// built-in read-only fault: 1.5 s ≥ 7·lease/15, every job done, valid.
func TestFaultCmdReadOnlyOnExternalServer(t *testing.T) {
	ports, err := lowPorts(1)
	if err != nil {
		t.Fatal(err)
	}
	srv := startTestServer(t, testDir(t, "faultcmd-ro"), "db", ports[0], nil)
	cfg := quick(t, "fault-cmd-ro")
	cfg.DSN = "root@tcp(" + srv.addr() + ")/"
	cfg.Jobs, cfg.Duration, cfg.Runtime, cfg.MaxRetry = 300, 6*time.Second, "uniform:200ms-600ms", 3
	cfg.FaultCmds = []FaultCmd{{Name: "ro", Kind: FaultReadOnly, Timeout: 20 * time.Second, At: 2 * time.Second, For: 1500 * time.Millisecond,
		Start: mariadbCLI(srv) + ` -e "SET GLOBAL read_only=1"`, Stop: mariadbCLI(srv) + ` -e "SET GLOBAL read_only=0"`}}
	rf, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	readResult(t, cfg.OutDir)
	if !rf.Valid || rf.Result.Counts.Completed != 300 {
		t.Fatalf("valid %v, completed %d, violations %+v, fault errors %v", rf.Valid, rf.Result.Counts.Completed, rf.Result.Violations, rf.FaultErrors)
	}
	if len(rf.Result.Faults) != 1 {
		t.Fatalf("faults %+v, want the one fault-cmd", rf.Result.Faults)
	}
	f := rf.Result.Faults[0]
	if f.Kind != FaultReadOnly || f.Err != "" || !strings.Contains(f.Detail, "fault-cmd ro: start `mariadb") || f.End.Sub(f.Start) < 1500*time.Millisecond {
		t.Fatalf("fault %+v", f)
	}
	// The flip reached the replicas: their writes were refused (1290).
	logs, _ := filepath.Glob(filepath.Join(cfg.OutDir, "logs", "replica-*.log"))
	refused := false
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		refused = refused || strings.Contains(string(b), "read-only") || strings.Contains(string(b), "1290")
	}
	if !refused {
		t.Fatalf("no replica log mentions a read-only refusal: the fault did not reach them (%v)", logs)
	}
	if b, err := os.ReadFile(filepath.Join(cfg.OutDir, "logs", "fault-ro.log")); err != nil || !strings.Contains(string(b), "== ") {
		t.Fatalf("fault-ro.log: %v %q", err, b)
	}
}

// A primary switch through a proxy the user runs: two mariadbd (db-b
// replicates db-a), a toxiproxy server in front (--dsn is its listen
// address), and a fault command that demotes db-a, waits until db-b has
// applied everything db-a wrote, promotes db-b and points the proxy at it
// through toxiproxy's HTTP API. The run continues on db-b and is valid.
func TestFaultCmdPrimarySwitchThroughProxy(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is needed by the worked example's switch script")
	}
	dir := testDir(t, "faultcmd-switch")
	ports, err := lowPorts(4)
	if err != nil {
		t.Fatal(err)
	}
	a := startTestServer(t, dir, "db-a", ports[0], replicationArgs(1, ReplicationAsync))
	b := startTestServer(t, dir, "db-b", ports[1], replicationArgs(2, ReplicationAsync))
	pr := &primaryReplica{mode: ReplicationAsync, primary: a}
	if err := pr.follow(context.Background(), b, a.addr()); err != nil {
		t.Fatal(err)
	}
	toxi := filepath.Join(t.TempDir(), "toxiproxy-server")
	if out, err := exec.Command("go", "build", "-o", toxi, "github.com/Shopify/toxiproxy/v2/cmd/server").CombinedOutput(); err != nil {
		t.Fatalf("build toxiproxy-server: %v: %s", err, out)
	}
	api := "127.0.0.1:" + strconv.Itoa(ports[2])
	front := "127.0.0.1:" + strconv.Itoa(ports[3])
	proxyCmd := exec.Command(toxi, "-host", "127.0.0.1", "-port", strconv.Itoa(ports[2]))
	if err := proxyCmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxyCmd.Process.Kill(); _ = proxyCmd.Wait() })
	create := fmt.Sprintf(`{"name":"primary","listen":%q,"upstream":%q}`, front, a.addr())
	for deadline := time.Now().Add(20 * time.Second); ; {
		resp, err := http.Post("http://"+api+"/proxies", "application/json", strings.NewReader(create))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("create proxy: %s", resp.Status)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("toxiproxy API on %s: %v", api, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	script := filepath.Join(dir, "switch.sh")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(`set -eu
A="%[1]s" B="%[2]s"
$A -e "SET GLOBAL read_only=1"                        # demote the primary
pos=$($A -N -e "SELECT @@gtid_binlog_pos")            # everything it committed
test "$($B -N -e "SELECT MASTER_GTID_WAIT('$pos', 30)")" = 0
$B -e "STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only=0"   # promote the replica
curl -fsS -X POST http://%[3]s/proxies/primary -d '{"upstream":"%[4]s"}'   # switch the proxy
`, mariadbCLI(a), mariadbCLI(b), api, b.addr())), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := quick(t, "fault-cmd-switch")
	cfg.DSN = "root@tcp(" + front + ")/"
	cfg.Jobs, cfg.Duration, cfg.Runtime = 300, 6*time.Second, "uniform:100ms-400ms"
	cfg.FaultCmds = []FaultCmd{{Name: "switch", Kind: FaultFailover, Start: "sh " + script, At: 2500 * time.Millisecond, Timeout: 40 * time.Second}}
	rf, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	readResult(t, cfg.OutDir)
	if !rf.Valid || rf.Result.Counts.Completed != 300 || len(rf.Result.Faults) != 1 || rf.Result.Faults[0].Err != "" {
		t.Fatalf("valid %v, completed %d, violations %+v, faults %+v", rf.Valid, rf.Result.Counts.Completed, rf.Result.Violations, rf.Result.Faults)
	}
	// The proxy now forwards to db-b, and jobs were claimed there after
	// the switch.
	resp, err := http.Get("http://" + api + "/proxies/primary")
	if err != nil {
		t.Fatal(err)
	}
	var p struct{ Upstream string }
	err = json.NewDecoder(resp.Body).Decode(&p)
	resp.Body.Close()
	if err != nil || p.Upstream != b.addr() {
		t.Fatalf("proxy upstream %q (%v), want %s", p.Upstream, err, b.addr())
	}
	f := rf.Result.Faults[0]
	after := 0
	h, err := readHistoryFile(cfg.OutDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range h.Executions {
		if e.StartedAt.After(f.End) {
			after++
		}
	}
	if after == 0 {
		t.Fatalf("no attempt claimed after the switch at %s", f.End)
	}
	t.Logf("switch took %s; %d attempts claimed on db-b after it; pickup p99 %.0f ms", f.End.Sub(f.Start).Round(time.Millisecond), after, rf.Result.Pickup.P99)
}

func readHistoryFile(dir string) (checker.History, error) {
	return checker.ReadNDJSONFile(filepath.Join(dir, "history.ndjson"))
}
