package redistest

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A redis-server that cannot bind its port is seen to fail at once (so
// StartProcess can choose another port), not after the 10 s start timeout.
func TestLaunchOnATakenPortFailsAtOnce(t *testing.T) {
	bin := serverBinary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p := &Process{t: t, Port: ln.Addr().(*net.TCPAddr).Port, Dir: t.TempDir()}
	start := time.Now()
	if err := p.launch(bin); err == nil {
		p.Stop()
		t.Fatal("redis-server started on a taken port")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %s to see the failure", took)
	}
	if log, _ := os.ReadFile(filepath.Join(p.Dir, "redis.log")); !strings.Contains(string(log), "Address already in use") {
		t.Errorf("log: %s", log)
	}
	if p.cmd != nil {
		t.Error("the failed process is still held")
	}
}

// Ports come with their cluster bus port free.
func TestFreePortLeavesTheBusPortFree(t *testing.T) {
	for range 20 {
		port := freePort(t)
		if port+10000 > 65535 {
			t.Fatalf("port %d has no bus port", port)
		}
	}
}
