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
