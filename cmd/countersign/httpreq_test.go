package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/redistest"
)

const (
	httpreqCred   = "cs-e2e-credential-91b2c3d4e5"
	httpreqAPIKey = "cs_test_httpreq_agent_key_0123456789"
)

func sha256hex(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

func httpreqConfig(t *testing.T, targetURL string) string {
	t.Helper()
	cfg := fmt.Sprintf(`
principals:
  - {id: support-agent, api_key_sha256: %q, scopes: ["http.request:calendar", "http.request:billing"], on_behalf_of: sam}
approvers:
  - {id: grace, name: Grace Park, email: grace@example.com, groups: [owners, finance]}
  - {id: ada, name: Ada Lovelace, email: ada@example.com, groups: [finance]}
  - {id: sam, name: Sam Lee, email: sam@example.com, groups: [staff]}
targets:
  - name: calendar
    base_url: %s/api
    allow_private: true
    headers: {Authorization: "Bearer ${CAL_TOKEN}"}
    allow: [{method: PATCH, path: "/events/*"}, {method: DELETE, path: "/events/*"}]
    state: {fields: [start, end, title]}
  - name: billing
    base_url: %s/billing
    allow_private: true
    headers: {X-Api-Key: "${CAL_TOKEN}"}
    allow: [{method: POST, path: /invoices}]
routes:
  - name: big-invoices
    match: {action: http.request, target: billing, when: [{attr: body.amount, gt: 1000}]}
    approvers: {groups: [finance]}
    required: 2
    notify: [console]
  - name: invoices
    match: {action: http.request, target: billing}
    approvers: {groups: [finance]}
    notify: [console]
  - name: calendar
    match: {action: http.request, target: calendar}
    approvers: {ids: [grace, sam]}
    notify: [console]
    forbid_self_approval: true
`, sha256hex(httpreqAPIKey), targetURL, targetURL)
	p := filepath.Join(t.TempDir(), "countersign.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheckConfigExplainsHTTPRequestSample(t *testing.T) {
	path := httpreqConfig(t, "http://127.0.0.1:1")
	env := func(string) (string, bool) { return "", false } // no secrets needed to check a file
	var out bytes.Buffer
	err := checkConfigArgs([]string{"--action", "http.request", "--principal", "support-agent",
		"--input", `{"target":"billing","method":"POST","path":"/invoices","body":{"amount":250}}`, path}, env, &out)
	if err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"big-invoices: skipped, body.amount > 1000 does not hold (body.amount is \"250\")",
		"invoices: matches",
		`→ route "invoices": 1 of [grace, ada] via console`,
		"match:     action=http.request target=billing body.amount > 1000",
		"headers: Authorization (values from the environment, never shown)",
		"state:   start, end, title, plus the fields each write sets",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	out.Reset()
	if err := checkConfigArgs([]string{"--action", "http.request", "--principal", "support-agent",
		"--input", `{"target":"billing","method":"POST","path":"/invoices","body":{"amount":5000}}`, path}, env, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `→ route "big-invoices": 2 of [grace, ada]`) {
		t.Errorf("big invoice:\n%s", out.String())
	}
	out.Reset()
	if err := checkConfigArgs([]string{"--action", "http.request", "--principal", "support-agent",
		"--input", `{"target":"calendar","method":"PATCH","path":"/events/1","body":{}}`, path}, env, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `→ route "calendar": 1 of [grace] via console`) {
		t.Errorf("calendar (sam is left out: forbid_self_approval):\n%s", out.String())
	}
	err = checkConfigArgs([]string{"--action", "http.request", "--principal", "support-agent", "--input", `{"target":"x","method":"PATCH","path":"//evil"}`, path}, env, &out)
	if err == nil || !strings.Contains(err.Error(), "absolute_url") && !strings.Contains(err.Error(), "not a URL") {
		t.Errorf("bad sample input: %v", err)
	}
}

// e2eTarget is a small ETag API for the end-to-end test.
type e2eTarget struct {
	mu      sync.Mutex
	doc     map[string]any
	version int
	writes  int
	auth    []string
}

func (s *e2eTarget) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.auth = append(s.auth, r.Header.Get("Authorization")+r.Header.Get("X-Api-Key"))
	etag := fmt.Sprintf(`"%d"`, s.version)
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/api/events/7":
		w.Header().Set("ETag", etag)
		_ = json.NewEncoder(w).Encode(s.doc)
	case r.Method == http.MethodPatch && r.URL.Path == "/api/events/7":
		if im := r.Header.Get("If-Match"); im != "" && im != etag {
			w.WriteHeader(412)
			return
		}
		var patch map[string]any
		_ = json.NewDecoder(r.Body).Decode(&patch)
		for k, v := range patch {
			s.doc[k] = v
		}
		s.version++
		s.writes++
		w.Header().Set("ETag", fmt.Sprintf(`"%d"`, s.version))
		// A careless API that echoes the caller's credential.
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "echo": r.Header.Get("Authorization")})
	default:
		w.WriteHeader(404)
	}
}

func (s *e2eTarget) state() (any, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.doc["title"], s.writes
}

func (s *e2eTarget) set(k string, v any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.doc[k] = v
	s.version++
}

// TestServeHTTPRequestEndToEnd runs the whole service from a policy file:
// an agent prepares a calendar PATCH over REST, a human approves it on the
// page, the worker writes with If-Match and Idempotency-Key; then a stale
// one is refused, an undo is drafted, and everything the agent, the log
// and the audit saw is scanned for the target's credential.
func TestServeHTTPRequestEndToEnd(t *testing.T) {
	target := &e2eTarget{doc: map[string]any{"title": "Standup", "start": "09:00", "end": "09:15"}}
	ts := httptest.NewServer(target)
	defer ts.Close()
	rs := redistest.Start(t)
	env := map[string]string{
		"COUNTERSIGN_CONFIG": httpreqConfig(t, ts.URL), "COUNTERSIGN_LISTEN": "127.0.0.1:0",
		"COUNTERSIGN_REDIS_URL": rs.URL, "CAL_TOKEN": httpreqCred, "COUNTERSIGN_REDIS_MIN_REPLICAS": "0",
	}
	stderr := &syncBuffer{}
	m := &Main{Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }, Stderr: stderr, Workers: 2}
	if err := m.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()

	var responses []string
	api := func(method, path, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, m.PublicURL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+httpreqAPIKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		responses = append(responses, string(b))
		var v map[string]any
		_ = json.Unmarshal(b, &v)
		return resp.StatusCode, v
	}
	waitFor := func(key, status string) map[string]any {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			_, v := api("GET", "/v1/operations/"+key+"?wait=2", "")
			if v["status"] == status {
				return v
			}
		}
		t.Fatalf("%s never reached %s", key, status)
		return nil
	}
	linkRE := regexp.MustCompile(`Review and decide: (\S+)`)
	linkFor := func(key string) string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			out := stderr.String()
			if i := strings.Index(out, key+"  (http.request)"); i >= 0 {
				if m := linkRE.FindStringSubmatch(out[i:]); m != nil {
					return m[1]
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("no approval link for %s", key)
		return ""
	}
	jar, _ := cookiejar.New(nil)
	human := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	csrfRE := regexp.MustCompile(`name="_csrf" value="([^"]+)"`)
	page := func(link string) (int, string) {
		resp, err := human.Get(link)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	decide := func(link, html string) (int, string) {
		m := csrfRE.FindStringSubmatch(html)
		if m == nil {
			t.Fatalf("no CSRF token on the page")
		}
		resp, err := human.PostForm(link, url.Values{"_csrf": {m[1]}, "decision": {"approve"}})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	prepareBody := `{"action":"http.request","input":{"target":"calendar","method":"PATCH","path":"/events/7","body":{"title":"Retro"}}}`

	// 1. Approved and executed.
	status, op := api("POST", "/v1/operations", prepareBody)
	if status != 201 {
		t.Fatalf("prepare: %d %v", status, op)
	}
	key := op["operation_key"].(string)
	if diff := op["preview"].(map[string]any)["diff"].([]any); len(diff) != 1 {
		t.Fatalf("diff = %v", diff)
	}
	api("POST", "/v1/operations/"+key+"/send", "")
	link := linkFor(key)
	code, html := page(link)
	if code != 200 || !strings.Contains(html, `id="approve"`) || !strings.Contains(html, "Retro") {
		t.Fatalf("page: %d\n%s", code, html)
	}
	if code, _ := decide(link, html); code != 200 {
		t.Fatalf("approve: %d", code)
	}
	done := waitFor(key, "succeeded")
	if title, writes := target.state(); title != "Retro" || writes != 1 {
		t.Fatalf("target: title %v, %d writes", title, writes)
	}
	if r := done["result"].(map[string]any); r["status"] != float64(200) || r["post_state_hash"] == "" {
		t.Fatalf("result = %v", r)
	}

	// 2. Undo of the first: drafted, linked. Then a stale undo is refused.
	status, undo := api("POST", "/v1/operations/"+key+"/undo", "")
	if status != 201 || undo["undoes"] != key {
		t.Fatalf("undo: %d %v", status, undo)
	}
	api("POST", "/v1/operations/"+undo["operation_key"].(string)+"/cancel", "")
	target.set("title", "Edited by hand")
	status, refused := api("POST", "/v1/operations/"+key+"/undo", "")
	if refused["error"] == nil || refused["error"].(map[string]any)["code"] != "stale_state" {
		t.Fatalf("stale undo: %d %v", status, refused)
	}
	t.Logf("stale undo answered HTTP %d (proposed: 409)", status)

	// 3. Stale: the resource changes after the preview; the page re-checks.
	_, op2 := api("POST", "/v1/operations", strings.Replace(prepareBody, "Retro", "Planning", 1))
	key2 := op2["operation_key"].(string)
	api("POST", "/v1/operations/"+key2+"/send", "")
	link2 := linkFor(key2)
	target.set("start", "10:30")
	_, html2 := page(link2) // the re-check fails the operation
	if m := csrfRE.FindStringSubmatch(html2); m != nil {
		decide(link2, html2) // even if a button were offered, it cannot approve
	}
	failed := waitFor(key2, "failed")
	e := failed["error"].(map[string]any)
	if e["code"] != "stale_state" || e["details"].(map[string]any)["current"].(map[string]any)["start"] != "10:30" {
		t.Fatalf("error = %v", e)
	}
	if _, writes := target.state(); writes != 1 {
		t.Fatalf("a stale operation wrote (%d writes)", writes)
	}

	// 4. Route conditions, end to end: a big invoice needs two approvers.
	_, inv := api("POST", "/v1/operations", `{"action":"http.request","input":{"target":"billing","method":"POST","path":"/invoices","body":{"amount":5000}}}`)
	if a := inv["approval"].(map[string]any); a["required"] != float64(2) {
		t.Fatalf("big invoice approval = %v", a)
	}

	// 5. The credential reached the target, and nothing else.
	for _, k := range []string{key, key2} {
		api("GET", "/v1/operations/"+k+"/events", "")
	}
	api("GET", "/v1/operations", "")
	sawCred := 0
	target.mu.Lock()
	auth := append([]string(nil), target.auth...)
	target.mu.Unlock()
	for _, a := range auth {
		if strings.Contains(a, httpreqCred) {
			sawCred++
		}
	}
	if sawCred == 0 {
		t.Fatal("the target never received the credential")
	}
	all := strings.Join(responses, "\n") + stderr.String()
	if strings.Contains(all, httpreqCred) {
		i := strings.Index(all, httpreqCred)
		t.Fatalf("credential leaked: …%s…", all[max(0, i-300):min(len(all), i+40)])
	}
	if !strings.Contains(all, "[redacted]") {
		t.Fatal("the echoed credential was not seen redacted: the scan missed the result")
	}
}
