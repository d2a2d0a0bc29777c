package store

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/faultproxy"
)

// A dial that began during a partition connects as soon as the network is
// back, not when the kernel next re-sends the SYN it lost (1 s, 3 s, 7 s
// after the first): the dialer starts a fresh connect every redialEvery.
func TestRedialConnectsSoonAfterThePartitionEnds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	p, err := faultproxy.Start(ln.Addr().String(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Partition()
	// fill the backlog the partition leaves, so that further SYNs are dropped
	for range 3 {
		if c, err := net.DialTimeout("tcp", p.Addr(), 200*time.Millisecond); err == nil {
			defer c.Close()
		}
	}
	healAt := make(chan time.Time, 1)
	go func() { time.Sleep(1500 * time.Millisecond); healAt <- time.Now(); p.Heal() }()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	c, err := redial(ctx, "tcp", p.Addr())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	c.Close()
	if d := time.Since(<-healAt); d > 500*time.Millisecond {
		t.Errorf("connected %s after the partition ended; want within %s or so", d, redialEvery)
	}
}
