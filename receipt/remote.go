package receipt

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// RemoteKeys is a KeySource that reads countersign's JWKS from a URL
// (https://countersign.example/.well-known/jwks.json). It keeps the keys
// for MaxAge, and fetches again early when a receipt names a key id it does
// not know (a new key after rotation), but at most once per MinRefresh, so
// receipts with made-up key ids cannot make it fetch more. When a refresh
// fails it keeps using the keys it has. It is safe for concurrent use.
type RemoteKeys struct {
	url        string
	client     *http.Client
	now        func() time.Time
	maxAge     time.Duration
	minRefresh time.Duration

	mu      sync.Mutex
	keys    *JWKS
	fetched time.Time // when keys were fetched
	tried   time.Time // when a fetch was last attempted
	lastErr error
}

// RemoteOptions tunes RemoteKeys; zero values take the defaults.
type RemoteOptions struct {
	// Client fetches the JWKS (default: a client with a 10 s timeout).
	Client *http.Client
	// MaxAge is how long fetched keys are used before they are fetched
	// again (default 10 minutes).
	MaxAge time.Duration
	// MinRefresh is the least time between two fetches (default 30 s).
	MinRefresh time.Duration
	// Now is the clock (tests).
	Now func() time.Time
}

// NewRemoteKeys returns a KeySource reading the JWKS at url. It fetches on
// first use.
func NewRemoteKeys(url string, o RemoteOptions) *RemoteKeys {
	r := &RemoteKeys{url: url, client: o.Client, now: o.Now, maxAge: o.MaxAge, minRefresh: o.MinRefresh}
	if r.client == nil {
		r.client = &http.Client{Timeout: 10 * time.Second}
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.maxAge <= 0 {
		r.maxAge = 10 * time.Minute
	}
	if r.minRefresh <= 0 {
		r.minRefresh = 30 * time.Second
	}
	return r
}

var _ KeySource = (*RemoteKeys)(nil)

// Key implements KeySource. It returns ErrUnknownKey for a key id the
// current set lacks, and an error naming the URL when no set could be
// fetched at all.
func (r *RemoteKeys) Key(ctx context.Context, kid string) (ed25519.PublicKey, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if r.keys != nil && now.Sub(r.fetched) < r.maxAge {
		if k, err := r.keys.Key(ctx, kid); err == nil {
			return k, nil
		}
	}
	// Stale, or an unknown key id: fetch again, unless that was just tried.
	if r.tried.IsZero() || now.Sub(r.tried) >= r.minRefresh {
		r.tried = now
		keys, err := r.fetch(ctx)
		r.lastErr = err
		if err == nil {
			r.keys, r.fetched = keys, now
		}
	}
	if r.keys == nil {
		return nil, fmt.Errorf("receipt: no keys from %s: %w", r.url, r.lastErr)
	}
	return r.keys.Key(ctx, kid)
}

func (r *RemoteKeys) fetch(ctx context.Context) (*JWKS, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New("answer " + resp.Status)
	}
	return ReadJWKS(resp.Body)
}
