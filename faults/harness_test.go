//go:build faults

package faults

// The harness: one redis-server with AOF (optionally behind a fault proxy),
// an SMTP sink, an ETag target, and three `countersign serve` processes of
// the binary TestMain built, sharing link and receipt keys.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/faultproxy"
	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/internal/testing/smtptest"
)

const (
	agentKey    = "cs_faults_agent_key_for_the_fault_suite_only"
	operatorKey = "cso_faults_operator_key_for_the_fault_suite"
	linkKeys    = "k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	receiptKeys = "r1:ZmF1bHRzLXJlY2VpcHQta2V5LXNlZWQtMzJieXRlcyE="
)

func sha(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

// approvers by the address their approval mail goes to.
var approverOf = map[string]string{"grace@example.com": "grace", "ada@example.com": "ada"}

func policy(targetURL string, o clusterOpts) string {
	settings := ""
	if o.lease != "" {
		settings = "\n  execution_lease: " + o.lease
	}
	retry := ""
	if o.retry != "" {
		retry = "\n    retry: " + o.retry
	}
	return fmt.Sprintf(`
settings:
  notify_from: countersign@example.com%[4]s
principals:
  - id: agent
    api_key_sha256: %[1]q
    scopes: ["http.request:items", "http.request:late"]
    quotas: {max_drafts: 100000, max_pending: 100000, max_stored_bytes: 1GiB, requests_per_minute: 1000000, sends_per_minute: 1000000}
operators:
  - {id: oncall, api_key_sha256: %[2]q}
approvers:
  - {id: grace, name: Grace Park, email: grace@example.com, groups: [owners]}
  - {id: ada, name: Ada Lovelace, email: ada@example.com, groups: [owners]}
targets:
  - name: items
    base_url: %[3]s/api
    allow_private: true
    allow: [{method: PATCH, path: "/items/*"}]
    state: {fields: [qty]}%[5]s
  - name: late
    base_url: %[3]s/api
    allow_private: true
    allow: [{method: PATCH, path: "/items/*"}]
    state: {fields: [qty]}
routes:
  - name: items
    match: {action: http.request, target: items}
    approvers: {groups: [owners]}
    required: 2
    notify: [email]
    approval_ttl: 1h
  - name: late
    match: {action: http.request, target: late}
    approvers: {groups: [owners]}
    required: 2
    notify: [email]
    approval_ttl: 1m
`, sha(agentKey), sha(operatorKey), targetURL, settings, retry)
}

type clusterOpts struct {
	proxy     bool     // put a fault proxy between the replicas and Redis
	redisArgs []string // extra redis-server arguments
	replicas  int      // default 3
	// clockOffsets sets replica i's own clock off by clockOffsets[i]
	// (COUNTERSIGN_FAULTS_CLOCK_OFFSET), and remind adds reminders to the
	// items route (faults/clock_test.go).
	clockOffsets []time.Duration
	remind       string
	sentinel     bool   // a master, one replica and a Sentinel; the service finds the master through it
	replLink     bool   // (sentinel) the replica replicates through a fault proxy (replication lag)
	lease        string // settings.execution_lease ("" for the default)
	retry        string // the items target's retry ("" for none)
}

type cluster struct {
	t        *testing.T
	redis    *redistest.Process
	second   *redistest.Process // the master's replica (sentinel topologies)
	sentinel *sentinel
	replLink *faultproxy.Proxy // between the replica and the master, with replLink
	proxy    *faultproxy.Proxy
	smtp     *smtptest.Server
	target   *target
	replicas []*replica
	cfgPath  string
	redisURL string
	mail     *mailbox
}

type replica struct {
	i       int
	port    int
	url     string
	logPath string
	env     []string
	mu      sync.Mutex
	cmd     *exec.Cmd
	paused  bool // SIGSTOPped: not live for the driver
}

func startCluster(t *testing.T, o clusterOpts) *cluster {
	t.Helper()
	args := append([]string{"--appendonly", "yes", "--appendfsync", "always"}, o.redisArgs...)
	if o.sentinel {
		// A replica resyncs at once after a failover (no 5 s wait for
		// more replicas to share the transfer).
		args = append(args, "--repl-diskless-sync-delay", "0")
	}
	c := &cluster{t: t, redis: redistest.StartProcess(t, args...)}
	c.redisURL = c.redis.URL()
	if o.sentinel {
		from := c.redis.Addr()
		if o.replLink {
			p, err := faultproxy.Start(c.redis.Addr(), uint64(seed()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Close)
			c.replLink, from = p, p.Addr()
		}
		host, port, _ := net.SplitHostPort(from)
		c.second = redistest.StartProcess(t, append(args, "--replicaof", host, port)...)
		c.waitSynced(c.redis)
		c.sentinel = startSentinel(t, c.redis.Port)
		c.redisURL = fmt.Sprintf("redis-sentinel://127.0.0.1:%d/mymaster", c.sentinel.port)
	}
	if o.proxy {
		p, err := faultproxy.Start(c.redis.Addr(), uint64(seed()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		c.proxy = p
		c.redisURL = "redis://" + p.Addr()
	}
	c.smtp = smtptest.Start(t, smtptest.Options{})
	c.mail = &mailbox{smtp: c.smtp, links: map[string]map[string][]string{}, from: map[string]map[string][]int{}}
	c.target = startTarget(t)
	dir := t.TempDir()
	c.cfgPath = filepath.Join(dir, "countersign.yaml")
	pol := policy(c.target.srv.URL, o)
	if o.remind != "" {
		pol = strings.Replace(pol, "    approval_ttl: 1h\n", "    approval_ttl: 1h\n    remind: ["+o.remind+"]\n", 1)
	}
	if err := os.WriteFile(c.cfgPath, []byte(pol), 0o600); err != nil {
		t.Fatal(err)
	}
	n := o.replicas
	if n == 0 {
		n = 3
	}
	for i := range n {
		r := &replica{i: i, port: freePort(t), logPath: filepath.Join(dir, fmt.Sprintf("replica%d.log", i))}
		r.url = fmt.Sprintf("http://127.0.0.1:%d", r.port)
		r.env = append(os.Environ(),
			"COUNTERSIGN_LISTEN=127.0.0.1:"+strconv.Itoa(r.port),
			"COUNTERSIGN_PUBLIC_URL="+r.url,
			"COUNTERSIGN_REDIS_URL="+c.redisURL,
			"COUNTERSIGN_CONFIG="+c.cfgPath,
			"COUNTERSIGN_LINK_KEYS="+linkKeys,
			"COUNTERSIGN_RECEIPT_KEYS="+receiptKeys,
			"COUNTERSIGN_SMTP_URL="+c.smtp.URL(),
		)
		if i < len(o.clockOffsets) && o.clockOffsets[i] != 0 {
			r.env = append(r.env, "COUNTERSIGN_FAULTS_CLOCK_OFFSET="+o.clockOffsets[i].String())
		}
		c.replicas = append(c.replicas, r)
	}
	var wg sync.WaitGroup
	for _, r := range c.replicas {
		wg.Add(1)
		go func() { defer wg.Done(); c.start(r) }()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, r := range c.replicas {
			r.stop()
		}
		if t.Failed() {
			for _, r := range c.replicas {
				b, _ := os.ReadFile(r.logPath)
				if len(b) > 6000 {
					b = b[len(b)-6000:]
				}
				t.Logf("replica %d log (tail):\n%s", r.i, b)
			}
		}
	})
	return c
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// start runs the replica's process and waits until it is ready.
func (c *cluster) start(r *replica) {
	log, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		c.t.Error(err)
		return
	}
	cmd := exec.Command(binPath, "serve")
	cmd.Env, cmd.Stdout, cmd.Stderr = r.env, log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		c.t.Errorf("start replica %d: %v", r.i, err)
		return
	}
	go func() { _ = cmd.Wait(); log.Close() }()
	r.mu.Lock()
	r.cmd = cmd
	r.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(r.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(r.logPath)
			c.t.Errorf("replica %d not ready after 30 s: %v\n%s", r.i, err, b)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill ends the replica with SIGKILL: no shutdown, nothing released.
func (r *replica) kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil && r.cmd.Process != nil {
		_ = r.cmd.Process.Kill()
	}
	r.cmd = nil
}

// stop ends the replica as an orchestrator would (SIGTERM), then kills it.
func (r *replica) stop() {
	r.mu.Lock()
	cmd := r.cmd
	r.cmd = nil
	r.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(os.Interrupt)
	_ = cmd.Process.Signal(syscall.SIGCONT) // a paused replica must hear it
	done := make(chan struct{})
	go func() {
		for cmd.ProcessState == nil {
			if cmd.Process.Signal(syscall.Signal(0)) != nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
	}
}

// pause stops the replica's process (SIGSTOP), as a VM freeze or a long
// GC stop would: its sockets stay open, it answers nothing, renews nothing.
func (r *replica) pause() {
	if pid := r.pid(); pid != 0 {
		_ = syscall.Kill(pid, syscall.SIGSTOP)
	}
	r.mu.Lock()
	r.paused = true
	r.mu.Unlock()
}

// resume lets a paused replica run again (SIGCONT).
func (r *replica) resume() {
	if pid := r.pid(); pid != 0 {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	r.mu.Lock()
	r.paused = false
	r.mu.Unlock()
}

func (r *replica) pid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil || r.cmd.Process == nil {
		return 0
	}
	return r.cmd.Process.Pid
}

func (r *replica) alive() bool { return r.pid() != 0 }

// live returns the replicas running now.
func (c *cluster) live() []*replica {
	var out []*replica
	for _, r := range c.replicas {
		r.mu.Lock()
		paused := r.paused
		r.mu.Unlock()
		if r.alive() && !paused {
			out = append(out, r)
		}
	}
	return out
}

// replicaOf returns the replica whose public URL starts link.
func (c *cluster) replicaOf(link string) *replica {
	for _, r := range c.replicas {
		if strings.HasPrefix(link, r.url+"/") {
			return r
		}
	}
	return nil
}

// redisOK reports whether Redis itself answers (not through the proxy).
func (c *cluster) redisCmd(args ...string) (string, error) {
	out, err := exec.Command("redis-cli", append([]string{"-p", strconv.Itoa(c.redis.Port)}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// mailbox indexes the approval mail the SMTP sink accepted: per operation
// and approver, the links, and which replica sent each.
type mailbox struct {
	smtp  *smtptest.Server
	mu    sync.Mutex
	seen  int
	links map[string]map[string][]string // op key → approver → links, in arrival order
	from  map[string]map[string][]int    // op key → approver → replica index of each
	at    map[string]time.Time           // op key + approver → first arrival
}

var (
	opKeyRE = regexp.MustCompile(`Operation:\s+(op_[a-z2-7]{26})`)
	linkRE  = regexp.MustCompile(`https?://\S+/a/[A-Za-z0-9_.-]+`)
)

// refresh indexes messages that arrived since the last call.
func (m *mailbox) refresh(c *cluster) {
	m.mu.Lock()
	defer m.mu.Unlock()
	msgs := m.smtp.Messages() // under m.mu: seen must match this snapshot
	if m.at == nil {
		m.at = map[string]time.Time{}
	}
	for _, msg := range msgs[m.seen:] {
		if msg.Outcome != smtptest.Accepted || len(msg.To) != 1 {
			continue
		}
		who := approverOf[msg.To[0]]
		key, link := mailOp(msg)
		if who == "" || key == "" || link == "" {
			continue
		}
		if m.links[key] == nil {
			m.links[key] = map[string][]string{}
			m.from[key] = map[string][]int{}
		}
		m.links[key][who] = append(m.links[key][who], link)
		idx := -1
		if r := c.replicaOf(link); r != nil {
			idx = r.i
		}
		m.from[key][who] = append(m.from[key][who], idx)
		if _, ok := m.at[key+"|"+who]; !ok {
			m.at[key+"|"+who] = msg.At
		}
	}
	m.seen = len(msgs)
}

// mailOp reads the operation key and approval link from a message.
func mailOp(msg smtptest.Message) (key, link string) {
	p, err := msg.Parse()
	if err != nil {
		return "", ""
	}
	if k := opKeyRE.FindStringSubmatch(p.Text); k != nil {
		key = k[1]
	}
	return key, linkRE.FindString(p.Text)
}

// link returns the newest link mailed to who for key, or "".
func (m *mailbox) link(c *cluster, key, who string) string {
	m.refresh(c)
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.links[key][who]
	if len(l) == 0 {
		return ""
	}
	return l[len(l)-1]
}

// deliveries counts the approval mails accepted per operation and approver.
func (m *mailbox) deliveries(c *cluster, key, who string) int {
	m.refresh(c)
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.links[key][who])
}

// waitLink waits up to d for a link to who about key.
func (m *mailbox) waitLink(ctx context.Context, c *cluster, key, who string, d time.Duration) string {
	deadline := time.Now().Add(d)
	for {
		if l := m.link(c, key, who); l != "" {
			return l
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return ""
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// drain discards a response body so the connection is reused.
func drain(r io.ReadCloser) { _, _ = io.Copy(io.Discard, r); r.Close() }
