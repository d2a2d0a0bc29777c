package main

import (
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/testing/smtptest"
)

// TestEditOnThePageEndToEnd: an approver fixes the agent's subject on the
// page; the agent's long-poll on the original says superseded and names
// the new version; the approvers get the new version, and what is sent is
// the edited email, once.
func TestEditOnThePageEndToEnd(t *testing.T) {
	smtp := smtptest.Start(t, smtptest.Options{})
	cfg := strings.Replace(loopConfig(1, "console"), "    forbid_self_approval: true\n", "    forbid_self_approval: true\n    allow_edit: true\n", 1)
	srv := startService(t, serviceOpts{Config: cfg, Env: map[string]string{"COUNTERSIGN_SMTP_URL": smtp.URL()}})
	o := srv.prepareSend(t, emailBody)
	link := srv.consoleLink(t, o.Key, "grace")

	b := newBrowser()
	st, page, _ := b.do(t, "GET", link, nil)
	if st != 200 || !strings.Contains(page, `id="edit"`) || !strings.Contains(page, `name="f_subject"`) {
		t.Fatalf("no edit form on the page: %d", st)
	}
	csrf := csrfRE.FindStringSubmatch(page)[1]
	st, page, _ = b.do(t, "POST", link+"/edit", url.Values{"_csrf": {csrf}, "f_subject": {"Your invoice for November"},
		"f_text": {"Hello,\nthe invoice is attached.\n"}})
	if st != 200 || !strings.Contains(page, "You edited it") {
		t.Fatalf("edit: %d\n%s", st, page)
	}
	old := srv.waitFor(t, o.Key, "superseded")
	var ov struct {
		SupersededBy string `json:"superseded_by"`
		NextStep     string `json:"next_step"`
	}
	_, raw := srv.call(t, "GET", "/v1/operations/"+o.Key, srv.APIKey, "")
	ov = decode[struct {
		SupersededBy string `json:"superseded_by"`
		NextStep     string `json:"next_step"`
	}](t, raw)
	if ov.SupersededBy == "" || !strings.Contains(ov.NextStep, ov.SupersededBy) || !strings.Contains(ov.NextStep, "subject") {
		t.Fatalf("the agent is not told: %+v (status %s)", ov, old.Status)
	}
	// A CSRF-less edit is refused, and the old link decides nothing now.
	if st, _, _ := newBrowser().do(t, "POST", link+"/edit", url.Values{"f_subject": {"x"}}); st == 200 {
		t.Fatal("an edit without the page's token was taken")
	}
	next := srv.consoleLink(t, ov.SupersededBy, "grace")
	if st, page := newBrowser().decide(t, next, "approve", ""); st != 200 || !strings.Contains(page, "Your invoice for November") {
		t.Fatalf("approve the new version: %d", st)
	}
	srv.waitFor(t, ov.SupersededBy, "succeeded")
	msgs := sentTo(smtp, "client@client.example")
	if len(msgs) != 1 {
		t.Fatalf("%d emails", len(msgs))
	}
	p, err := msgs[0].Parse()
	must(t, err)
	if p.Subject != "Your invoice for November" {
		t.Fatalf("sent subject %q", p.Subject)
	}
}

// TestEditHTTPRequestBodyEndToEnd: an approver corrects a value in the body
// of a calendar PATCH on the page (the target, method and path are not
// theirs to change); the new version reads the resource afresh, carries
// the edit in its diff, and what the target receives is the edited body,
// once. In a bulk, one item's field is edited by its item number; a value
// that was not a string must be valid JSON, or nothing is made.
func TestEditHTTPRequestBodyEndToEnd(t *testing.T) {
	bt := newBulkTarget(t, 3)
	yaml, err := os.ReadFile(httpreqConfig(t, bt.srv.URL))
	must(t, err)
	cfg := strings.Replace(string(yaml), "    forbid_self_approval: true\n", "    forbid_self_approval: true\n    allow_edit: true\n", 1)
	srv := startService(t, serviceOpts{Config: cfg, Env: map[string]string{"CAL_TOKEN": httpreqCred}})
	srv.APIKey = httpreqAPIKey
	bt.guard(t, srv.PublicURL)

	o := srv.prepareSend(t, `{"action":"http.request","input":{"target":"calendar","method":"PATCH","path":"/events/1",`+
		`"body":{"title":"Weekly sync (movd)","start":"2026-06-01T10:00:00Z"}}}`)
	link := srv.consoleLink(t, o.Key, "grace")
	b := newBrowser()
	st, page, _ := b.do(t, "GET", link, nil)
	if st != 200 || !strings.Contains(page, `name="f_body.title"`) || strings.Contains(page, `name="f_path"`) {
		t.Fatalf("edit form: %d, body.title offered: %v", st, strings.Contains(page, `name="f_body.title"`))
	}
	csrf := csrfRE.FindStringSubmatch(page)[1]
	st, page, _ = b.do(t, "POST", link+"/edit", url.Values{"_csrf": {csrf}, "f_body.title": {"Weekly sync (moved)"},
		"f_body.start": {"2026-06-01T10:00:00Z"}})
	if st != 200 || !strings.Contains(page, "You edited it") {
		t.Fatalf("edit: %d\n%.1500s", st, page)
	}
	srv.waitFor(t, o.Key, "superseded")
	_, raw := srv.call(t, "GET", "/v1/operations/"+o.Key, srv.APIKey, "")
	next := decode[struct {
		SupersededBy string `json:"superseded_by"`
	}](t, raw).SupersededBy
	_, raw = srv.call(t, "GET", "/v1/operations/"+next, srv.APIKey, "")
	nv := decode[struct {
		Input   map[string]any `json:"input"`
		Preview struct {
			Diff []struct {
				Field  string `json:"field"`
				Before any    `json:"before"`
				After  any    `json:"after"`
			} `json:"diff"`
		} `json:"preview"`
	}](t, raw)
	if nv.Input["path"] != "/events/1" || nv.Input["body"].(map[string]any)["title"] != "Weekly sync (moved)" {
		t.Fatalf("new version's input: %v", nv.Input)
	}
	edited := false
	for _, d := range nv.Preview.Diff {
		edited = edited || d.Field == "body.title" && d.Before == "Weekly sync (movd)" && d.After == "Weekly sync (moved)"
	}
	if !edited {
		t.Fatalf("the new version's diff does not show the edit: %+v", nv.Preview.Diff)
	}
	if st, _ := newBrowser().decide(t, srv.consoleLink(t, next, "grace"), "approve", ""); st != 200 {
		t.Fatalf("approve: %d", st)
	}
	srv.waitFor(t, next, "succeeded")
	bt.mu.Lock()
	title, writes := bt.docs["/api/events/1"]["title"], bt.byKey[next]
	bt.mu.Unlock()
	if title != "Weekly sync (moved)" || writes != 1 {
		t.Fatalf("target: title %q after %d writes of the new version", title, writes)
	}

	// A bulk: item 2's start is edited; a non-JSON value for a JSON field
	// makes nothing.
	bo := srv.prepareSend(t, bulkBody(3, 11))
	blink := srv.consoleLink(t, bo.Key, "grace")
	b = newBrowser()
	_, page, _ = b.do(t, "GET", blink, nil)
	if !strings.Contains(page, `name="f_items.2.body.start"`) {
		t.Fatalf("the bulk's item fields are not offered:\n%.3000s", page)
	}
	csrf = csrfRE.FindStringSubmatch(page)[1]
	st, page, _ = b.do(t, "POST", blink+"/edit", url.Values{"_csrf": {csrf}, "f_items.2.body.start": {"2026-06-01T12:00:00Z"}})
	if st != 200 || !strings.Contains(page, "You edited it") {
		t.Fatalf("bulk edit: %d\n%.1500s", st, page)
	}
	srv.waitFor(t, bo.Key, "superseded")
	_, raw = srv.call(t, "GET", "/v1/operations/"+bo.Key, srv.APIKey, "")
	bnext := decode[struct {
		SupersededBy string `json:"superseded_by"`
	}](t, raw).SupersededBy
	_, raw = srv.call(t, "GET", "/v1/operations/"+bnext, srv.APIKey, "")
	if !strings.Contains(string(raw), `"start":"2026-06-01T12:00:00Z"`) || !strings.Contains(string(raw), `"start":"2026-06-01T11:00:00Z"`) {
		t.Fatalf("the new bulk does not hold the edited item beside the others: %.2000s", raw)
	}
}
