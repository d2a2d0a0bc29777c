package web_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/countersign/countersign/approval"
)

// fail sends n invalid links and returns the last status.
func fail(t *testing.T, e *pageEnv, c *client, n int, hdr map[string]string) int {
	t.Helper()
	st := 0
	for range n {
		st = c.do(t, "GET", e.base+"/a/not-a-link", nil, hdr).status
	}
	return st
}

// TestValidLinkNeverLockedOut: after many failed attempts from one
// address, invalid links from it get 429, and a valid link from the same
// address still opens and decides: the signature is checked before the
// limit is consulted.
func TestValidLinkNeverLockedOut(t *testing.T) {
	e := newPageEnv(t, pageOpts{linkFailures: 3})
	op, tokens := e.pending("Retro")
	stranger := newClient("127.0.0.2")
	if st := fail(t, e, stranger, 10, nil); st != http.StatusTooManyRequests {
		t.Fatalf("10 failures: %d, want 429", st)
	}
	approver := newClient("127.0.0.2") // same address, another browser
	r, csrf := approver.open(t, e, tokens[0])
	if r.status != http.StatusOK || csrf == "" {
		t.Fatalf("a valid link from a locked-out address: %d", r.status)
	}
	tampered := tokens[0][:len(tokens[0])-3] + "AAA"
	if st := approver.do(t, "GET", e.base+"/a/"+tampered, nil, nil).status; st != http.StatusTooManyRequests {
		t.Fatalf("a tampered link from the locked-out address: %d, want 429", st)
	}
	r = approver.do(t, "POST", e.base+"/a/"+tokens[0], url.Values{"_csrf": {csrf}, "decision": {"approve"}}, nil)
	if r.status != http.StatusOK || e.status(op.Key).Status != approval.StatusApproved {
		t.Fatalf("deciding from a locked-out address: %d %s", r.status, e.status(op.Key).Status)
	}
	// Another address is not affected.
	if st := fail(t, e, newClient("127.0.0.3"), 1, nil); st != http.StatusNotFound {
		t.Fatalf("another address: %d, want 404", st)
	}
}

// TestForwardedForFromUntrustedPeerIgnored: without trusted proxies, a
// client cannot pick whom its failures count against.
func TestForwardedForFromUntrustedPeerIgnored(t *testing.T) {
	e := newPageEnv(t, pageOpts{linkFailures: 3})
	liar := newClient("127.0.0.3")
	// It blames someone else; the failures are its own.
	fail(t, e, liar, 5, map[string]string{"X-Forwarded-For": "203.0.113.9"})
	if st := fail(t, e, liar, 1, nil); st != http.StatusTooManyRequests {
		t.Fatalf("the peer itself: %d, want 429", st)
	}
	// And it cannot get out of its own lockout by naming a fresh address.
	if st := fail(t, e, liar, 1, map[string]string{"X-Forwarded-For": "198.51.100.1"}); st != http.StatusTooManyRequests {
		t.Fatalf("a fresh X-Forwarded-For: %d, want 429", st)
	}
	if st := fail(t, e, newClient("127.0.0.2"), 1, nil); st != http.StatusNotFound {
		t.Fatalf("an innocent address: %d, want 404", st)
	}
}

// TestForwardedForFromTrustedProxy: behind a trusted proxy the client is
// the right-most untrusted address of X-Forwarded-For, so one client's
// failures lock out that client, not everyone behind the proxy, and a
// forged left part of the chain changes nothing.
func TestForwardedForFromTrustedProxy(t *testing.T) {
	e := newPageEnv(t, pageOpts{linkFailures: 3, trustedProxies: []string{"127.0.0.2/32", "10.0.0.0/8"}})
	op, tokens := e.pending("Retro")
	proxy := newClient("127.0.0.2")
	xff := func(v string) map[string]string { return map[string]string{"X-Forwarded-For": v} }
	fail(t, e, proxy, 4, xff("203.0.113.7"))
	for _, c := range []struct {
		name string
		from *client
		hdr  map[string]string
		want int
	}{
		{"the failing client", proxy, xff("203.0.113.7"), 429},
		{"the failing client behind a second trusted hop", proxy, xff("203.0.113.7, 10.1.2.3"), 429},
		{"the failing client forging a left part", proxy, xff("198.51.100.99, 203.0.113.7"), 429},
		{"another client of the proxy", proxy, xff("198.51.100.1"), 404},
		{"another client, the failing one forged on the left", proxy, xff("203.0.113.7, 198.51.100.1"), 404},
		{"the proxy itself", proxy, nil, 404},
		{"an untrusted peer naming the failing client", newClient("127.0.0.3"), xff("203.0.113.7"), 404},
	} {
		if st := fail(t, e, c.from, 1, c.hdr); st != c.want {
			t.Errorf("%s: %d, want %d", c.name, st, c.want)
		}
	}
	// And the failing client's valid link works through the proxy.
	r, csrf := proxyOpen(t, e, proxy, tokens[0], xff("203.0.113.7"))
	if r.status != http.StatusOK || csrf == "" {
		t.Fatalf("valid link of the locked-out client: %d", r.status)
	}
	if st := proxy.do(t, "POST", e.base+"/a/"+tokens[0], url.Values{"_csrf": {csrf}, "decision": {"approve"}}, xff("203.0.113.7")).status; st != 200 ||
		e.status(op.Key).Status != approval.StatusApproved {
		t.Fatalf("deciding: %d %s", st, e.status(op.Key).Status)
	}
}

func proxyOpen(t *testing.T, e *pageEnv, c *client, token string, hdr map[string]string) (response, string) {
	t.Helper()
	r := c.do(t, "GET", e.base+"/a/"+token, nil, hdr)
	m := csrfField.FindStringSubmatch(r.body)
	if m == nil {
		return r, ""
	}
	return r, m[1]
}
