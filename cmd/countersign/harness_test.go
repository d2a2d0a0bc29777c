package main

// End-to-end harness: the whole service, as `countersign serve` builds it,
// on 127.0.0.1:0.
//
//	srv := startService(t, serviceOpts{Config: yaml, Env: map[string]string{…}})
//	status, body := srv.call(t, "POST", "/v1/operations", srv.APIKey, `{"action":…}`)
//	link := srv.consoleLink(t, "grace")   // an approval link printed by the console channel
//	second := startService(t, serviceOpts{Config: yaml, RedisURL: srv.RedisURL})  // a replica
//
// Redis: REDIS_URL (flushed) when set, else an embedded miniredis shared by
// the replicas of one test. testAPIKey is the key of every principal
// declared with testKeyHash in a test's config.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/testkit"

	"github.com/countersign/countersign/internal/testing/openapitest"
	"github.com/countersign/countersign/internal/testing/redistest"
	"go.opentelemetry.io/otel/trace"
)

const testAPIKey = "cs_test_key_for_end_to_end_tests_only"

var testKeyHash = apiKeyHash(testAPIKey)

// testLinkKeys is shared by the replicas of a test, so each accepts the
// other's links.
const testLinkKeys = "k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

// syncBuffer is a goroutine-safe log sink that tests can search.
type syncBuffer = testkit.Buffer

type serviceOpts struct {
	// Config is the YAML policy; empty runs development mode.
	Config string
	Env    map[string]string
	// RedisURL joins an existing service's Redis (a second replica).
	RedisURL string
	Workers  int
	Now      func() time.Time
	// SystemClock is the replica's own clock (an offset one: the service
	// must not follow it).
	SystemClock func() time.Time
	// Tracer records the service's spans (default: none).
	Tracer trace.TracerProvider
}

type testService struct {
	*Main
	Stderr *syncBuffer
	// Transcript holds every response body that call returned.
	Transcript *syncBuffer
	RedisURL   string
	APIKey     string
	opts       serviceOpts
	closed     bool
}

// apiCheck validates every response of every service the tests start
// against the OpenAPI description (web/openapi.json): it is
// http.DefaultTransport for this package's tests, so the harness's calls,
// the browser, the Go client inside countersign mcp and countersign ops
// all go through it. An undescribed status code or field fails the test
// that started the service.
var apiCheck *openapitest.Transport

func TestMain(m *testing.M) {
	tr, err := openapitest.NewTransport(http.DefaultTransport)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	apiCheck = tr
	http.DefaultTransport = tr
	code := m.Run()
	if code == 0 && testing.Verbose() {
		fmt.Printf("openapi: %d responses validated against web/openapi.json\n", tr.Checked())
	}
	os.Exit(code)
}

// startService starts the whole service and stops it when t ends.
func startService(t testing.TB, o serviceOpts) *testService {
	t.Helper()
	env := map[string]string{
		"COUNTERSIGN_LISTEN":    "127.0.0.1:0",
		"COUNTERSIGN_LINK_KEYS": testLinkKeys,
		// The shared test Redis has no replica and no AOF: accept that
		// (tests that need durability set it themselves).
		"COUNTERSIGN_REDIS_MIN_REPLICAS": "0",
	}
	if o.RedisURL == "" {
		o.RedisURL = redistest.Start(t).URL
	}
	env["COUNTERSIGN_REDIS_URL"] = o.RedisURL
	if o.Config != "" {
		path := t.TempDir() + "/countersign.yaml"
		if err := os.WriteFile(path, []byte(o.Config), 0o600); err != nil {
			t.Fatal(err)
		}
		env["COUNTERSIGN_CONFIG"] = path
	} else {
		env["COUNTERSIGN_DEV_API_KEY"] = testAPIKey
		// Development mode writes its audit to a new temporary folder by
		// default; tests keep it in theirs (TestDevelopmentAuditFile
		// clears this to try the default).
		env["COUNTERSIGN_AUDIT_FILE"] = t.TempDir() + "/audit.jsonl"
	}
	for k, v := range o.Env {
		env[k] = v
	}
	s := &testService{Stderr: &syncBuffer{}, Transcript: &syncBuffer{}, RedisURL: o.RedisURL, APIKey: testAPIKey, opts: o}
	s.Main = &Main{
		Env:    func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Stderr: s.Stderr, Workers: o.Workers, Now: o.Now, TracerProvider: o.Tracer, SystemClock: o.SystemClock,
	}
	if err := s.Main.Open(context.Background()); err != nil {
		_ = s.Main.Close()
		t.Fatalf("start service: %v\n%s", err, s.Stderr.String())
	}
	t.Cleanup(func() { s.stop(t) })
	apiCheck.Watch(t, s.URL())
	return s
}

// stop closes the service (idempotent).
func (s *testService) stop(t testing.TB) {
	if s.closed {
		return
	}
	s.closed = true
	if err := s.Main.Close(); err != nil {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		t.Errorf("close service: %v\n%s", err, buf[:n])
	}
}

// URL returns the service's base URL.
func (s *testService) URL() string { return "http://" + s.Addr }

// call makes an HTTP request with an optional bearer key and returns the
// status and body.
func (s *testService) call(t testing.TB, method, path, key, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Fprintf(s.Transcript, "%s %s -> %d %v\n%s\n", method, path, resp.StatusCode, resp.Header, b)
	return resp.StatusCode, b
}

// op is the part of the agent's operation view tests look at.
type op struct {
	Key         string          `json:"operation_key"`
	Status      string          `json:"status"`
	PayloadHash string          `json:"payload_hash"`
	Input       json.RawMessage `json:"input"`
	Result      json.RawMessage `json:"result"`
	Error       *struct {
		Code           string `json:"code"`
		OutcomeUnknown *bool  `json:"outcome_unknown"`
	} `json:"error"`
	Approval struct {
		Required  int `json:"required"`
		Approvals []struct {
			Approver string `json:"approver"`
			Via      string `json:"via"`
		} `json:"approvals"`
		Rejection *struct {
			Approver string `json:"approver"`
			Reason   string `json:"reason"`
		} `json:"rejection"`
	} `json:"approval"`
	Preview struct {
		Fields []struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		} `json:"fields"`
	} `json:"preview"`
	NextStep string `json:"next_step"`
}

// apiError is the contract's error body.
type apiError struct {
	Error struct {
		Code    string         `json:"code"`
		Message string         `json:"message"`
		Details map[string]any `json:"details"`
	} `json:"error"`
}

func decode[T any](t testing.TB, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %T from %s: %v", v, b, err)
	}
	return v
}

// prepareSend prepares and sends an operation, failing the test on error.
func (s *testService) prepareSend(t testing.TB, body string) op {
	t.Helper()
	st, b := s.call(t, "POST", "/v1/operations", s.APIKey, body)
	if st != 201 {
		t.Fatalf("prepare: %d %s", st, b)
	}
	o := decode[op](t, b)
	if st, b = s.call(t, "POST", "/v1/operations/"+o.Key+"/send", s.APIKey, ""); st != 202 {
		t.Fatalf("send: %d %s", st, b)
	}
	return decode[op](t, b)
}

// waitFor long-polls until the operation reaches status.
func (s *testService) waitFor(t testing.TB, key, status string) op {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for wait := "0"; ; wait = "5" {
		st, b := s.call(t, "GET", "/v1/operations/"+key+"?wait="+wait, s.APIKey, "")
		if st != 200 {
			t.Fatalf("status: %d %s", st, b)
		}
		o := decode[op](t, b)
		if o.Status == status {
			return o
		}
		if time.Now().After(deadline) {
			t.Fatalf("operation %s is %s, want %s", key, o.Status, status)
		}
	}
}

var consoleLinkRE = regexp.MustCompile(`approver:\s+.*\((\S+)\)[\s\S]*?operation:\s+(op_[a-z2-7]{26})[\s\S]*?Review and decide: (\S+)`)

// consoleLink waits for the console channel to print the approval link of
// approver for operation key, and returns it.
func (s *testService) consoleLink(t testing.TB, key, approver string) string {
	t.Helper()
	return consoleLinkOf(t, key, approver, s)
}

// consoleLinkOf finds the link in whichever replica's console (terminal)
// printed it: any replica's workers may deliver it.
func consoleLinkOf(t testing.TB, key, approver string, replicas ...*testService) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range replicas {
			for _, m := range consoleLinkRE.FindAllStringSubmatch(s.Stderr.String(), -1) {
				if m[1] == approver && m[2] == key {
					return m[3]
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no console link for %s on %s in:\n%s", approver, key, replicas[0].Stderr.String())
	return ""
}

// browser is a cookie-keeping HTTP client, as a person's browser would be.
type browser struct {
	c *http.Client
}

func newBrowser() *browser {
	jar := &cookieJar{m: map[string][]*http.Cookie{}}
	return &browser{c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type cookieJar struct {
	mu sync.Mutex
	m  map[string][]*http.Cookie
}

func (j *cookieJar) SetCookies(u *url.URL, cs []*http.Cookie) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.m[u.Hostname()] = append(j.m[u.Hostname()], cs...) // cookies ignore the port
}

func (j *cookieJar) Cookies(u *url.URL) []*http.Cookie {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.m[u.Hostname()]
}

// get fetches a page and returns status, body and headers.
func (b *browser) do(t testing.TB, method, link string, form url.Values) (int, string, http.Header) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, link, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, link, err)
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(page), resp.Header
}

var csrfRE = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// decide opens the approval page like a person and presses a button.
func (b *browser) decide(t testing.TB, link, decision, reason string) (int, string) {
	t.Helper()
	st, page, _ := b.do(t, "GET", link, nil)
	if st != 200 {
		t.Fatalf("open %s: %d\n%s", link, st, page)
	}
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no form on the page:\n%s", page)
	}
	st, page, _ = b.do(t, "POST", link, url.Values{"_csrf": {m[1]}, "decision": {decision}, "reason": {reason}})
	return st, page
}

// assertNoCapabilities fails if any part of the links appears in texts:
// what agents got, pages, and logs (names starting with "log", where the
// console channel's notice is the one allowed place).
func assertNoCapabilities(t testing.TB, links []string, texts map[string]string) {
	t.Helper()
	var secrets []string
	for _, l := range links {
		secrets = append(secrets, testkit.LinkSecrets(l)...)
	}
	testkit.AssertNoLinkSecrets(t, secrets, texts)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var _ = fmt.Sprintf

func newFormRequest(link string, form url.Values) (*http.Request, error) {
	req, err := http.NewRequest("POST", link, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return req, nil
}
