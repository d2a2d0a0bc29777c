package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/internal/testing/fakeslack"
	"github.com/countersign/countersign/internal/testing/faketeams"
	"github.com/countersign/countersign/internal/testing/mcpupstream"
	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/internal/testing/smtptest"
	"github.com/countersign/countersign/receipt"
	"github.com/countersign/countersign/store"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
)

// The documentation's command lines are tests. Every line of a fenced code
// block in README.md and docs/*.md whose command is countersign (or go run
// ./cmd/countersign) runs here in-process, through the binary's entry
// point, exactly as written but for the placeholders listed in
// docPlaceholders, and must exit 0; so does every line of every command's
// --help examples. Command lines are in ```sh (or bash, shell) blocks;
// other blocks are output, configuration or code. serve lines are started, asked for /healthz, and
// stopped; ops and mcp lines talk to a development-mode service the test
// runs. Inline mentions in prose are names, not command lines.

type docLine struct {
	where string // file:line
	text  string
	env   map[string]string // the exports before it in its block
}

type docFile struct {
	lines  []docLine
	policy string // the file's first YAML block with routes: (its policy file)
}

var fenceRE = regexp.MustCompile("^(\\s*)```")

// readDoc extracts the command lines and the policy of a markdown file.
func readDoc(t *testing.T, path, name string) docFile {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f docFile
	var block []string
	var blockLang, indent string
	start, in := 0, false
	for i, l := range strings.Split(string(raw), "\n") {
		if m := fenceRE.FindStringSubmatch(l); m != nil {
			if !in {
				in, indent, start, block = true, m[1], i+1, nil
				blockLang = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "```"))
				continue
			}
			in = false
			if blockLang == "yaml" && f.policy == "" && strings.Contains(strings.Join(block, "\n"), "routes:") {
				f.policy = strings.Join(block, "\n") + "\n"
			}
			switch blockLang {
			case "sh", "bash", "shell": // other blocks are output, config, code
				f.lines = append(f.lines, commandLines(t, name, start, block)...)
			}
			continue
		}
		if in {
			block = append(block, strings.TrimPrefix(l, indent))
		}
	}
	return f
}

// commandLines joins continuations and keeps the countersign lines of a
// block, each with the exports before it.
func commandLines(t *testing.T, name string, start int, block []string) []docLine {
	var out []docLine
	env := map[string]string{}
	for i := 0; i < len(block); i++ {
		n, text := start+i+1, block[i]
		for strings.HasSuffix(text, "\\") && i+1 < len(block) {
			i++
			text = strings.TrimSuffix(text, "\\") + " " + strings.TrimSpace(block[i])
		}
		trimmed := strings.TrimSpace(text)
		switch {
		case strings.HasPrefix(trimmed, "export "):
			words, err := shellWords(trimmed, env)
			if err != nil {
				t.Errorf("%s:%d: %v", name, n, err)
				continue
			}
			for _, w := range words[1:] {
				k, v, _ := strings.Cut(w, "=")
				env[k] = v
			}
		case isCountersignLine(trimmed):
			out = append(out, docLine{where: fmt.Sprintf("%s:%d", name, n), text: trimmed, env: copyEnv(env)})
		}
	}
	return out
}

var countersignLineRE = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*=\S*\s+)*(countersign|go run \./cmd/countersign)(\s|$)`)

func isCountersignLine(s string) bool { return countersignLineRE.MatchString(s) }

func copyEnv(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// docWorld is what the documented lines run against.
type docWorld struct {
	t        *testing.T
	dir      string
	srv      *testService // development mode: ops and mcp lines talk to it
	redis    string       // a second Redis for serve lines that name one
	smtp     *smtptest.Server
	slackAPI string
	teams    *faketeams.Server
	policy   string // the current document's policy file, written into dir
	// jwksURL serves the key set that signed the documents' receipt and
	// audit log fixtures.
	jwksURL string
	receipt string // $RECEIPT: a receipt for PATCH https://calendar.example/api/events/7 with body.json
}

// docPlaceholders are the values the docs leave to the reader, and what
// the test puts in their place. Everything else runs as written.
func (w *docWorld) placeholders() []struct{ doc, test string } {
	return []struct{ doc, test string }{
		{"http://127.0.0.1:8080", w.srv.URL()},                             // a running serve
		{"redis://redis.internal:6379/0", w.redis},                         // your Redis
		{"smtp.example.com:587", w.smtp.Addr()},                            // your SMTP server
		{"/etc/countersign/countersign.yaml", w.dir + "/countersign.yaml"}, // your policy file
		{"https://countersign.example/.well-known/jwks.json", w.jwksURL},   // your countersign's keys
		{"/var/log/countersign/audit.jsonl", w.dir + "/audit.jsonl"},       // your audit log
	}
}

func (w *docWorld) substitute(s string) string {
	for _, p := range w.placeholders() {
		s = strings.ReplaceAll(s, p.doc, p.test)
	}
	return s
}

// redirectRE is the one redirection a documented line may end with: its
// standard output into a file of the working directory ("> .env").
var redirectRE = regexp.MustCompile(`\s+>\s*([A-Za-z0-9_][A-Za-z0-9_.-]*|\.[A-Za-z0-9_.-]+)\s*$`)

// run executes one documented line and fails t unless it works.
func (w *docWorld) run(t *testing.T, l docLine) {
	lenv := copyEnv(l.env)
	lenv["RECEIPT"] = w.receipt
	text, into := l.text, ""
	if m := redirectRE.FindStringSubmatch(text); m != nil {
		text, into = strings.TrimSuffix(text, m[0]), m[1]
	}
	words, err := shellWords(text, lenv)
	if err != nil {
		t.Fatalf("%s: %v", l.where, err)
	}
	assign, cmd := splitCommand(words)
	env := copyEnv(l.env)
	for k, v := range assign {
		env[k] = v
	}
	for k, v := range env {
		env[k] = w.keys(w.substitute(v))
	}
	if cmd[0] == "go" {
		cmd = cmd[2:] // go run ./cmd/countersign …
	}
	args := cmd[1:]
	for i, a := range args {
		args[i] = w.substitute(a)
		if a == "op_…" {
			args[i] = w.operationFor(t, args)
		}
	}
	switch {
	case len(args) > 0 && args[0] == "serve":
		w.serve(t, l, env, args)
	case len(args) > 0 && args[0] == "mcp":
		w.mcp(t, l, env, args)
	default:
		code, out, stderr := runCLIEnv(t, env, args...)
		if code != 0 {
			t.Fatalf("%s: %s\nexit %d\n%s%s", l.where, l.text, code, out, stderr)
		}
		if into != "" {
			must(t, os.WriteFile(into, []byte(out), 0o600)) // the working directory is w.dir
		}
		t.Logf("%s: %s\n%s", l.where, l.text, firstLines(out, 3))
	}
}

// keys replaces the key placeholders with the development service's keys.
func (w *docWorld) keys(v string) string {
	switch v {
	case "cs_…":
		return testAPIKey
	case "cso_…":
		return testOperatorKey
	}
	return v
}

// operationFor makes an operation that the ops command can act on: one
// left executing for reconcile, a draft otherwise.
func (w *docWorld) operationFor(t *testing.T, args []string) string {
	body := `{"action":"email.send","input":{"to":["ada@client.example"],"subject":"Docs","text":"Hi"}}`
	if len(args) > 1 && args[0] == "ops" && args[1] == "reconcile" {
		o := w.srv.prepareSend(t, body)
		link := w.srv.consoleLink(t, o.Key, "you")
		if st, _ := newBrowser().decide(t, link, "approve", ""); st != 200 {
			t.Fatalf("approve: %d", st)
		}
		w.srv.waitFor(t, o.Key, "executing") // the SMTP server holds the message
		if slices.Contains(args, "succeeded") || slices.Contains(args, "failed") {
			// An operator says what happened only once the executor's lease
			// has passed: as if its process had been paused past it. Its
			// executor is then fenced; the message on its way is kept as
			// the late outcome.
			rdb := w.srv.Store.Client()
			keys, err := rdb.Keys(t.Context(), "*:o:"+o.Key).Result()
			if err != nil || len(keys) != 1 {
				t.Fatalf("the hash of %s: %v %v", o.Key, keys, err)
			}
			must(t, rdb.HSet(t.Context(), keys[0], "le", 1).Err())
		}
		return o.Key
	}
	st, b := w.srv.call(t, "POST", "/v1/operations", w.srv.APIKey, body)
	if st != 201 {
		t.Fatalf("prepare: %d %s", st, b)
	}
	return decode[op](t, b).Key
}

var listenRE = regexp.MustCompile(`"msg":"countersign serving","listen":"([^"]+)"`)

// serve starts a documented serve line, checks it answers, and stops it.
func (w *docWorld) serve(t *testing.T, l docLine, env map[string]string, args []string) {
	env["COUNTERSIGN_LISTEN"] = "127.0.0.1:0" // the default port may be taken
	if env["SLACK_BOT_TOKEN"] != "" {
		env["COUNTERSIGN_SLACK_API_URL"] = w.slackAPI // Slack's Web API, faked
	}
	if env["TEAMS_APP_ID"] != "" { // Microsoft's endpoints, faked
		for k, v := range w.teams.Env() {
			if strings.HasPrefix(k, "COUNTERSIGN_") {
				env[k] = v
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &syncBuffer{}
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, strings.NewReader(""), io.Discard, stderr, mapEnv(env)) }()
	deadline := time.After(15 * time.Second)
	for listenRE.FindStringSubmatch(stderr.String()) == nil {
		select {
		case code := <-done:
			t.Fatalf("%s: %s\nexited %d before serving:\n%s", l.where, l.text, code, stderr.String())
		case <-deadline:
			t.Fatalf("%s: %s\nnot serving after 15s:\n%s", l.where, l.text, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	addr := listenRE.FindStringSubmatch(stderr.String())[1]
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%s: /healthz: %v %v", l.where, resp, err)
	}
	resp.Body.Close()
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("%s: stopped with exit %d:\n%s", l.where, code, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("%s: did not stop", l.where)
	}
	t.Logf("%s: %s: served on %s and stopped", l.where, l.text, addr)
}

// mcp runs a documented mcp line as a host would: initialize, list the
// tools, close stdin.
func (w *docWorld) mcp(t *testing.T, l docLine, env map[string]string, args []string) {
	in, feed := io.Pipe()
	out, stderr := &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	go func() { done <- run(context.Background(), args, in, out, stderr, mapEnv(env)) }()
	_, _ = io.WriteString(feed, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"docs","version":"1"}}}`+"\n"+
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`+"\n")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "prepare_email") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	feed.Close()
	if code := <-done; code != 0 || !strings.Contains(out.String(), "prepare_email") {
		t.Fatalf("%s: %s\nexit %d\n%s\n%s", l.where, l.text, code, out.String(), stderr.String())
	}
	t.Logf("%s: %s: listed the tools", l.where, l.text)
}

func runCLIEnv(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	return runCLI(t, env, args...)
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "…")
	}
	return strings.Join(lines, "\n")
}

func newDocWorld(t *testing.T) *docWorld {
	smtp := smtptest.Start(t, smtptest.Options{Username: "user", Password: "pass",
		Fail: smtptest.Fail{StallAfterData: 10 * time.Second}})
	w := &docWorld{t: t, dir: t.TempDir(), smtp: smtp, slackAPI: fakeslack.New(t).URL(), teams: faketeams.New(t)}
	w.redis = "redis://" + miniredis.RunT(t).Addr()
	w.srv = startService(t, serviceOpts{RedisURL: redistest.Start(t).URL, Env: map[string]string{
		"COUNTERSIGN_DEV_OPERATOR_KEY": testOperatorKey, "COUNTERSIGN_SMTP_URL": smtp.URL()}})
	// The documented paths are relative to the repository; the policy
	// files a document writes are in its working directory.
	must(t, os.MkdirAll(filepath.Join(w.dir, "docs"), 0o755))
	must(t, os.MkdirAll(filepath.Join(w.dir, "shared"), 0o755))
	example, err := os.ReadFile("../../docs/countersign.example.yaml")
	must(t, err)
	must(t, os.WriteFile(filepath.Join(w.dir, "docs/countersign.example.yaml"), example, 0o600))
	w.fixtures(t)
	t.Chdir(w.dir)
	return w
}

// fixtures are what the receipt and audit documents assume the reader has:
// a receipt and the body it covers, countersign's key set (served and as a
// file), and audit logs of two replicas, all signed with one key.
func (w *docWorld) fixtures(t *testing.T) {
	k, err := receipt.GenerateKey()
	must(t, err)
	sig, err := receipt.NewSigner(k)
	must(t, err)
	jwks := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) { _, _ = rw.Write(sig.JWKS()) }))
	t.Cleanup(jwks.Close)
	w.jwksURL = jwks.URL + "/.well-known/jwks.json"
	must(t, os.WriteFile(filepath.Join(w.dir, "jwks.json"), sig.JWKS(), 0o600))
	body := []byte(`{"start":"2026-12-02T10:00:00Z"}`)
	must(t, os.WriteFile(filepath.Join(w.dir, "body.json"), body, 0o600))
	now := time.Now()
	w.receipt, err = sig.SignReceipt(&approval.ReceiptClaims{Issuer: "https://countersign.example", ID: approval.NewOperationKey(),
		IssuedAt: now.Unix(), Expires: now.Add(time.Hour).Unix(), Audience: "calendar", Action: "http.request",
		PayloadHash: "sha256:" + strings.Repeat("0", 64), Required: 1,
		HTTP:      &approval.ReceiptHTTP{Method: "PATCH", URL: "https://calendar.example/api/events/7", BodySHA256: receipt.BodySHA256(body)},
		Approvals: []approval.ReceiptApproval{{Subject: "grace", Via: "email", At: now.UTC()}}})
	must(t, err)
	// Two replicas' audit logs: the sealer's lease moved between them. A
	// private miniredis, whatever REDIS_URL says: the world's own service
	// runs its sealer (with its own key) on the REDIS_URL database, and
	// would seal these events too.
	mini := miniredis.RunT(t)
	st := store.New(redis.NewClient(&redis.Options{Addr: mini.Addr()}), nil)
	t.Cleanup(func() { _ = st.Close() })
	for _, name := range []string{"replica-a.jsonl", "replica-b.jsonl"} {
		op := &approval.Operation{Key: approval.NewOperationKey(), Action: "email.send", Principal: "support-agent",
			Input: []byte(`{}`), PayloadHash: "sha256:" + strings.Repeat("1", 64), CreatedAt: now, Status: approval.StatusDraft,
			ExpiresAt: now.Add(time.Hour), Route: approval.Route{Name: "r", Required: 1, ApprovalTTL: time.Hour}}
		ev := approval.Event{Time: now, Operation: op.Key, Event: "prepared", Actor: "principal:support-agent", PayloadHash: op.PayloadHash}
		must(t, st.Create(context.Background(), op, approval.CreateTransition{Step: approval.Step{Tx: "t", Now: now, Event: ev},
			TTL: time.Hour, Quotas: approval.DefaultQuotas}))
		var out bytes.Buffer
		sealer := &audit.Sealer{Source: st, Out: &out, Signer: sig, Log: slog.New(slog.DiscardHandler), Now: time.Now, Holder: name}
		for range 3 {
			_, err := sealer.SealOnce(context.Background())
			must(t, err)
		}
		must(t, os.WriteFile(filepath.Join(w.dir, name), out.Bytes(), 0o600))
		if name == "replica-a.jsonl" {
			must(t, os.WriteFile(filepath.Join(w.dir, "audit.jsonl"), out.Bytes(), 0o600))
			// Its signed head, saved as GET /v1/admin/audit/head answers it.
			jws, _, err := audit.SignHead(context.Background(), st, sig, "https://countersign.example", now)
			must(t, err)
			must(t, os.WriteFile(filepath.Join(w.dir, "head.json"), []byte(`{"head":"`+jws+`"}`), 0o600))
		}
	}
}

// writePolicy writes a document's policy file as countersign.yaml and
// policy.yaml, with the hashes the reader would paste from keygen.
func (w *docWorld) writePolicy(t *testing.T, policy string) {
	n := 0
	policy = regexp.MustCompile(`api_key_sha256: "…"`).ReplaceAllStringFunc(policy, func(string) string {
		n++
		return fmt.Sprintf("api_key_sha256: %q", apiKeyHash(fmt.Sprintf("cs_docs_key_%d", n)))
	})
	// docs/gateway.md's upstream: the filesystem server this repository
	// pins (upstream/testdata/servers), serving a folder of the test's.
	if strings.Contains(policy, gatewayDocServer) {
		cmd := mcpupstream.FilesystemServer(t, filepath.Join(w.dir, "shared"))
		policy = strings.ReplaceAll(policy, `["node", "`+gatewayDocServer+`", "/srv/shared"]`, yamlList(cmd))
	}
	for _, name := range []string{"countersign.yaml", "policy.yaml"} {
		must(t, os.WriteFile(filepath.Join(w.dir, name), []byte(policy), 0o600))
	}
}

// gatewayDocServer is where docs/gateway.md installs the filesystem server.
const gatewayDocServer = "/opt/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"

func TestDocumentedCommandsWork(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	must(t, err)
	files = append([]string{"../../README.md"}, files...)
	docs := map[string]docFile{}
	total := 0
	for _, f := range files {
		name := strings.TrimPrefix(f, "../../")
		docs[name] = readDoc(t, f, name)
		total += len(docs[name].lines)
	}
	readme := docs["README.md"]
	if total < 15 || readme.policy == "" {
		t.Fatalf("found %d documented command lines and README policy %q: is the extraction broken?", total, readme.policy)
	}
	w := newDocWorld(t)
	for _, name := range append([]string{"README.md"}, strings.Fields(strings.ReplaceAll(strings.Join(files[1:], " "), "../../", ""))...) {
		d := docs[name]
		policy := d.policy
		if policy == "" {
			policy = readme.policy
		}
		for _, l := range d.lines {
			t.Run(l.where, func(t *testing.T) {
				w.writePolicy(t, policy)
				w.run(t, l)
			})
		}
	}

	// The examples in every command's --help, in the README's setting.
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		// ops examples run where ops --help says: COUNTERSIGN_URL and
		// COUNTERSIGN_OPERATOR_KEY set, as the README's ops block exports them.
		example := "export COUNTERSIGN_URL=http://127.0.0.1:8080 COUNTERSIGN_OPERATOR_KEY=cso_…\n" + c.Example
		lines := commandLines(t, c.CommandPath()+" --help example", -1, strings.Split(example, "\n"))
		if want := strings.Count(c.Example, "countersign "); len(lines) != want {
			t.Errorf("%s --help: %d of its examples are countersign command lines, want every one (%d):\n%s", c.CommandPath(), len(lines), want, c.Example)
		}
		for _, l := range lines {
			t.Run(l.where, func(t *testing.T) {
				w.writePolicy(t, readme.policy)
				w.run(t, l)
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot(&cli{ctx: context.Background(), env: mapEnv(nil), stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard}))
}
