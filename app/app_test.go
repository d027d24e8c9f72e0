package app

import (
	"context"
	"net"
	"strings"
	"testing"
)

// A taken port fails Start before the database is touched (so before any
// scheduler could claim a job): the DSN here names a server that does not
// exist, and the error must be the listener's.
func TestStartBindsBeforeTheDatabase(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = Start(context.Background(), Config{DSN: "root@tcp(127.0.0.1:1)/jobq", Listen: ln.Addr().String()})
	if err == nil || !strings.HasPrefix(err.Error(), "listen "+ln.Addr().String()+": ") || !strings.Contains(err.Error(), "--listen") {
		t.Fatalf("Start on a taken port: err = %v, want the listen error", err)
	}
}

// A --listen host that is not an address is looked up as a name: "0:8080"
// fails on the lookup of "0". The error says so, not that the port is
// taken (it used to blame the port).
func TestStartListenBadHostNamesTheHost(t *testing.T) {
	for _, listen := range []string{"0:18089", "no-such-host.invalid:18089"} {
		_, err := Start(context.Background(), Config{DSN: "root@tcp(127.0.0.1:1)/jobq", Listen: listen})
		if err == nil {
			t.Fatalf("Start with --listen %s succeeded", listen)
		}
		msg := err.Error()
		host, _, _ := strings.Cut(listen, ":")
		if strings.Contains(msg, "uses the port") || !strings.Contains(msg, "the host \""+host+"\" is not an address") || !strings.Contains(msg, "0.0.0.0:8080") {
			t.Errorf("--listen %s: %v; want the host named, and no blame on the port", listen, err)
		}
	}
}
