package teamsapp_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/countersign/countersign/internal/testing/faketeams"
)

// FuzzActivity sends arbitrary activities to POST /teams/messages. With a
// token the Bot Framework did not sign (a rogue key, alg none), nothing
// may be decided and the answer is 401; with a valid token, whatever the
// body, the handler answers without a 5xx or a panic.
func FuzzActivity(f *testing.F) {
	e := newEnv(f, opts{required: 2})
	op := e.prepareSend(f, "Hello", "hello")
	card := cardOf(f, e.cards(f, op.Key, 2), grace.ID)
	approve := e.fake.InvokeActivity(e.fake.ClickOn(card, "approve", grace, ""))
	for mode := range byte(3) {
		f.Add(approve, mode)
		f.Add(e.fake.InvokeActivity(e.fake.ClickOn(card, "reject", grace, "no")), mode)
		f.Add(e.fake.InvokeActivity(e.fake.ClickOn(card, "approve", stranger, "")), mode)
		f.Add([]byte(`{"type":"invoke","name":"adaptiveCard/action","value":{"action":{"verb":"approve","data":{}}}}`), mode)
		f.Add([]byte(`{"type":"message","text":"approve op_x"}`), mode)
		f.Add([]byte(`{}`), mode)
	}
	serviceURL := e.fake.ServiceURL()
	f.Fuzz(func(t *testing.T, body []byte, mode byte) {
		decided := func() int {
			cur := e.get(t, op.Key)
			n := len(cur.Approvals)
			if cur.Rejection != nil {
				n += 100
			}
			return n
		}
		before := decided()
		var how faketeams.Sign
		switch mode % 3 {
		case 0:
			how = faketeams.Sign{Rogue: true}
		case 1:
			how = faketeams.Sign{Alg: "none"}
		}
		req, err := http.NewRequest(http.MethodPost, target, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+e.fake.Token(serviceURL, how))
		r := e.do(t, req)
		if mode%3 != 2 {
			if r.HTTPStatus != http.StatusUnauthorized {
				t.Fatalf("mode %d: %d %s, want 401", mode%3, r.HTTPStatus, r.Raw)
			}
			if after := decided(); after != before {
				t.Fatalf("a forged token decided (%d → %d)", before, after)
			}
		}
		if r.HTTPStatus >= 500 {
			t.Fatalf("%d %s", r.HTTPStatus, r.Raw)
		}
	})
}
