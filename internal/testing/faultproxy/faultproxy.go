// Package faultproxy is a TCP proxy for tests that puts a network between
// a client and a server (Redis) and breaks it on purpose: it holds back
// replies, delays them at random, pauses all traffic, drops connections,
// or refuses them altogether. It does not parse the protocol; it delays and
// cuts byte streams, which is what a slow or failing network does.
package faultproxy

import (
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"syscall"
	"time"
)

// Proxy forwards every connection to a target address.
type Proxy struct {
	target string
	ln     net.Listener
	addr   string

	mu      sync.Mutex
	conns   map[net.Conn]bool
	down    bool
	paused  chan struct{} // closed when traffic may flow
	open    chan struct{} // closed when new connections are accepted (not partitioned)
	holdN   int           // the next holdN replies wait holdFor
	holdFor time.Duration
	jitter  time.Duration // every reply waits up to this long, at random
	dropP   float64       // each reply is instead a dropped connection with this probability
	rng     *rand.Rand
	stats   Stats
}

// Stats count what the proxy did.
type Stats struct {
	Conns, Held, Dropped int
}

// Start listens on 127.0.0.1 and forwards to target. seed makes random
// faults repeatable.
func Start(target string, seed uint64) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	open := make(chan struct{})
	close(open)
	p := &Proxy{target: target, ln: ln, addr: ln.Addr().String(), conns: map[net.Conn]bool{},
		paused: open, open: open, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	go p.accept()
	return p, nil
}

// Addr is the proxy's address (host:port).
func (p *Proxy) Addr() string { return p.addr }

// Close stops the proxy and cuts every connection.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Cut()
}

func (p *Proxy) accept() {
	for {
		p.mu.Lock()
		open := p.open
		p.mu.Unlock()
		<-open
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse := p.down
		p.mu.Unlock()
		if refuse {
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[s] = true, true
		p.stats.Conns++
		p.mu.Unlock()
		go p.pipe(s, c, false) // requests flow untouched, but for pauses
		go p.pipe(c, s, true)  // replies are where the faults are
	}
}

// pipe copies src to dst; replies (server to client) get the faults.
func (p *Proxy) pipe(dst, src net.Conn, replies bool) {
	defer func() { dst.Close(); src.Close(); p.forget(dst, src) }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.waitPaused()
			if replies {
				wait, drop := p.fault()
				if drop {
					return
				}
				if wait > 0 {
					time.Sleep(wait)
				}
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			return
		}
	}
}

func (p *Proxy) fault() (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dropP > 0 && p.rng.Float64() < p.dropP {
		p.stats.Dropped++
		return 0, true
	}
	var wait time.Duration
	if p.holdN > 0 {
		p.holdN--
		p.stats.Held++
		wait = p.holdFor
	}
	if p.jitter > 0 {
		wait += time.Duration(p.rng.Int64N(int64(p.jitter)))
	}
	return wait, false
}

func (p *Proxy) waitPaused() {
	p.mu.Lock()
	ch := p.paused
	p.mu.Unlock()
	<-ch
}

func (p *Proxy) forget(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
	}
}

// Hold makes the next n replies wait d each (a reply that comes back late).
func (p *Proxy) Hold(n int, d time.Duration) {
	p.mu.Lock()
	p.holdN, p.holdFor = n, d
	p.mu.Unlock()
}

// Jitter delays every reply by a random time up to d (0 stops it).
func (p *Proxy) Jitter(d time.Duration) {
	p.mu.Lock()
	p.jitter = d
	p.mu.Unlock()
}

// DropReplies makes each reply a dropped connection with probability prob
// (0 stops it): the request may have run, its answer is lost.
func (p *Proxy) DropReplies(prob float64) {
	p.mu.Lock()
	p.dropP = prob
	p.mu.Unlock()
}

// Pause holds all traffic in both directions until Resume: a server that
// stopped answering without closing anything (SIGSTOP, a VM pause).
func (p *Proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.paused:
		p.paused = make(chan struct{})
	default:
	}
}

// Resume lets paused traffic flow again.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.paused:
	default:
		close(p.paused)
	}
}

// Cut closes every connection; new ones are still accepted.
func (p *Proxy) Cut() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[net.Conn]bool{}
	p.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

// Down cuts every connection and refuses new ones until Up.
func (p *Proxy) Down() {
	p.mu.Lock()
	p.down = true
	p.mu.Unlock()
	p.Cut()
}

// Up accepts connections again.
func (p *Proxy) Up() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// Stats returns what the proxy did so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Partition is a network partition: every byte on established connections
// is held (as Pause), and new connections are not accepted, with the
// listen backlog shrunk to its minimum, so that once it is full the
// kernel drops further SYNs and a client's connect hangs until its own
// dial timeout, as it does when the server's host is unreachable. Heal
// ends it.
func (p *Proxy) Partition() {
	p.Pause()
	p.mu.Lock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
	default:
	}
	p.mu.Unlock()
	p.backlog(0)
}

// Heal ends a Partition: held bytes flow, queued connections are
// accepted, and new ones are again.
func (p *Proxy) Heal() {
	p.backlog(syscall.SOMAXCONN)
	p.mu.Lock()
	select {
	case <-p.open:
	default:
		close(p.open)
	}
	p.mu.Unlock()
	p.Resume()
}

// backlog sets the listen backlog of the proxy's socket (Linux lets
// listen(2) be called again on a listening socket to change it).
func (p *Proxy) backlog(n int) {
	sc, err := p.ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		return
	}
	_ = sc.Control(func(fd uintptr) { _ = syscall.Listen(int(fd), n) })
}
