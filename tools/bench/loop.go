package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// The full loop of one operation, every party played over loopback: the
// agent prepares and sends it, then follows it by long-polling its status
// until it succeeded; the human gets the link from the webhook, opens the
// approval page (GET) and approves (POST, with the page's CSRF token and
// cookie, like a browser); countersign executes email.send into the SMTP
// sink.

// sample is one loop's timings.
type sample struct {
	Prepare, Send, Notify, Page, Decide, Wake, Click, Done, Total time.Duration
	Requests                                                      int // HTTP requests to countersign
}

type looper struct {
	c    *client
	pt   *parties
	park time.Duration // the human's pause between opening the page and approving
}

// The bench reads what it needs from countersign's answers by looking
// for it, rather than decoding whole pages and views: its own CPU is taken
// from the machine it measures.

// viewStatus is the status of an agent view (its first "status" member;
// the preview and approvals come after it) and whether it lists an approval.
func viewStatus(b []byte) (string, bool) {
	i := bytes.Index(b, []byte(`"status":"`))
	if i < 0 {
		return "", false
	}
	rest := b[i+len(`"status":"`):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return "", false
	}
	return string(rest[:j]), bytes.Contains(b, []byte(`"approvals":[{`))
}

var csrfField = []byte(`name="_csrf" value="`)

// csrfOf is the page form's CSRF token.
func csrfOf(page []byte) []byte {
	i := bytes.Index(page, csrfField)
	if i < 0 {
		return nil
	}
	rest := page[i+len(csrfField):]
	j := bytes.IndexByte(rest, '"')
	if j <= 0 {
		return nil
	}
	return rest[:j]
}

const csrfCookie = "countersign-csrf"

// smallEmail is the prepare body of the throughput runs.
func smallEmail(w, i int) []byte {
	return fmt.Appendf(nil, `{"action":"email.send","input":{"to":["client@client.example"],"subject":"bench %d-%d","text":"Benchmark.\n"}}`, w, i)
}

// once runs one loop.
func (l *looper) once(w, i int) (sample, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	var s sample
	t0 := time.Now()
	l.c.api(req, "POST", "/v1/operations", smallEmail(w, i))
	if err := l.c.do(req, resp, 201); err != nil {
		return s, err
	}
	var op struct {
		Key string `json:"operation_key"`
	}
	if err := json.Unmarshal(resp.Body(), &op); err != nil || op.Key == "" {
		return s, fmt.Errorf("prepare answered %s", resp.Body())
	}
	a := l.pt.get(op.Key)
	defer l.pt.forget(op.Key)
	t1 := time.Now()
	l.c.api(req, "POST", "/v1/operations/"+op.Key+"/send", nil)
	if err := l.c.do(req, resp, 202); err != nil {
		return s, err
	}
	t2 := time.Now()
	agent := make(chan followed, 1)
	go l.follow(op.Key, agent)

	var link string
	select {
	case link = <-a.link:
	case <-time.After(15 * time.Second):
		return s, errors.New("no approval link within 15 s")
	}
	a.mu.Lock()
	linkAt := a.linkAt
	a.mu.Unlock()
	tg := time.Now()
	req.Reset()
	req.SetRequestURI(link)
	if err := l.c.do(req, resp, 200); err != nil {
		return s, fmt.Errorf("approval page: %w", err)
	}
	token := csrfOf(resp.Body())
	var ck fasthttp.Cookie
	if token == nil || ck.ParseBytes(resp.Header.PeekCookie(csrfCookie)) != nil {
		return s, errors.New("approval page without a form or cookie")
	}
	t3 := time.Now()
	if l.park > 0 {
		time.Sleep(l.park)
	}
	t4 := time.Now()
	req.Reset()
	req.SetRequestURI(link)
	req.Header.SetMethod("POST")
	req.Header.SetContentType("application/x-www-form-urlencoded")
	req.Header.SetCookieBytesKV([]byte(csrfCookie), ck.Value())
	req.SetBodyString("_csrf=" + url.QueryEscape(string(token)) + "&decision=approve")
	if err := l.c.do(req, resp, 200); err != nil {
		return s, fmt.Errorf("approve: %w", err)
	}
	t5 := time.Now()
	select {
	case <-a.mailed:
	case <-time.After(30 * time.Second):
		return s, errors.New("no email within 30 s of the approval")
	}
	var f followed
	select {
	case f = <-agent:
	case <-time.After(40 * time.Second):
		return s, errors.New("the agent did not see the outcome within 40 s")
	}
	if f.err != nil {
		return s, f.err
	}
	a.mu.Lock()
	mailAt := a.mailAt
	a.mu.Unlock()
	s = sample{Prepare: t1.Sub(t0), Send: t2.Sub(t1), Notify: linkAt.Sub(t1), Page: t3.Sub(tg), Decide: t5.Sub(t4),
		Wake: f.decided.Sub(t4), Click: mailAt.Sub(t4), Done: f.done.Sub(t4), Total: f.done.Sub(t0) - t4.Sub(t3),
		Requests: 4 + f.requests}
	return s, nil
}

// followed is what the agent saw while it followed the operation.
type followed struct {
	decided  time.Time // the first status response that shows the approval
	done     time.Time // the response that shows succeeded
	requests int
	err      error
}

// follow long-polls the status until it succeeded, as an agent does
// (get_operation_status with wait_seconds): every change answers the
// long-poll, and the agent asks again.
func (l *looper) follow(key string, out chan<- followed) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	var f followed
	deadline := time.Now().Add(40 * time.Second)
	for time.Now().Before(deadline) {
		l.c.api(req, "GET", "/v1/operations/"+key+"?wait=30", nil)
		f.requests++
		if err := l.c.do(req, resp, 200); err != nil {
			f.err = err
			break
		}
		at := time.Now()
		status, approved := viewStatus(resp.Body())
		if status == "" {
			f.err = fmt.Errorf("status response without a status: %.200s", resp.Body())
			break
		}
		if f.decided.IsZero() && approved {
			f.decided = at
		}
		switch status {
		case "succeeded":
			f.done = at
			out <- f
			return
		case "failed", "expired", "rejected", "canceled":
			f.err = fmt.Errorf("operation %s ended %s", key, status)
			out <- f
			return
		}
	}
	if f.err == nil {
		f.err = errors.New("not succeeded within 40 s")
	}
	out <- f
}

// loops runs c concurrent loops for d (or n loops in all when n > 0, one
// at a time per worker).
func (l *looper) loops(c int, d time.Duration, n int) ([]sample, time.Duration, int, error) {
	var mu sync.Mutex
	var out []sample
	var first error
	errs := 0
	deadline := time.Now().Add(d)
	var next int
	start := time.Now()
	var wg sync.WaitGroup
	for w := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				mu.Lock()
				stop := (n > 0 && next >= n) || (n == 0 && !time.Now().Before(deadline)) || errs > 20
				next++
				mu.Unlock()
				if stop {
					return
				}
				s, err := l.once(w, i)
				mu.Lock()
				if err != nil {
					errs++
					if first == nil {
						first = err
					}
				} else {
					out = append(out, s)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out, time.Since(start), errs, first
}
