package faultproxy

import (
	"net"
	"testing"
	"time"
)

// In a partition a connect hangs until the client gives up (once the
// minimal backlog is full), as with an unreachable host; after Heal it
// connects and bytes flow.
func TestPartitionHangsConnectsUntilHealed(t *testing.T) {
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
			go func() { defer c.Close(); b := make([]byte, 1); c.Read(b); c.Write(b) }()
		}
	}()
	p, err := Start(ln.Addr().String(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Partition()
	timedOut := 0
	for range 4 {
		c, err := net.DialTimeout("tcp", p.Addr(), 300*time.Millisecond)
		if err != nil {
			timedOut++
			continue
		}
		defer c.Close()
	}
	if timedOut == 0 {
		t.Fatal("every connect succeeded during the partition")
	}
	p.Heal()
	c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
	if err != nil {
		t.Fatalf("connect after Heal: %v", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte{'x'}); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := c.Read(b); err != nil || b[0] != 'x' {
		t.Fatalf("echo after Heal: %q %v", b, err)
	}
}
