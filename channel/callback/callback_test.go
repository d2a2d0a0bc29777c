package callback

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
)

var secret = []byte("a-secret-of-enough-length")

func change(seq int, st approval.Status) approval.StatusChange {
	return approval.StatusChange{ID: "op_aaaaaaaaaaaaaaaaaaaaaaaaaa." + string(rune('0'+seq)), Seq: seq,
		Operation: "op_aaaaaaaaaaaaaaaaaaaaaaaaaa", Action: "email.send", Status: st, Previous: approval.StatusPending,
		At: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
}

type got struct {
	header http.Header
	body   []byte
}

func receiver(t *testing.T, status int, extra http.Header) (*httptest.Server, func() []got) {
	var mu sync.Mutex
	var all []got
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		all = append(all, got{r.Header.Clone(), b})
		mu.Unlock()
		for k, v := range extra {
			w.Header()[k] = v
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []got { mu.Lock(); defer mu.Unlock(); return append([]got(nil), all...) }
}

func TestPostIsSignedAndVerifies(t *testing.T) {
	srv, all := receiver(t, 204, nil)
	s := New([]Hook{{Principal: "agent", URL: srv.URL + "/hook?token=t0ken", Secret: secret}})
	s.Now = func() time.Time { return time.Unix(1764590400, 0) }
	if err := s.Post(context.Background(), "agent", change(2, approval.StatusApproved)); err != nil {
		t.Fatal(err)
	}
	r := all()[0]
	// The signature, recomputed here from its definition.
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("1764590400." + string(r.body)))
	if got, want := r.header.Get("X-Countersign-Signature"), "sha256="+hex.EncodeToString(mac.Sum(nil)); got != want {
		t.Fatalf("signature %q, want %q", got, want)
	}
	if r.header.Get("X-Countersign-Timestamp") != "1764590400" || r.header.Get("X-Countersign-Event-Id") != "op_aaaaaaaaaaaaaaaaaaaaaaaaaa.2" ||
		r.header.Get("Idempotency-Key") != "op_aaaaaaaaaaaaaaaaaaaaaaaaaa.2" {
		t.Fatalf("headers %v", r.header)
	}
	var ev Event
	if err := json.Unmarshal(r.body, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.ID != "op_aaaaaaaaaaaaaaaaaaaaaaaaaa.2" || ev.Type != EventType || ev.Status != approval.StatusApproved ||
		ev.PreviousStatus != approval.StatusPending || ev.Sequence != 2 || ev.Error != nil {
		t.Fatalf("event %+v", ev)
	}
	now := time.Unix(1764590400, 0)
	if err := Verify(secret, r.header, r.body, now.Add(time.Minute), 5*time.Minute); err != nil {
		t.Fatalf("verify: %v", err)
	}
	for name, tc := range map[string]struct {
		secret []byte
		body   []byte
		now    time.Time
	}{
		"another secret":   {[]byte("another-secret-value"), r.body, now},
		"a changed body":   {secret, []byte(strings.Replace(string(r.body), "approved", "canceled", 1)), now},
		"a stale delivery": {secret, r.body, now.Add(6 * time.Minute)},
	} {
		if err := Verify(tc.secret, r.header, tc.body, tc.now, 5*time.Minute); err == nil {
			t.Errorf("%s verified", name)
		}
	}
}

func TestPostFailuresAreRetryableAndSayNoURL(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		header http.Header
		want   string
		after  time.Duration
	}{
		{"server error", 503, nil, "HTTP 503", 0},
		{"redirect", 302, http.Header{"Location": {"http://127.0.0.1:1/elsewhere"}}, "redirect refused", 0},
		{"rate limited", 429, http.Header{"Retry-After": {"7"}}, "429", 7 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, all := receiver(t, tc.status, tc.header)
			s := New([]Hook{{Principal: "agent", URL: srv.URL + "/hook?token=t0ken", Secret: secret}})
			err := s.Post(context.Background(), "agent", change(1, approval.StatusPending))
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "t0ken") {
				t.Fatalf("err = %v, want it to say %q and not the URL", err, tc.want)
			}
			var ra *approval.RetryAfterError
			if tc.after > 0 && (!errors.As(err, &ra) || ra.After != tc.after) {
				t.Fatalf("retry after: %v", err)
			}
			if len(all()) != 1 {
				t.Fatalf("%d requests; a redirect must not be followed", len(all()))
			}
		})
	}
}

// A callback_url whose address is not public is refused when dialing: no
// connection reaches the receiver, although it listens there. The
// receiver listens on this machine's first non-loopback address (private
// or documentation ranges in any test box).
func TestPostRefusesPrivateAddresses(t *testing.T) {
	ip := localAddress(t)
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Skipf("cannot listen on %s: %v", ip, err)
	}
	var conns atomic.Int32
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				conns.Add(1)
			}
		}}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	// It is reachable: a dial without the guard connects.
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("the receiver is not reachable at all: %v", err)
	}
	c.Close()
	deadline := time.Now().Add(2 * time.Second)
	for conns.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	before := conns.Load()

	s := New([]Hook{{Principal: "agent", URL: srv.URL + "/hook", Secret: secret}})
	err = s.Post(context.Background(), "agent", change(1, approval.StatusPending))
	if err == nil || !strings.Contains(err.Error(), "private or loopback address") {
		t.Fatalf("err = %v", err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := conns.Load(); n != before || before == 0 {
		t.Fatalf("%d connections reached the private receiver (%d before)", n-before, before)
	}
}

func localAddress(t *testing.T) string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skip(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	t.Skip("no non-loopback IPv4 address to listen on")
	return ""
}
