package main

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// The load generator is closed-loop: c workers, each sending its next
// request when the previous one is answered, for a fixed time. It uses
// fasthttp's client, which costs a few microseconds a request, so that on
// a small machine the generator takes as little CPU as possible from the
// servers it measures (it takes the same share from both sides of a
// comparison).

// client talks to one server over keep-alive connections.
type client struct {
	hc   *fasthttp.HostClient
	base string // http://host:port
	auth string // "Bearer …"
}

func newClient(addr, apiKey string, conns int) *client {
	return &client{
		hc: &fasthttp.HostClient{Addr: addr, MaxConns: conns, ReadTimeout: 40 * time.Second,
			WriteTimeout: 10 * time.Second, MaxIdleConnDuration: time.Minute, MaxConnWaitTimeout: 30 * time.Second},
		base: "http://" + addr, auth: "Bearer " + apiKey,
	}
}

// do sends one request and checks its status; body and the response
// stay valid until the next call with the same resp.
func (c *client) do(req *fasthttp.Request, resp *fasthttp.Response, want int) error {
	if err := c.hc.Do(req, resp); err != nil {
		return err
	}
	if got := resp.StatusCode(); got != want {
		b := resp.Body()
		if len(b) > 300 {
			b = b[:300]
		}
		return fmt.Errorf("%s %s: status %d, want %d: %s", req.Header.Method(), req.URI().Path(), got, want, b)
	}
	return nil
}

// api prepares a request to the agents' API.
func (c *client) api(req *fasthttp.Request, method, path string, body []byte) {
	req.Reset()
	req.Header.SetMethod(method)
	req.SetRequestURI(c.base + path)
	req.Header.Set(fasthttp.HeaderAuthorization, c.auth)
	if body != nil {
		req.Header.SetContentType("application/json")
		req.SetBody(body)
	}
}

// run is one closed-loop run's outcome.
type run struct {
	Name    string
	N       int           // requests (or loops) that succeeded
	Errors  int           // that failed
	Elapsed time.Duration // wall time of the run
	Lat     []time.Duration
	First   error // the first failure
}

func (r run) Rate() float64 { return float64(r.N) / r.Elapsed.Seconds() }

// closedLoop runs c workers for d; each calls step until the time is up.
// step returns the latency to record, or an error.
func closedLoop(name string, c int, d time.Duration, step func(worker, i int) (time.Duration, error)) run {
	var mu sync.Mutex
	out := run{Name: name}
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, 4096)
			errs := 0
			var first error
			for i := 0; time.Now().Before(deadline); i++ {
				l, err := step(w, i)
				if err != nil {
					errs++
					if first == nil {
						first = err
					}
					if errs > 20 {
						break // something is wrong: stop hammering it
					}
					continue
				}
				lat = append(lat, l)
			}
			mu.Lock()
			out.Lat = append(out.Lat, lat...)
			out.Errors += errs
			if out.First == nil {
				out.First = first
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	out.Elapsed = time.Since(start)
	out.N = len(out.Lat)
	return out
}

// pct is the p-th percentile (nearest rank) of d, in milliseconds.
func pct(d []time.Duration, p float64) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	i = min(max(i, 0), len(s)-1)
	return float64(s[i].Microseconds()) / 1000
}
