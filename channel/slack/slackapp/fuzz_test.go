package slackapp_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/countersign/countersign/channel/slack/slackapp"
	"github.com/countersign/countersign/internal/testing/fakeslack"
)

// FuzzInteraction: no request body makes the interaction handler panic;
// one that is unsigned, signed with another secret, or altered after it
// was signed is refused (401) and decides nothing; one properly signed but
// malformed gets an answer, never a crash. The fuzzer starts from real
// clicks on a real pending operation (approve, reject), and from their
// payloads' pieces.
func FuzzInteraction(f *testing.F) {
	e := newEnv(f, opts{required: 2})
	op := e.prepareSend(f, "hello")
	msg := e.approvalMessages(f, op.Key, 1)[0]
	approve := clickRequest(grace, slackapp.ActionApprove, msg, nil)
	for mode := range byte(3) {
		f.Add(approve, mode)
		f.Add(clickRequest(grace, slackapp.ActionReject, msg, nil), mode)
		f.Add(clickRequest(stranger, slackapp.ActionApprove, msg, nil), mode)
		f.Add(fakeslack.FormBody([]byte(`{"type":"block_actions","actions":[{"action_id":"approve","block_id":"x","value":"{}"}]}`)), mode)
		f.Add(fakeslack.FormBody([]byte(`{"type":"view_submission","view":{"private_metadata":"{\"operation\":\"op_x\"}"}}`)), mode)
		f.Add([]byte("payload=%7B%7D"), mode)
	}
	f.Fuzz(func(t *testing.T, body []byte, mode byte) {
		decided := func() int {
			// Read as the service, not the agent: the agent's reads count
			// against its rate limit, and the fuzzer reads thousands of times.
			cur, err := e.svc.Get(bg, nil, op.Key)
			if err != nil {
				t.Fatal(err)
			}
			n := len(cur.Approvals)
			if cur.Rejection != nil {
				n += 100
			}
			return n
		}
		before := decided()
		var req *http.Request
		switch mode % 3 {
		case 0: // signed with another secret
			req = fakeslack.SignedRequest("http://countersign.test/slack/interactions", "not-the-secret", time.Now(), body)
		case 1: // a valid signature of a real click, over this body
			req = fakeslack.SignedRequest("http://countersign.test/slack/interactions", secret, time.Now(), body)
			fakeslack.SignHeaders(req.Header, secret, time.Now(), approve)
			if string(body) == string(approve) {
				return
			}
		default: // properly signed: must not crash
			req = fakeslack.SignedRequest("http://countersign.test/slack/interactions", secret, time.Now(), body)
		}
		st, resp := e.do(t, req)
		if mode%3 != 2 {
			if st != http.StatusUnauthorized {
				t.Fatalf("mode %d: %d %s, want 401", mode%3, st, resp)
			}
			if after := decided(); after != before {
				t.Fatalf("an unsigned or tampered request decided (%d → %d)", before, after)
			}
		}
		if st >= 500 {
			t.Fatalf("%d %s", st, resp)
		}
	})
}
