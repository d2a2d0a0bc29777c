package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/countersign/countersign/mcpserver"
)

// TestREADMEQuickstartRunsAsWritten runs the README's first walk-through
// against a development-mode service started as the README starts it:
// its curl lines, in order, with the answers its comments promise; the
// console notice the README shows, line for line but for what differs per
// operation (key, fingerprint, expiry, link); and the audit trail its last
// comment lists (issue 24, point 9: the README's console notice once
// differed from what the service prints).
func TestREADMEQuickstartRunsAsWritten(t *testing.T) {
	blocks := readBlocks(t, "../../README.md", "README.md")
	find := func(contains string) docBlock {
		t.Helper()
		for _, b := range blocks {
			if strings.Contains(strings.Join(b.lines, "\n"), contains) {
				return b
			}
		}
		t.Fatalf("README.md has no block with %q: the test no longer follows the walk-through", contains)
		return docBlock{}
	}
	serve := find("COUNTERSIGN_DEV_API_KEY=devkey go run ./cmd/countersign serve")
	m := regexp.MustCompile(`COUNTERSIGN_DEV_API_KEY=(\S+) go run ./cmd/countersign serve`).FindStringSubmatch(strings.Join(serve.lines, "\n"))
	if m == nil {
		t.Fatalf("%s: the serve line no longer sets COUNTERSIGN_DEV_API_KEY", serve.where())
	}
	srv := startService(t, serviceOpts{Env: map[string]string{"COUNTERSIGN_DEV_API_KEY": m[1]}})
	srv.APIKey = m[1]

	env := map[string]string{}
	var last map[string]any
	approved := false
	run := func(b docBlock) {
		t.Helper()
		for _, step := range quickstartSteps(b.lines) {
			switch {
			case strings.HasPrefix(step.text, "curl "):
				if strings.Contains(step.text, "?wait=") && !approved {
					// Meanwhile the human approves by the console's link.
					if st, _ := newBrowser().decide(t, srv.consoleLink(t, env["OP"], "you"), "approve", ""); st != 200 {
						t.Fatalf("approve: %d", st)
					}
					approved = true
				}
				r, err := parseCurl(step.text, env)
				must(t, err)
				req, err := http.NewRequest(r.method, strings.Replace(r.url, "http://127.0.0.1:8080", srv.URL(), 1), strings.NewReader(r.body))
				must(t, err)
				for k, v := range r.headers {
					req.Header.Set(k, v)
				}
				resp, err := http.DefaultClient.Do(req)
				must(t, err)
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				last = nil
				_ = json.Unmarshal(raw, &last)
				if resp.StatusCode/100 != 2 {
					t.Fatalf("%s: %s\n→ %d %s", b.where(), step.text, resp.StatusCode, raw)
				}
				checkPromise(t, b, step, resp.StatusCode, last, raw)
			default: // assignments: K=…; API=…, and OP=op_… "the operation_key from above"
				for _, a := range strings.Split(step.text, ";") {
					k, v, ok := strings.Cut(strings.TrimSpace(a), "=")
					if !ok {
						t.Fatalf("%s: %q is neither a curl line nor an assignment", b.where(), step.text)
					}
					if v == "op_…" {
						v, _ = last["operation_key"].(string)
					}
					env[k] = v
				}
			}
		}
	}
	run(find("K=devkey; API="))
	srv.waitFor(t, env["OP"], "succeeded")

	// The console notice, as the README shows it.
	notice := find("APPROVAL NEEDED")
	printed := regexp.MustCompile(`(?s)─{20,}\n  APPROVAL NEEDED.*?\n─{20,}\n.*?\n─{20,}`).FindString(srv.Stderr.String())
	if printed == "" {
		t.Fatalf("the service printed no approval notice:\n%s", srv.Stderr.String())
	}
	if got, want := normalizeNotice(printed), normalizeNotice(strings.TrimSpace(strings.Join(notice.lines, "\n"))); got != want {
		t.Errorf("%s: the README's console notice differs from what the service prints.\nprinted:\n%s\nREADME:\n%s", notice.where(), got, want)
	}

	// The audit trail, as its comment lists it.
	run(find("$API/operations/$OP/events"))
}

type quickstartStep struct{ text, promise string }

// quickstartSteps are a block's commands, each with the "# → …" comment
// after it (what the README says it answers).
func quickstartSteps(lines []string) []quickstartStep {
	var out []quickstartStep
	var buf []string
	flush := func() {
		if len(buf) > 0 {
			for _, l := range shellLines(buf) {
				out = append(out, quickstartStep{text: l})
			}
			buf = nil
		}
	}
	for _, l := range lines {
		s := strings.TrimSpace(l)
		if strings.HasPrefix(s, "# ") && len(buf) == 0 && len(out) > 0 && out[len(out)-1].promise == "" &&
			strings.HasPrefix(out[len(out)-1].text, "curl ") {
			out[len(out)-1].promise = strings.TrimPrefix(s, "# ")
			continue
		}
		buf = append(buf, l)
		if !strings.HasSuffix(s, "\\") && strings.Count(strings.Join(buf, "\n"), "'")%2 == 0 {
			flush()
		}
	}
	flush()
	return out
}

var (
	promiseStatusRE = regexp.MustCompile(`^→ (\d{3}) `)
	promiseFieldRE  = regexp.MustCompile(`"(status)":"([a-z_]+)"`)
)

// checkPromise holds a response to the README's comment after its line:
// "→ 201 {…"status":"draft"…}" (the code and the status), or, for the
// events, the list of events "prepared → sent → …".
func checkPromise(t *testing.T, b docBlock, step quickstartStep, code int, body map[string]any, raw []byte) {
	t.Helper()
	p := step.promise
	switch {
	case p == "":
	case strings.HasPrefix(p, "→ "):
		if m := promiseStatusRE.FindStringSubmatch(p); m == nil || m[1] != strconv.Itoa(code) {
			t.Errorf("%s: %s\nanswered %d, the README says %q", b.where(), step.text, code, p)
		}
		for _, m := range promiseFieldRE.FindAllStringSubmatch(p, -1) {
			if body[m[1]] != m[2] {
				t.Errorf("%s: %s\nanswered %s %v, the README says %q", b.where(), step.text, m[1], body[m[1]], p)
			}
		}
	case strings.Contains(p, " → "):
		var events struct {
			Events []struct {
				Event string `json:"event"`
			} `json:"events"`
		}
		must(t, json.Unmarshal(raw, &events))
		var got []string
		for _, e := range events.Events {
			got = append(got, e.Event)
		}
		var want []string
		for _, w := range strings.Split(p, " → ") {
			want = append(want, strings.Fields(w)[0])
		}
		if strings.Join(got, " → ") != strings.Join(want, " → ") {
			t.Errorf("%s: the audit trail is %s; the README says %s", b.where(), strings.Join(got, " → "), p)
		}
	default:
		t.Errorf("%s: a comment after a curl line that is no promise this test reads: %q", b.where(), p)
	}
}

// normalizeNotice blanks what differs between two operations' notices.
func normalizeNotice(s string) string {
	for _, r := range []struct{ re, to string }{
		{`op_[a-z0-9]{26}`, "op_…"},
		{`sha256:[0-9a-f]{12}`, "sha256:…"},
		{`(?m)^(  expires: +).*$`, "${1}…"},
		{`http://\S+/a/\S+`, "http://…/a/…"},
	} {
		s = regexp.MustCompile(r.re).ReplaceAllString(s, r.to)
	}
	return s
}

// TestREADMEListsEveryTool: the README's list of MCP tools is the list a
// service with every action configured serves (mcpserver.ToolNames), and
// the number it spells out is their number (issue 24, point 9: the counts
// once differed).
func TestREADMEListsEveryTool(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	must(t, err)
	m := regexp.MustCompile(`(?s)Tools \((\w+) where every action is configured;.*?\): (.*?) — none of them approves`).FindSubmatch(raw)
	if m == nil {
		t.Fatal("README.md no longer lists the tools as \"Tools (N where every action is configured; …): `a`, `b` — none of them approves\"")
	}
	var listed []string
	for _, n := range regexp.MustCompile("`([a-z_]+)`").FindAllSubmatch(m[2], -1) {
		listed = append(listed, string(n[1]))
	}
	want := slices.Clone(mcpserver.ToolNames)
	slices.Sort(listed)
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Errorf("README.md lists the tools %v; the service serves %v", listed, want)
	}
	words := []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
		"thirteen", "fourteen", "fifteen"}
	if n := len(want); n >= len(words) || string(m[1]) != words[n] {
		t.Errorf("README.md says %q tools; the service serves %d", m[1], n)
	}
}
