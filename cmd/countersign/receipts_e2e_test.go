package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/countersign/countersign/receipt"
)

// Receipt keys of the end-to-end tests (seeds of 32 bytes 0x01… and 0x02…).
const (
	seedK1 = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="
	seedK2 = "AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI="
)

// receiptTarget is a calendar API that verifies receipts with the
// middleware, fetching countersign's JWKS from its public URL. It records
// every write as it arrived (before the middleware judged it), so a test
// can deliver one again.
type receiptTarget struct {
	srv  *httptest.Server
	mw   atomic.Pointer[http.Handler]
	mu   sync.Mutex
	doc  map[string]any
	etag int
	// arrived are the writes as received; applied the jtis of the writes
	// the handler applied.
	arrived []*http.Request
	bodies  []string
	applied []string
}

func newReceiptTarget(t *testing.T) *receiptTarget {
	rt := &receiptTarget{doc: map[string]any{"title": "Standup", "start": "09:00", "end": "09:15"}}
	rt.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			rt.mu.Lock()
			rt.arrived = append(rt.arrived, r.Clone(context.Background()))
			rt.bodies = append(rt.bodies, string(b))
			rt.mu.Unlock()
		}
		(*rt.mw.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(rt.srv.Close)
	return rt
}

// guard starts verifying receipts from countersign at publicURL.
func (rt *receiptTarget) guard(t *testing.T, publicURL string) {
	mw, err := receipt.Middleware(receipt.Config{
		Keys:     receipt.NewRemoteKeys(publicURL+"/.well-known/jwks.json", receipt.RemoteOptions{}),
		Audience: "calendar", Issuer: publicURL,
	})
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(rt.api))
	rt.mw.Store(&h)
}

func (rt *receiptTarget) api(w http.ResponseWriter, r *http.Request) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if r.URL.Path != "/api/events/7" {
		w.WriteHeader(404)
		return
	}
	etag := fmt.Sprintf(`"%d"`, rt.etag)
	switch r.Method {
	case http.MethodGet:
		w.Header().Set("ETag", etag)
		_ = json.NewEncoder(w).Encode(rt.doc)
	case http.MethodPatch:
		if im := r.Header.Get("If-Match"); im != "" && im != etag {
			w.WriteHeader(412)
			return
		}
		var patch map[string]any
		_ = json.NewDecoder(r.Body).Decode(&patch)
		for k, v := range patch {
			rt.doc[k] = v
		}
		rt.etag++
		rt.applied = append(rt.applied, receipt.FromContext(r.Context()).ID)
		w.Header().Set("ETag", fmt.Sprintf(`"%d"`, rt.etag))
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true})
	default:
		w.WriteHeader(405)
	}
}

func (rt *receiptTarget) state() (title any, applied []string) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.doc["title"], append([]string(nil), rt.applied...)
}

// redeliver sends write i again, as it first arrived, with body.
func (rt *receiptTarget) redeliver(t *testing.T, i int, body string) (int, string) {
	t.Helper()
	rt.mu.Lock()
	first := rt.arrived[i]
	rt.mu.Unlock()
	req, _ := http.NewRequest(first.Method, rt.srv.URL+first.URL.RequestURI(), strings.NewReader(body))
	req.Header = first.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestReceiptEndToEnd: an agent prepares a calendar PATCH, a human
// approves it on the page, the worker writes it with its receipt, and the
// target (middleware, keys fetched from countersign's JWKS) verifies and
// applies it. A second delivery of the same request, and the same receipt
// with an edited body, are refused. The receipt is the agent's to see, the
// audit names it, `countersign verify` checks it, and after a key
// rotation a replica still verifies it.
func TestReceiptEndToEnd(t *testing.T) {
	rt := newReceiptTarget(t)
	yaml, err := os.ReadFile(httpreqConfig(t, rt.srv.URL))
	must(t, err)
	srv := startService(t, serviceOpts{Config: string(yaml), Workers: 2,
		Env: map[string]string{"CAL_TOKEN": httpreqCred, "COUNTERSIGN_RECEIPT_KEYS": "k1:" + seedK1}})
	srv.APIKey = httpreqAPIKey
	rt.guard(t, srv.PublicURL)

	o := srv.prepareSend(t, `{"action":"http.request","input":{"target":"calendar","method":"PATCH","path":"/events/7","body":{"title":"Retro"}}}`)
	link := srv.consoleLink(t, o.Key, "grace")
	if st, _ := newBrowser().decide(t, link, "approve", ""); st != 200 {
		t.Fatalf("approve: %d", st)
	}
	done := srv.waitFor(t, o.Key, "succeeded")
	title, applied := rt.state()
	if title != "Retro" || len(applied) != 1 || applied[0] != o.Key {
		t.Fatalf("target: title %v, applied %v", title, applied)
	}

	// The agent sees the receipt; it is the one the target received.
	var result struct {
		Status  int    `json:"status"`
		Receipt string `json:"receipt"`
	}
	must(t, json.Unmarshal(done.Result, &result))
	if result.Status != 200 || result.Receipt == "" || result.Receipt != rt.arrived[0].Header.Get(receipt.Header) {
		t.Fatalf("result = %s", done.Result)
	}

	// A second delivery of the same request is refused, and so is the
	// receipt with an edited body.
	if st, body := rt.redeliver(t, 0, rt.bodies[0]); st != 401 || !strings.Contains(body, "replayed") {
		t.Fatalf("second delivery: %d %s", st, body)
	}
	if st, body := rt.redeliver(t, 0, `{"title":"Fired"}`); st != 401 || !strings.Contains(body, "not_covered") {
		t.Fatalf("edited body: %d %s", st, body)
	}
	if title, applied := rt.state(); title != "Retro" || len(applied) != 1 {
		t.Fatalf("after the refusals: %v %v", title, applied)
	}

	// The audit names the receipt.
	st, evs := srv.call(t, "GET", "/v1/operations/"+o.Key+"/events", srv.APIKey, "")
	if st != 200 || !regexp.MustCompile(`"event":"succeeded"[^}]*"details":\{[^}]*"receipt":"`+o.Key+`"`).Match(evs) {
		t.Fatalf("events: %d %s", st, evs)
	}

	// countersign verify: against the JWKS URL, with the request it covers.
	dir := t.TempDir()
	bodyFile := filepath.Join(dir, "body.json")
	must(t, os.WriteFile(bodyFile, []byte(rt.bodies[0]), 0o600))
	writeURL := rt.srv.URL + "/api/events/7"
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"verify", "--jwks", srv.PublicURL + "/.well-known/jwks.json", "--aud", "calendar",
		"--method", "PATCH", "--url", writeURL, "--body", bodyFile}, strings.NewReader(result.Receipt), &out, &errOut, noEnv)
	if code != 0 || !strings.Contains(out.String(), "receipt: valid (signed by key k1") || !strings.Contains(out.String(), "covers PATCH "+writeURL+": yes") ||
		!strings.Contains(out.String(), `"jti": "`+o.Key+`"`) {
		t.Fatalf("verify: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	must(t, os.WriteFile(bodyFile, []byte(`{"title":"Fired"}`), 0o600))
	out.Reset()
	if code := run(context.Background(), []string{"verify", result.Receipt, "--jwks", srv.PublicURL + "/.well-known/jwks.json",
		"--method", "PATCH", "--url", writeURL, "--body", bodyFile}, strings.NewReader(""), &out, &errOut, noEnv); code != 1 || !strings.Contains(out.String(), ": NO: ") {
		t.Fatalf("verify of another body: exit %d\n%s", code, out.String())
	}

	// Rotation: a replica signing with k2 still publishes k1, so the
	// receipt stays verifiable.
	replica := startService(t, serviceOpts{Config: string(yaml), Workers: -1, RedisURL: srv.RedisURL,
		Env: map[string]string{"CAL_TOKEN": httpreqCred, "COUNTERSIGN_RECEIPT_KEYS": "k2:" + seedK2 + ", k1:" + seedK1}})
	st, jwks := replica.call(t, "GET", "/.well-known/jwks.json", "", "")
	keys, err := receipt.ParseJWKS(jwks)
	if st != 200 || err != nil || strings.Join(keys.IDs(), ",") != "k2,k1" || replica.ReceiptKeyID != "k2" {
		t.Fatalf("replica JWKS %d %s (%v), signs with %s", st, jwks, err, replica.ReceiptKeyID)
	}
	out.Reset()
	if code := run(context.Background(), []string{"verify", "--jwks", replica.PublicURL + "/.well-known/jwks.json", result.Receipt},
		nil, &out, &errOut, noEnv); code != 0 {
		t.Fatalf("old receipt against the rotated JWKS: exit %d\n%s", code, out.String())
	}

	// The receipt keys never show: not in logs, not to the agent.
	for _, seed := range []string{seedK1, seedK2, strings.TrimRight(seedK1, "=")} {
		for name, text := range map[string]string{"log": srv.Stderr.String(), "replica log": replica.Stderr.String(),
			"responses": srv.Transcript.String() + replica.Transcript.String()} {
			if strings.Contains(text, seed) {
				t.Errorf("a receipt seed shows in the %s", name)
			}
		}
	}
}

func noEnv(string) (string, bool) { return "", false }

var devMailLinkRE = regexp.MustCompile(`href="(/dev/mail/\d+)"`)

// TestDevelopmentModeReceipts: with no configuration, a key is generated
// and the banner says so; an approved email arrives in the dev mailbox with
// its receipt, which verifies against the service's JWKS.
func TestDevelopmentModeReceipts(t *testing.T) {
	srv := startService(t, serviceOpts{})
	banner := srv.Stderr.String()
	if !strings.Contains(banner, "receipts:  signed with a key generated at start (kid "+srv.ReceiptKeyID) ||
		!strings.HasPrefix(srv.ReceiptKeyID, "gen-") || !strings.Contains(banner, srv.PublicURL+"/.well-known/jwks.json") {
		t.Fatalf("banner:\n%s", banner)
	}
	o := srv.prepareSend(t, `{"action":"email.send","input":{"to":["ada@client.example"],"subject":"Invoice","text":"Hi Ada"}}`)
	if st, _ := newBrowser().decide(t, srv.consoleLink(t, o.Key, "you"), "approve", ""); st != 200 {
		t.Fatalf("approve: %d", st)
	}
	done := srv.waitFor(t, o.Key, "succeeded")
	_, list, _ := newBrowser().do(t, "GET", srv.URL()+"/dev/mail", nil)
	m := devMailLinkRE.FindStringSubmatch(list)
	if m == nil {
		t.Fatalf("dev mailbox:\n%s", list)
	}
	_, raw, _ := newBrowser().do(t, "GET", srv.URL()+m[1], nil)
	hdr := regexp.MustCompile(`(?m)^Countersign-Receipt:((?:.*\r?\n[ \t].*)*|.*)`).FindStringSubmatch(raw)
	if hdr == nil {
		t.Fatalf("no receipt header in\n%s", raw)
	}
	var out, errOut bytes.Buffer
	jwksFile := filepath.Join(t.TempDir(), "jwks.json")
	_, jwks := srv.call(t, "GET", "/.well-known/jwks.json", "", "")
	must(t, os.WriteFile(jwksFile, jwks, 0o600))
	if code := run(context.Background(), []string{"verify", "-", "--jwks", jwksFile, "--aud", "email"}, strings.NewReader(hdr[1]), &out, &errOut, noEnv); code != 0 {
		t.Fatalf("verify the email's receipt: %d\n%s%s", code, out.String(), errOut.String())
	}
	var result struct{ Receipt string }
	must(t, json.Unmarshal(done.Result, &result))
	if strings.Join(strings.Fields(hdr[1]), "") != result.Receipt {
		t.Errorf("the email's receipt is not result.receipt")
	}
}
