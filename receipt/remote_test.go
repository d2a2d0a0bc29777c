package receipt_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/receipt"
)

// jwksServer serves a JWKS that the test can change, and counts fetches.
type jwksServer struct {
	*httptest.Server
	mu      sync.Mutex
	doc     []byte
	status  int
	fetches int
}

func newJWKSServer(t *testing.T, doc []byte) *jwksServer {
	j := &jwksServer{doc: doc, status: 200}
	j.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		j.mu.Lock()
		defer j.mu.Unlock()
		j.fetches++
		w.WriteHeader(j.status)
		_, _ = w.Write(j.doc)
	}))
	t.Cleanup(j.Close)
	return j
}

func (j *jwksServer) set(doc []byte, status int) {
	j.mu.Lock()
	j.doc, j.status = doc, status
	j.mu.Unlock()
}

func (j *jwksServer) count() int { j.mu.Lock(); defer j.mu.Unlock(); return j.fetches }

type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *manualClock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }
func newManualClock() *manualClock         { return &manualClock{t: t0} }
func verifyAt(keys receipt.KeySource, tok string) error {
	_, err := receipt.Verify(context.Background(), tok, keys, receipt.Expect{Now: t0})
	return err
}

// TestRemoteKeysCacheAndRotation: keys are fetched once and cached; a new
// kid (rotation) makes it fetch again, but made-up kids cannot make it
// fetch more than once per MinRefresh; a failing endpoint keeps the keys
// it had.
func TestRemoteKeysCacheAndRotation(t *testing.T) {
	k1, k2 := seedKey(t, "k1", 1), seedKey(t, "k2", 2)
	old := newSigner(t, k1)
	j := newJWKSServer(t, old.JWKS())
	clk := newManualClock()
	keys := receipt.NewRemoteKeys(j.URL, receipt.RemoteOptions{Now: clk.Now, MaxAge: 10 * time.Minute, MinRefresh: 30 * time.Second})

	tok1 := mint(t, old, approvedOp(opKey), t0, patch("{}"))
	for range 5 {
		if err := verifyAt(keys, tok1); err != nil {
			t.Fatal(err)
		}
	}
	if j.count() != 1 {
		t.Fatalf("%d fetches for one kid", j.count())
	}

	// Rotation: countersign now signs with k2 and publishes both.
	rotated := newSigner(t, k2, k1)
	j.set(rotated.JWKS(), 200)
	tok2 := mint(t, rotated, approvedOp(opKey), t0, patch("{}"))
	clk.Add(31 * time.Second)
	if err := verifyAt(keys, tok2); err != nil {
		t.Fatalf("new kid after rotation: %v", err)
	}
	if err := verifyAt(keys, tok1); err != nil {
		t.Fatalf("old kid after rotation: %v", err)
	}
	if j.count() != 2 {
		t.Fatalf("%d fetches after rotation", j.count())
	}

	// Made-up kids: at most one fetch per MinRefresh.
	stranger := newSigner(t, seedKey(t, "nope", 3))
	bad := mint(t, stranger, approvedOp(opKey), t0, patch("{}"))
	clk.Add(31 * time.Second)
	for range 50 {
		if err := verifyAt(keys, bad); receipt.ReasonOf(err) != receipt.ReasonUnknownKey {
			t.Fatalf("stranger: %v", err)
		}
	}
	if j.count() != 3 {
		t.Fatalf("%d fetches for 50 unknown kids", j.count())
	}

	// The endpoint fails: the keys in hand still verify, also once stale.
	j.set([]byte("oops"), 500)
	clk.Add(11 * time.Minute)
	if err := verifyAt(keys, tok2); err != nil {
		t.Fatalf("while the JWKS endpoint fails: %v", err)
	}
}

func TestRemoteKeysUnavailable(t *testing.T) {
	j := newJWKSServer(t, []byte(`{"keys":[`+strings.Repeat(" ", receipt.MaxJWKSBytes)+`]}`))
	keys := receipt.NewRemoteKeys(j.URL, receipt.RemoteOptions{})
	s := newSigner(t, seedKey(t, "k1", 1))
	err := verifyAt(keys, mint(t, s, approvedOp(opKey), t0, patch("{}")))
	if receipt.ReasonOf(err) != receipt.ReasonUnavailable || !strings.Contains(errors.Unwrap(err).Error(), "larger than") {
		t.Fatalf("oversized JWKS: %v (%v)", err, errors.Unwrap(err))
	}
	j.set([]byte("not found"), 404)
	keys = receipt.NewRemoteKeys(j.URL, receipt.RemoteOptions{})
	if err := verifyAt(keys, mint(t, s, approvedOp(opKey), t0, patch("{}"))); receipt.ReasonOf(err) != receipt.ReasonUnavailable {
		t.Fatalf("404: %v", err)
	}
}

func TestMemoryReplayCacheIsBounded(t *testing.T) {
	clk := newManualClock()
	c := receipt.NewMemoryReplayCache(3, clk.Now)
	ctx := context.Background()
	for i, id := range []string{"a", "b", "c"} {
		if ok, err := c.Use(ctx, id, t0.Add(time.Duration(i+1)*time.Minute)); !ok || err != nil {
			t.Fatalf("%s: %v %v", id, ok, err)
		}
	}
	if ok, _ := c.Use(ctx, "a", t0.Add(time.Hour)); ok {
		t.Fatal("a reused")
	}
	if _, err := c.Use(ctx, "d", t0.Add(time.Hour)); err != receipt.ErrReplayCacheFull {
		t.Fatalf("full cache: %v", err)
	}
	clk.Add(90 * time.Second) // a has expired
	if ok, err := c.Use(ctx, "d", t0.Add(time.Hour)); !ok || err != nil {
		t.Fatalf("after a expired: %v %v", ok, err)
	}
	if ok, _ := c.Use(ctx, "b", t0.Add(time.Hour)); ok {
		t.Fatal("b (unexpired) reused")
	}
	if c.Len() != 3 {
		t.Errorf("len = %d", c.Len())
	}
}
