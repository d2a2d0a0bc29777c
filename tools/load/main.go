// Command load drives a running countersign through the whole loop, many
// agents at once, and reports throughput and latency per phase. It plays
// every outside party itself, on loopback only: the agents (REST), the
// humans (a webhook receiver that gets each approver's link, then the
// approval page's GET and POST, like a browser), and the recipients' mail
// server (an SMTP sink). It stops by itself after -duration.
//
// Run it through scripts/load.sh, which starts the service configured for it.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-smtp"
)

var (
	base        = flag.String("url", "http://127.0.0.1:18080", "countersign base URL")
	key         = flag.String("key", os.Getenv("COUNTERSIGN_API_KEY"), "the agent's API key")
	hookAddr    = flag.String("webhook", "127.0.0.1:18099", "listen address of the webhook receiver (the humans)")
	smtpAddr    = flag.String("smtp", "127.0.0.1:18025", "listen address of the SMTP sink (the recipients)")
	concurrency = flag.Int("c", 8, "concurrent agents")
	duration    = flag.Duration("duration", 20*time.Second, "how long to run")
)

// links hands each operation's approval link from the webhook to its agent.
type links struct {
	mu sync.Mutex
	m  map[string]chan string
}

func (l *links) ch(op string) chan string {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.m[op]
	if !ok {
		c = make(chan string, 1)
		l.m[op] = c
	}
	return c
}

type phases struct {
	mu                                              sync.Mutex
	prepare, send, notify, open, decide, run, total []time.Duration
}

func (p *phases) add(d ...time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, s := range []*[]time.Duration{&p.prepare, &p.send, &p.notify, &p.open, &p.decide, &p.run, &p.total} {
		*s = append(*s, d[i])
	}
}

func main() {
	flag.Parse()
	if *key == "" {
		log.Fatal("set -key or COUNTERSIGN_API_KEY")
	}
	var delivered atomic.Int64
	stopSMTP := startSink(*smtpAddr, &delivered)
	defer stopSMTP()

	l := &links{m: map[string]chan string{}}
	hook := &http.Server{Addr: *hookAddr, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p struct {
			Type         string `json:"type"`
			OperationKey string `json:"operation_key"`
			ApprovalURL  string `json:"approval_url"`
		}
		_ = json.NewDecoder(r.Body).Decode(&p)
		if p.Type == "approval_requested" && p.ApprovalURL != "" {
			select {
			case l.ch(p.OperationKey) <- p.ApprovalURL:
			default:
			}
		}
		w.WriteHeader(204)
	})}
	ln, err := net.Listen("tcp", *hookAddr)
	if err != nil {
		log.Fatal(err)
	}
	go hook.Serve(ln)
	defer hook.Close()

	var ph phases
	var failures atomic.Int64
	deadline := time.Now().Add(*duration)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range *concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			agent := &http.Client{Timeout: 40 * time.Second}
			for n := 0; time.Now().Before(deadline); n++ {
				if err := loop(agent, l, &ph, fmt.Sprintf("load %d-%d", i, n)); err != nil {
					if failures.Add(1) > 10 {
						log.Fatalf("more than 10 failures; last: %v", err)
					}
					log.Printf("loop failed: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	n := len(ph.total)
	fmt.Printf("countersign load: %d full loops in %s with %d agents: %.1f loops/s, %d failures, %d emails delivered\n",
		n, elapsed.Round(time.Millisecond), *concurrency, float64(n)/elapsed.Seconds(), failures.Load(), delivered.Load())
	fmt.Printf("%-34s %9s %9s %9s %9s\n", "phase (ms)", "p50", "p90", "p99", "max")
	for _, r := range []struct {
		name string
		d    []time.Duration
	}{
		{"prepare (POST /v1/operations)", ph.prepare}, {"send (POST …/send)", ph.send},
		{"send → link at the human", ph.notify}, {"open approval page (GET)", ph.open},
		{"approve (POST page)", ph.decide}, {"approve → agent sees succeeded", ph.run}, {"whole loop", ph.total},
	} {
		fmt.Printf("%-34s %9.2f %9.2f %9.2f %9.2f\n", r.name, pct(r.d, 50), pct(r.d, 90), pct(r.d, 99), pct(r.d, 100))
	}
	if failures.Load() > 0 {
		os.Exit(1)
	}
}

var csrfRE = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// loop is one operation's life: prepare, send, the human approves through
// the page, the agent long-polls until it ran.
func loop(agent *http.Client, l *links, ph *phases, subject string) error {
	t0 := time.Now()
	body := fmt.Sprintf(`{"action":"email.send","input":{"to":["client@client.example"],"subject":%q,"text":"Load test.\n"}}`, subject)
	var op struct {
		Key    string `json:"operation_key"`
		Status string `json:"status"`
	}
	if err := api(agent, "POST", "/v1/operations", body, 201, &op); err != nil {
		return err
	}
	t1 := time.Now()
	links := l.ch(op.Key)
	if err := api(agent, "POST", "/v1/operations/"+op.Key+"/send", "", 202, nil); err != nil {
		return err
	}
	t2 := time.Now()
	var link string
	select {
	case link = <-links:
	case <-time.After(15 * time.Second):
		return errors.New("no approval link within 15 s")
	}
	t3 := time.Now()
	jar, _ := cookiejar.New(nil)
	human := &http.Client{Jar: jar, Timeout: 20 * time.Second}
	resp, err := human.Get(link)
	if err != nil {
		return err
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfRE.FindSubmatch(page)
	if resp.StatusCode != 200 || m == nil {
		return fmt.Errorf("approval page: %d", resp.StatusCode)
	}
	t4 := time.Now()
	resp, err = human.PostForm(link, url.Values{"_csrf": {string(m[1])}, "decision": {"approve"}})
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("approve: %d", resp.StatusCode)
	}
	t5 := time.Now()
	for op.Status != "succeeded" {
		if err := api(agent, "GET", "/v1/operations/"+op.Key+"?wait=30", "", 200, &op); err != nil {
			return err
		}
		if op.Status == "failed" || op.Status == "expired" || op.Status == "rejected" {
			return fmt.Errorf("operation %s ended %s", op.Key, op.Status)
		}
		if time.Since(t5) > 30*time.Second {
			return errors.New("not succeeded within 30 s")
		}
	}
	t6 := time.Now()
	ph.add(t1.Sub(t0), t2.Sub(t1), t3.Sub(t2), t4.Sub(t3), t5.Sub(t4), t6.Sub(t5), t6.Sub(t0))
	return nil
}

func api(c *http.Client, method, path, body string, want int, out any) error {
	req, _ := http.NewRequest(method, *base+path, bytes.NewBufferString(body))
	req.Header.Set("Authorization", "Bearer "+*key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

func pct(d []time.Duration, p int) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := min(len(s)*p/100, len(s)-1)
	return float64(s[i].Microseconds()) / 1000
}

// startSink runs an SMTP server that accepts and counts every message.
func startSink(addr string, n *atomic.Int64) func() {
	s := smtp.NewServer(backend{n})
	s.Addr, s.Domain, s.AllowInsecureAuth = addr, "localhost", true
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	go s.Serve(ln)
	return func() { s.Close() }
}

type backend struct{ n *atomic.Int64 }

func (b backend) NewSession(*smtp.Conn) (smtp.Session, error) { return &session{b.n}, nil }

type session struct{ n *atomic.Int64 }

func (s *session) Mail(string, *smtp.MailOptions) error { return nil }
func (s *session) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s *session) Data(r io.Reader) error {
	_, err := io.Copy(io.Discard, r)
	s.n.Add(1)
	return err
}
func (s *session) Reset()        {}
func (s *session) Logout() error { return nil }
