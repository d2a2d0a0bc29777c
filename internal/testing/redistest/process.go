package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Process is a redis-server of a test's own, on a private port and data
// directory, that the test may kill, pause and restart: what no shared
// server allows. Tests that need one skip where redis-server is not
// installed, unless COUNTERSIGN_REQUIRE_REDIS_SERVER is set (CI).
type Process struct {
	t    testing.TB
	Port int
	Dir  string
	args []string
	cmd  *exec.Cmd
}

// StartProcess starts redis-server with extra configuration arguments
// (e.g. "--appendonly", "yes"). It is stopped when the test ends.
func StartProcess(t testing.TB, args ...string) *Process {
	t.Helper()
	bin := serverBinary(t)
	p := &Process{t: t, Dir: t.TempDir(), args: args}
	// A port free when chosen can be taken before redis-server binds it
	// (and a cluster node binds port+10000 too): choose again then.
	for try := 1; ; try++ {
		p.Port = freePort(t)
		err := p.launch(bin)
		if err == nil {
			break
		}
		log, _ := os.ReadFile(filepath.Join(p.Dir, "redis.log"))
		if try == 5 || !strings.Contains(string(log), "Address already in use") {
			t.Fatalf("redistest: redis-server did not start: %v\n%s", err, log)
		}
		_ = os.Remove(filepath.Join(p.Dir, "redis.log"))
	}
	t.Cleanup(p.Stop)
	return p
}

// serverBinary is redis-server's path; without one the test skips, or
// fails where COUNTERSIGN_REQUIRE_REDIS_SERVER is set (CI).
func serverBinary(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("COUNTERSIGN_REQUIRE_REDIS_SERVER") != "" {
			t.Fatal("redis-server is not installed")
		}
		t.Skip("redis-server is not installed")
	}
	return bin
}

// freePort returns a port that is free on loopback, and whose cluster bus
// port (port+10000) is free too.
func freePort(t testing.TB) int {
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		if port+10000 <= 65535 {
			if bus, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port+10000)); err == nil {
				_ = bus.Close()
				_ = ln.Close()
				return port
			}
		}
		_ = ln.Close()
	}
}

func (p *Process) start(bin string) {
	if err := p.launch(bin); err != nil {
		log, _ := os.ReadFile(filepath.Join(p.Dir, "redis.log"))
		p.t.Fatalf("redistest: redis-server did not start: %v\n%s", err, log)
	}
}

// launch starts redis-server on p.Port and waits until it answers.
func (p *Process) launch(bin string) error {
	args := append([]string{"--port", strconv.Itoa(p.Port), "--bind", "127.0.0.1", "--dir", p.Dir,
		"--save", "", "--daemonize", "no", "--logfile", filepath.Join(p.Dir, "redis.log")}, p.args...)
	p.cmd = exec.Command(bin, args...)
	if err := p.cmd.Start(); err != nil {
		p.t.Fatalf("redistest: start redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 500 * time.Millisecond}) // what holds the port may not be redis
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.Ping(context.Background()).Err()
		if err == nil {
			return nil
		}
		if log, _ := os.ReadFile(filepath.Join(p.Dir, "redis.log")); strings.Contains(string(log), "aborting") {
			p.Kill() // it could not listen, or failed otherwise: it is ending
			return fmt.Errorf("redis-server aborted: %w", err)
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Addr is host:port.
func (p *Process) Addr() string { return fmt.Sprintf("127.0.0.1:%d", p.Port) }

// URL is its redis:// URL.
func (p *Process) URL() string { return "redis://" + p.Addr() }

// Kill ends it with SIGKILL: nothing is flushed beyond what its persistence
// settings already wrote.
func (p *Process) Kill() {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
	p.cmd = nil
}

// Restart starts it again on the same port and data directory (with AOF
// on, what it had acknowledged comes back).
func (p *Process) Restart() {
	p.Kill()
	bin, _ := exec.LookPath("redis-server")
	p.start(bin)
}

// Pause stops it with SIGSTOP: connections stay open and nothing answers.
func (p *Process) Pause() { p.signal(syscall.SIGSTOP) }

// Resume continues a paused server.
func (p *Process) Resume() { p.signal(syscall.SIGCONT) }

func (p *Process) signal(s syscall.Signal) {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(s)
	}
}

// Stop ends it (resuming it first if paused).
func (p *Process) Stop() {
	p.Resume()
	p.Kill()
}
