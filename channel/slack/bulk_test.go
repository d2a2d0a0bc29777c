package slack_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/action/httpreq"
	"github.com/countersign/countersign/approval"
	notifyslack "github.com/countersign/countersign/channel/slack"
	"github.com/countersign/countersign/internal/testing/fakeslack"
)

// bulkMessage prepares a bulk moving events 1..n with the real
// http.request action against a small ETag API, and builds its message.
func bulkMessage(t *testing.T, n int) approval.Message {
	t.Helper()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"1"`)
		_ = json.NewEncoder(w).Encode(map[string]any{"title": "Weekly " + r.URL.Path, "start": "2026-12-01T09:00:00Z", "end": "2026-12-01T09:30:00Z"})
	}))
	t.Cleanup(api.Close)
	act, err := httpreq.New([]httpreq.Target{{Name: "calendar", BaseURL: api.URL, AllowPrivate: true,
		Allow: []httpreq.Rule{{Method: "PATCH", Path: "/events/*"}}, StateFields: []string{"title"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(act.Close)
	var items []string
	for i := 1; i <= n; i++ {
		items = append(items, fmt.Sprintf(`{"method":"PATCH","path":"/events/%d","body":{"start":"2026-12-01T10:00:00Z","end":"2026-12-01T10:30:00Z"}}`, i))
	}
	p, err := act.Prepare(bg, approval.PrepareRequest{Input: json.RawMessage(`{"target":"calendar","items":[` + strings.Join(items, ",") + `]}`)})
	if err != nil {
		t.Fatal(err)
	}
	op := &approval.Operation{Key: "op_aaaaaaaaaaaaaaaaaaaaaaaaaa", Action: httpreq.Name, Principal: "support-agent",
		PayloadHash: "sha256:" + strings.Repeat("0", 64), Preview: p.Preview, Status: approval.StatusPending,
		ExpiresAt: expires, Route: approval.Route{Required: 1}}
	return approval.BuildMessage(op, &approval.Policy{}, expires.Add(-time.Hour))
}

// TestBulkInSlack: a bulk whose every item's diff fits one message shows
// the summary and each item's diff, and offers Approve; one that does not
// fit says so and offers Review instead.
func TestBulkInSlack(t *testing.T) {
	fake := fakeslack.New(t)
	n := notifyslack.New(notifyslack.Config{Client: fake.Client("xoxb-test")})
	post := func(m approval.Message) fakeslack.Message {
		t.Helper()
		if _, err := n.Notify(bg, approval.Notice{Job: approval.Job{ID: "slack:#approvals", Channel: "slack", Target: "#approvals"}, Message: m}); err != nil {
			t.Fatalf("Slack refused the message: %v", err)
		}
		msgs := fake.Messages(fake.ChannelID("#approvals"))
		return msgs[len(msgs)-1]
	}

	small := post(bulkMessage(t, 20))
	all := small.AllText()
	for _, want := range []string{
		"│ 20 events on calendar: 20 moved",
		"The 20 requests, in the order they are written",
		"│ Item 1: PATCH /events/1 (moved)",
		"│ Item 20: PATCH /events/20 (moved)\n│ end\n│   before: \"2026-12-01T09:30:00Z\"\n│   after:  \"2026-12-01T10:30:00Z\"",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("20-item message lacks %q:\n%.3000s", want, all)
		}
	}
	if small.Button("approve") == nil || small.Button("review") != nil {
		t.Fatal("a 20-item bulk shown whole does not offer Approve")
	}

	big := post(bulkMessage(t, 100))
	if big.Button("approve") != nil || big.Button("review") == nil || big.Button("reject") == nil {
		t.Fatal("a 100-item bulk that cannot be shown whole offers Approve (or no Review)")
	}
	if !strings.Contains(big.AllText(), "characters are not shown here") {
		t.Errorf("the message does not say it is cut:\n%.2000s", big.AllText())
	}
}
