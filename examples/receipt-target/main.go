// Command receipt-target is a small target API that accepts a write only
// with a valid countersignature receipt: it shows how a service behind
// countersign's http.request uses the receipt middleware.
//
//	go run ./examples/receipt-target --jwks http://127.0.0.1:8080/.well-known/jwks.json \
//	    --audience calendar --issuer http://127.0.0.1:8080
//
// It serves a tiny calendar at /events/{id} (GET with an ETag; PATCH a JSON
// object of fields, honouring If-Match). Configure it in countersign's
// policy file as a target:
//
//	targets:
//	  - name: calendar
//	    base_url: http://127.0.0.1:9090
//	    allow_private: true
//	    allow: [{method: PATCH, path: "/events/*"}]
//
// Reads pass without a receipt (countersign reads the state it binds an
// approval to); every write needs one, once.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/countersign/countersign/receipt"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9090", "address to listen on")
	jwks := flag.String("jwks", "http://127.0.0.1:8080/.well-known/jwks.json", "countersign's JWKS: a URL or a file")
	audience := flag.String("audience", "calendar", "this target's name in countersign's policy file")
	issuer := flag.String("issuer", "", "countersign's public URL (optional: refuse receipts of another countersign)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*listen, *jwks, *audience, *issuer, log); err != nil {
		log.Error("receipt-target stopped", "err", err)
		os.Exit(1)
	}
}

func run(listen, jwks, audience, issuer string, log *slog.Logger) error {
	var keys receipt.KeySource
	if strings.HasPrefix(jwks, "http://") || strings.HasPrefix(jwks, "https://") {
		keys = receipt.NewRemoteKeys(jwks, receipt.RemoteOptions{})
	} else {
		set, err := receipt.LoadJWKS(jwks)
		if err != nil {
			return err
		}
		keys = set
	}
	h, err := newHandler(keys, audience, issuer, log)
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: listen, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	shutDown := make(chan struct{})
	go func() {
		defer close(shutDown)
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	log.Info("receipt-target listening", "listen", listen, "audience", audience, "jwks", jwks)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	<-shutDown // ListenAndServe returns as Shutdown starts: let the requests in flight finish
	return nil
}

// newHandler is the calendar behind the receipt middleware.
func newHandler(keys receipt.KeySource, audience, issuer string, log *slog.Logger) (http.Handler, error) {
	require, err := receipt.Middleware(receipt.Config{Keys: keys, Audience: audience, Issuer: issuer})
	if err != nil {
		return nil, err
	}
	cal := &calendar{events: map[string]map[string]any{"1": {"title": "Standup", "start": "09:00"}}, log: log}
	return require(cal), nil
}

type calendar struct {
	mu      sync.Mutex
	events  map[string]map[string]any
	version int
	log     *slog.Logger
}

func (c *calendar) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, ok := strings.CutPrefix(r.URL.Path, "/events/")
	c.mu.Lock()
	defer c.mu.Unlock()
	ev := c.events[id]
	if !ok || ev == nil {
		http.Error(w, "no such event", http.StatusNotFound)
		return
	}
	etag := fmt.Sprintf(`"%d"`, c.version)
	switch r.Method {
	case http.MethodGet:
		w.Header().Set("ETag", etag)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(ev)
	case http.MethodPatch:
		if im := r.Header.Get("If-Match"); im != "" && im != etag {
			http.Error(w, "the event changed", http.StatusPreconditionFailed)
			return
		}
		var patch map[string]any
		if err := json.NewDecoder(r.Body).Decode(&patch); err != nil {
			http.Error(w, "the body must be a JSON object", http.StatusBadRequest)
			return
		}
		for k, v := range patch {
			ev[k] = v
		}
		c.version++
		// The middleware let it through: the claims say who approved it.
		rc := receipt.FromContext(r.Context())
		var who []string
		for _, a := range rc.Approvals {
			who = append(who, a.Subject+" via "+a.Via)
		}
		c.log.Info("write applied", "event", id, "operation", rc.ID, "payload_hash", rc.PayloadHash, "approved_by", strings.Join(who, ", "))
		w.Header().Set("ETag", fmt.Sprintf(`"%d"`, c.version))
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(ev)
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}
