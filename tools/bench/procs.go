package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Every process the bench starts binds 127.0.0.1 on a free port, is given
// a bounded life (the bench's own deadline) and is stopped by its pid.

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// proc is a child process with its log file.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startProc(name, dir string, env []string, bin string, args ...string) (*proc, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the bench
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); f.Close(); close(p.done) }()
	return p, nil
}

// stop ends the process (SIGTERM, then SIGKILL after 10 s).
func (p *proc) stop() {
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// redisProc is a private redis-server: nobody else's load disturbs the
// numbers, and INFO memory counts only what the bench stored.
type redisProc struct {
	*proc
	addr    string
	rdb     *redis.Client
	mu      sync.Mutex
	streams map[string][]string // by pattern, see sumXLen
}

// startRedis starts one with extra arguments ("--name", "value" …) after
// the bench's own.
func startRedis(bin, dir string, extra ...string) (*redisProc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	rdir := filepath.Join(dir, "redis-"+port)
	if err := os.MkdirAll(rdir, 0o700); err != nil {
		return nil, err
	}
	// No persistence: the comparison is of the two servers, and both
	// write to the same Redis.
	args := append([]string{"--port", port, "--bind", "127.0.0.1", "--dir", rdir, "--save", "", "--appendonly", "no",
		"--daemonize", "no", "--maxmemory-policy", "noeviction"}, extra...)
	p, err := startProc("redis-"+port, dir, os.Environ(), bin, args...)
	if err != nil {
		return nil, err
	}
	r := &redisProc{proc: p, addr: addr, rdb: redis.NewClient(&redis.Options{Addr: addr}), streams: map[string][]string{}}
	deadline := time.Now().Add(10 * time.Second)
	for r.rdb.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) || p.exited() {
			p.stop()
			return nil, fmt.Errorf("redis-server did not start (see %s)", p.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return r, nil
}

func (r *redisProc) url() string { return "redis://" + r.addr }

func (r *redisProc) stop() {
	_ = r.rdb.Close()
	r.proc.stop()
}

// usedMemory is INFO memory's used_memory.
func (r *redisProc) usedMemory(ctx context.Context) (int64, error) {
	info, err := r.rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, errors.New("no used_memory in INFO memory")
}

// service is one countersign serve process.
type service struct {
	*proc
	addr, debug string
}

// serveConfig is the policy of the bench: one agent (or one per hash of a
// comma-separated keyHash, for the cluster phase) with quotas far above
// what the bench does (they are still counted, in the same scripts), one
// approver reached through a webhook that carries links.
func serveConfig(keyHash, hookAddr, draftTTL string, shards int) string {
	var principals strings.Builder
	for i, h := range strings.Split(keyHash, ",") {
		id := "bench-agent"
		if i > 0 {
			id += "-" + strconv.Itoa(i)
		}
		fmt.Fprintf(&principals, `  - id: %s
    api_key_sha256: %q
    scopes: [email.send]
    quotas: {max_drafts: 100000000, max_pending: 100000000, max_stored_bytes: 1000GiB, requests_per_minute: 1000000000, sends_per_minute: 1000000000}
`, id, h)
	}
	return fmt.Sprintf(`principals:
%sapprovers:
  - {id: grace, name: Grace Park, email: grace@example.com, groups: [owners]}
webhooks:
  - {name: humans, url: "http://%s/", links: true}
settings: {draft_ttl: %s, shards: %d}
routes:
  - {name: bench, match: {action: email.send}, approvers: {groups: [owners]}, required: 1, notify: ["webhook:humans"]}
`, principals.String(), hookAddr, draftTTL, shards)
}

func startService(bin, dir, name string, rdb *redisProc, pt *parties, keyHash, draftTTL string, debug bool) (*service, error) {
	return startServiceWith(bin, dir, name, rdb.url(), pt, keyHash, draftTTL, 16, debug)
}

// startServiceURL starts countersign serve on any Redis URL (a cluster's)
// with the given shard count.
func startServiceURL(bin, dir, name, redisURL string, pt *parties, keyHash, draftTTL string, shards int) (*service, error) {
	return startServiceWith(bin, dir, name, redisURL, pt, keyHash, draftTTL, shards, false)
}

func startServiceWith(bin, dir, name, redisURL string, pt *parties, keyHash, draftTTL string, shards int, debug bool) (*service, error) {
	cfg := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(cfg, []byte(serveConfig(keyHash, pt.hookAddr, draftTTL, shards)), 0o600); err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	env := append(os.Environ(),
		"COUNTERSIGN_CONFIG="+cfg, "COUNTERSIGN_REDIS_URL="+redisURL, "COUNTERSIGN_LISTEN="+addr,
		// The bench's Redis keeps nothing on disk (it measures the
		// service): accept that instead of refusing to start.
		"COUNTERSIGN_REDIS_MIN_REPLICAS=0",
		"COUNTERSIGN_SMTP_URL=smtp://"+pt.smtpAddr+"?tls=none&from=bench@example.test",
		"COUNTERSIGN_LINK_KEYS=k1:"+randomB64(32), "COUNTERSIGN_RECEIPT_KEYS=r1:"+randomB64(32),
		"COUNTERSIGN_AUDIT_FILE="+filepath.Join(dir, name+"-audit.jsonl"))
	s := &service{addr: addr}
	if debug {
		if s.debug, err = freeAddr(); err != nil {
			return nil, err
		}
		env = append(env, "COUNTERSIGN_DEBUG_LISTEN="+s.debug)
	}
	if s.proc, err = startProc(name, dir, env, bin, "serve"); err != nil {
		return nil, err
	}
	if err := waitHTTP(s.proc, addr, "/readyz"); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// waitHTTP waits until http://addr+path answers 200, or the process dies.
func waitHTTP(p *proc, addr, path string) error {
	c := newClient(addr, "", 1)
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) && !p.exited() {
		if status, _, err := c.hc.Get(nil, c.base+path); err == nil && status == 200 {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	log, _ := os.ReadFile(p.log)
	return fmt.Errorf("%s did not become ready:\n%s", p.name, tail(string(log), 2000))
}

// startLimit runs this binary's limit handler as a process of its own,
// like countersign: the two servers are measured the same way.
func startLimit(dir string, rdb *redisProc, keyHash string) (*proc, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	p, err := startProc("limit", dir, os.Environ(), self, "-limit-handler", "-listen", addr, "-redis", rdb.url(), "-key-sha256", keyHash)
	if err != nil {
		return nil, "", err
	}
	if err := waitHTTP(p, addr, "/healthz"); err != nil {
		p.stop()
		return nil, "", err
	}
	return p, addr, nil
}

func randomB64(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// newAPIKey returns a random key and its hash for the policy file.
func newAPIKey() (key, hash string) {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	key = "csk_" + base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(key))
	return key, hex.EncodeToString(sum[:])
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
