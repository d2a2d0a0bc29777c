package redistest

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of a test's own: masters, each with its
// replicas, every node a Process on a private port (no persistence).
type Cluster struct {
	t     testing.TB
	Nodes []*Process
}

// StartCluster starts masters×(1+replicas) redis-server processes in
// cluster mode and joins them with redis-cli --cluster create. It skips
// where redis-server or redis-cli is not installed.
func StartCluster(t testing.TB, masters, replicas int) *Cluster {
	t.Helper()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("redis-cli is not installed")
	}
	c := &Cluster{t: t}
	var addrs []string
	for range masters * (1 + replicas) {
		p := StartProcess(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000", "--appendonly", "no")
		c.Nodes = append(c.Nodes, p)
		addrs = append(addrs, p.Addr())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: cluster create: %v\n%s", err, out)
	}
	c.WaitHealthy()
	return c
}

// URL is the cluster's redis:// URL with every node as a seed.
func (c *Cluster) URL() string {
	var addrs []string
	for _, p := range c.Nodes {
		addrs = append(addrs, p.Addr())
	}
	return "redis://" + strings.Join(addrs, ",")
}

func (c *Cluster) client(p *Process) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, DialTimeout: time.Second})
}

// info reads one node's CLUSTER INFO or INFO replication field.
func (c *Cluster) field(p *Process, cmd, name string) string {
	cl := c.client(p)
	defer cl.Close()
	var text string
	if cmd == "cluster" {
		text, _ = cl.ClusterInfo(context.Background()).Result()
	} else {
		text, _ = cl.Info(context.Background(), "replication").Result()
	}
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), name+":"); ok {
			return v
		}
	}
	return ""
}

// Role is "master" or "slave".
func (c *Cluster) Role(p *Process) string { return c.field(p, "info", "role") }

// Masters and Replicas list the nodes by their role now.
func (c *Cluster) Masters() []*Process  { return c.byRole("master") }
func (c *Cluster) Replicas() []*Process { return c.byRole("slave") }

func (c *Cluster) byRole(role string) []*Process {
	var out []*Process
	for _, p := range c.Nodes {
		if c.Role(p) == role {
			out = append(out, p)
		}
	}
	return out
}

// WaitHealthy waits until every node reports cluster_state:ok and sees all
// slots assigned, and every replica is in sync with its master.
func (c *Cluster) WaitHealthy() {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok := true
		for _, p := range c.Nodes {
			if c.field(p, "cluster", "cluster_state") != "ok" || c.field(p, "cluster", "cluster_slots_ok") != "16384" {
				ok = false
				break
			}
			if c.Role(p) == "slave" && c.field(p, "info", "master_link_status") != "up" {
				ok = false
				break
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatal("redistest: the cluster did not become healthy")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Failover makes replica p its master's master with CLUSTER FAILOVER (the
// coordinated, lossless form) and waits until it is one.
func (c *Cluster) Failover(p *Process) {
	c.t.Helper()
	cl := c.client(p)
	defer cl.Close()
	if err := cl.Do(context.Background(), "CLUSTER", "FAILOVER").Err(); err != nil {
		c.t.Fatalf("redistest: cluster failover on %s: %v", p.Addr(), err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for c.Role(p) != "master" {
		if time.Now().After(deadline) {
			c.t.Fatalf("redistest: %s did not become a master", p.Addr())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
