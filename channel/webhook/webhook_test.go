package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
)

type received struct {
	header http.Header
	body   []byte
}

func sink(t *testing.T, status int) (*httptest.Server, func() []received) {
	var mu sync.Mutex
	var got []received
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, received{r.Header.Clone(), b})
		mu.Unlock()
		if status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "7")
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []received { mu.Lock(); defer mu.Unlock(); return append([]received(nil), got...) }
}

func notice(target string) approval.Notice {
	return approval.Notice{
		Job:      approval.Job{ID: "webhook:" + target + ":grace", Channel: "webhook", Target: target, Approver: "grace", Link: true},
		Approver: &approval.Approver{ID: "grace", Name: "Grace"},
		Link:     "https://approvals.example/a/k1.claims.sig",
		Message: approval.Message{OperationKey: "op_aaaaaaaaaaaaaaaaaaaaaaaaaa", Action: "email.send", Title: "Send",
			PayloadHash: "sha256:00", Status: approval.StatusPending, Required: 1},
	}
}

func TestNotifySignsAndCarriesLinksOnlyWhenConfigured(t *testing.T) {
	for _, links := range []bool{false, true} {
		srv, got := sink(t, 204)
		w := New([]Hook{{Name: "ops", URL: srv.URL, Secret: []byte("s3cret"), Links: links}})
		w.Now = func() time.Time { return time.Unix(1700000000, 0) }
		h, err := w.Notify(context.Background(), notice("ops"))
		if err != nil {
			t.Fatal(err)
		}
		if h["webhook"] != "ops" {
			t.Fatalf("handle %v", h)
		}
		r := got()[0]
		if want := Sign([]byte("s3cret"), "1700000000", r.body); r.header.Get("X-Countersign-Signature") != want {
			t.Fatalf("signature %q, want %q", r.header.Get("X-Countersign-Signature"), want)
		}
		var p Payload
		if err := json.Unmarshal(r.body, &p); err != nil {
			t.Fatal(err)
		}
		if got, want := p.ApprovalURL != "", links; got != want {
			t.Fatalf("links=%v: approval_url present = %v", links, got)
		}
		if p.Type != "approval_requested" || p.OperationKey == "" || p.Approver != "grace" {
			t.Fatalf("payload %+v", p)
		}
		if w.PerApprover("ops") != links {
			t.Fatal("PerApprover")
		}
	}
}

func TestThrottledAndFailingHooks(t *testing.T) {
	srv, _ := sink(t, http.StatusTooManyRequests)
	w := New([]Hook{{Name: "ops", URL: srv.URL}})
	_, err := w.Notify(context.Background(), notice("ops"))
	var ra *approval.RetryAfterError
	if !errors.As(err, &ra) || ra.After != 7*time.Second {
		t.Fatalf("429: %v", err)
	}
	bad, _ := sink(t, 500)
	w = New([]Hook{{Name: "ops", URL: bad.URL + "/?token=secret-in-url"}})
	if _, err := w.Notify(context.Background(), notice("ops")); err == nil {
		t.Fatal("500 accepted")
	}
	w = New([]Hook{{Name: "ops", URL: "http://127.0.0.1:1/?token=secret-in-url"}})
	_, err = w.Notify(context.Background(), notice("ops"))
	if err == nil || contains(err.Error(), "secret-in-url") || contains(err.Error(), "k1.claims.sig") {
		t.Fatalf("unreachable hook error %v", err)
	}
}

func TestUpdatePostsOutcome(t *testing.T) {
	srv, got := sink(t, 200)
	w := New([]Hook{{Name: "ops", URL: srv.URL}})
	m := notice("ops").Message
	m.Status, m.Outcome = approval.StatusSucceeded, "Done"
	if err := w.Update(context.Background(), approval.Delivery{Job: "webhook:ops", Handle: map[string]string{"webhook": "ops"}}, m); err != nil {
		t.Fatal(err)
	}
	var p Payload
	_ = json.Unmarshal(got()[0].body, &p)
	if p.Type != "operation_updated" || p.Status != approval.StatusSucceeded || p.ApprovalURL != "" {
		t.Fatalf("update payload %+v", p)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// The payload's human-readable texts are the safe rendering: a field
// value turned around by U+202E arrives escaped, the hidden character is
// named, and the machine fields are as stored.
func TestPayloadTextsAreSafelyRendered(t *testing.T) {
	op := &approval.Operation{Key: "op_aaaaaaaaaaaaaaaaaaaaaaaaaa", Action: "email.send", Principal: "agent",
		PayloadHash: "sha256:00", Status: approval.StatusPending, ExpiresAt: time.Now().Add(time.Hour),
		Preview: approval.Preview{Title: "Send", Fields: []approval.Field{{Name: "subject", Label: "Subject", Value: "Q3 \u202eexe.fdp"},
			{Name: "html", Label: "HTML part", Value: `<a href="https://evil.example">bank</a>`, Long: true, Format: approval.FormatHTML}},
			Diff: []approval.Change{{Field: "title", Before: json.RawMessage("\"a\u200bb\"")}}}}
	n := notice("ops")
	n.Message = approval.BuildMessage(op, &approval.Policy{}, time.Now())
	srv, got := sink(t, 204)
	if _, err := New([]Hook{{Name: "ops", URL: srv.URL}}).Notify(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	var p Payload
	if err := json.Unmarshal(got()[0].body, &p); err != nil {
		t.Fatal(err)
	}
	if p.Fields[0].Value != "Q3 ⟨U+202E⟩exe.fdp" || p.OperationKey != op.Key || p.PayloadHash != "sha256:00" {
		t.Errorf("payload %+v", p)
	}
	if len(p.HiddenCharacters) != 2 || p.HiddenCharacters[0] != "U+202E RIGHT-TO-LEFT OVERRIDE" {
		t.Errorf("hidden_characters %q", p.HiddenCharacters)
	}
	if h := p.Fields[1].HTML; h == nil || len(h.Links) != 1 || h.Links[0].Href != "https://evil.example" {
		t.Errorf("html part %+v", p.Fields[1].HTML)
	}
	if len(p.Diff) != 1 || p.Diff[0].Before == nil || *p.Diff[0].Before != `"a⟨U+200B⟩b"` || p.Diff[0].After != nil {
		t.Errorf("diff %+v", p.Diff)
	}
}

// The webhook carries each warning's stable code beside its sentence, as
// the agent's preview does (issue 19).
func TestPayloadCarriesWarningCodes(t *testing.T) {
	srv, got := sink(t, 204)
	w := New([]Hook{{Name: "ops", URL: srv.URL, Secret: []byte("s3cret")}})
	n := notice("ops")
	n.Message.Warnings = []string{"irreversible", "Attachment x.html is a web document that acts when opened."}
	n.Message.WarningCodes = []string{approval.WarnIrreversible, approval.WarnActiveAttachment}
	if _, err := w.Notify(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	var p Payload
	if err := json.Unmarshal(got()[0].body, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.WarningCodes) != 2 || p.WarningCodes[1] != "active_attachment" || len(p.Warnings) != 2 {
		t.Errorf("warnings %q codes %q", p.Warnings, p.WarningCodes)
	}
}
