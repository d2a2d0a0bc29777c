package httpreq

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/netguard"
)

// newClient builds the HTTP client of one target. Reads share kept-alive
// connections; a write always dials a fresh connection, because the
// transport may replay a request with an Idempotency-Key on a reused
// connection that broke, and countersign sends each write at most once.
// No proxy from the environment is used, and redirects are never followed.
func newClient(allowPrivate, write bool, timeout time.Duration) *http.Client {
	guard := netguard.PublicOnly
	if allowPrivate {
		guard = netguard.AllowAll
	}
	d := guard.Dialer(10 * time.Second)
	dial := d.DialContext
	if write {
		// A write re-checks its execution's claim on the connection's
		// first write, after dialing (fencedConn).
		dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &fencedConn{Conn: c, ctx: ctx}, nil
		}
	}
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            dial,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  timeout,
		MaxResponseHeaderBytes: 64 << 10,
		MaxIdleConnsPerHost:    bulkReaders, // a bulk's reads reuse them
		IdleConnTimeout:        90 * time.Second,
		DisableKeepAlives:      write,
	}
	return &http.Client{
		Transport:     tr,
		CheckRedirect: netguard.NoRedirects,
	}
}

// fencedConn is a write's fresh connection (writes never reuse one). Its
// first write, the request itself or a TLS hello, re-checks the claim of
// the execution the request belongs to (approval.CheckClaim): when an
// operator settled the operation or its lease passed while this process
// was paused, the connection is closed with nothing sent. This is as late
// as the re-check can go: what remains unfenced is the store's answer
// travelling back, a TLS handshake, and the write itself.
type fencedConn struct {
	net.Conn
	ctx     context.Context
	checked atomic.Bool
}

func (c *fencedConn) Write(b []byte) (int, error) {
	if !c.checked.Swap(true) {
		if err := approval.CheckClaim(c.ctx); err != nil {
			if f, ok := c.ctx.Value(fenceNoteKey{}).(*fenceNote); ok {
				f.err.Store(&err)
			}
			_ = c.Conn.Close()
			return 0, err
		}
	}
	return c.Conn.Write(b)
}

// fenceNote carries a fenced write's reason back to do, whatever the
// transport makes of the error.
type fenceNote struct{ err atomic.Pointer[error] }

type fenceNoteKey struct{}

// response is what countersign keeps of a target's answer.
type response struct {
	status    int
	header    http.Header
	body      []byte
	truncated bool
}

// sendResult says how far a request got.
type sendResult struct {
	resp *response
	// sent is true once the request's headers were written: from then on a
	// failure leaves the outcome unknown.
	sent bool
	err  error
}

// do sends one request and reads at most limit bytes of the answer.
func (a *Action) do(ctx context.Context, t *target, method, url string, body []byte, hdr http.Header, limit int64) sendResult {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	var sent atomic.Bool
	note := &fenceNote{}
	ctx = context.WithValue(ctx, fenceNoteKey{}, note)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteHeaders: func() { sent.Store(true) },
	})
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return sendResult{err: err}
	}
	for k, v := range t.headers {
		req.Header.Set(k, v)
	}
	for k, v := range hdr {
		if _, own := t.headers[k]; own && (k == "Accept" || k == "Content-Type") {
			continue // the target's configuration knows its API better
		}
		req.Header[k] = v
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "countersign")
	}
	client := t.read
	if method != http.MethodGet {
		client = t.write
	}
	resp, err := client.Do(req)
	if err != nil {
		if fe := note.err.Load(); fe != nil {
			return sendResult{err: *fe} // fenced: nothing went out
		}
		return sendResult{sent: sent.Load(), err: err}
	}
	defer resp.Body.Close()
	b, rerr := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	r := &response{status: resp.StatusCode, header: resp.Header, body: b}
	if int64(len(b)) > limit {
		r.body, r.truncated = b[:limit], true
	}
	if rerr != nil {
		r.truncated = true
	}
	return sendResult{resp: r, sent: true}
}

// isPrivate reports whether err is a refused non-public address.
func isPrivate(err error) bool { return netguard.Refused(err) }

// describe turns a transport error into text that carries no URL or
// header: only what kind of failure it was.
func describe(err error) string {
	var ne net.Error
	switch {
	case isPrivate(err):
		return "the target resolves to a private or loopback address, which this target does not allow (allow_private)"
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return "the target did not answer in time"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the target refused the connection"
	case errors.Is(err, context.Canceled):
		return "the request was canceled"
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return "the target's host name could not be resolved"
	}
	return "the connection to the target failed"
}

// redactor removes a target's credentials from text countersign keeps
// (response bodies, errors), in case a target echoes its request headers.
type redactor []string

func newRedactor(headers map[string]string) redactor {
	var r redactor
	for _, v := range headers {
		if len(v) >= 4 {
			r = append(r, v)
		}
		for _, part := range strings.Fields(v) {
			if len(part) >= 8 && part != v {
				r = append(r, part)
			}
		}
	}
	return r
}

func (r redactor) bytes(b []byte) []byte {
	for _, s := range r {
		b = bytes.ReplaceAll(b, []byte(s), []byte("[redacted]"))
	}
	return b
}

// excerpt is a response body fit to show: credentials redacted, cut to n
// bytes on a character boundary.
func (r redactor) excerpt(b []byte, n int) (string, bool) {
	b = r.bytes(b)
	cut := false
	if len(b) > n {
		b, cut = b[:n], true
		for len(b) > 0 && !utf8.Valid(b) {
			b = b[:len(b)-1]
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), cut
}

// strongETag returns the ETag if it is strong: If-Match compares strongly
// (RFC 9110 §13.1.1), so a weak ETag could never match and is not used.
func strongETag(h http.Header) string {
	e := strings.TrimSpace(h.Get("ETag"))
	if e == "" || strings.HasPrefix(e, "W/") || !strings.HasPrefix(e, `"`) || !strings.HasSuffix(e, `"`) || len(e) < 2 {
		return ""
	}
	return e
}

func statusText(code int) string {
	if t := http.StatusText(code); t != "" {
		return fmt.Sprintf("%d %s", code, t)
	}
	return fmt.Sprint(code)
}
