package mcpserver

// URL elicitation (SPEC §13), stateless: where the client can open a URL
// (protocol 2026-07-28, per-request capability elicitation.url), the
// principal acts on behalf of a human who is among the operation's
// approvers, and sign-in is configured, send_operation answers with an
// input_required result asking that human to open the operation's inbox
// page. The page decides only after sign-in as that approver: the URL is
// no capability, and the client's accept approves nothing. The retry
// carries requestState, which the client can forge: it is MACed and binds
// the principal, the tool and operation, and an expiry, and it is
// redeemed once (server-side, in the store).

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/approval/jsonx"
)

// Elicitation configures URL elicitation on /mcp.
type Elicitation struct {
	// InboxURL is the signed-in inbox page of one operation
	// (PUBLIC_URL/inbox/{key}).
	InboxURL func(key string) string
	// MAC keys requestState (the link keyring's MAC, so every replica
	// computes the same).
	MAC func(parts ...string) string
	// Once reports whether name is seen for the first time within ttl
	// (the store's), so a requestState is redeemed once across replicas.
	Once func(ctx context.Context, name string, ttl time.Duration) (bool, error)
	// TTL is how long the client has to retry (default 30 min).
	TTL time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

type elicitor struct{ Elicitation }

func newElicitor(e *Elicitation) *elicitor {
	if e == nil || e.InboxURL == nil || e.MAC == nil || e.Once == nil {
		return nil
	}
	el := &elicitor{*e}
	if el.TTL <= 0 {
		el.TTL = 30 * time.Minute
	}
	if el.Now == nil {
		el.Now = time.Now
	}
	return el
}

// requestState is what the client echoes back, under a MAC.
type requestState struct {
	Principal string `json:"p"`
	Method    string `json:"m"`
	Tool      string `json:"t"`
	Key       string `json:"k"`
	Expires   int64  `json:"e"`
	Nonce     string `json:"n"`
}

const elicitPurpose = "mcp-request-state"

// elicitKey names the one input request.
const elicitKey = "open_inbox"

// ask is the input_required result asking p's human to open the inbox
// page of v.
func (e *elicitor) ask(p *approval.Principal, tool string, v approval.View) (json.RawMessage, error) {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	st := requestState{Principal: p.ID, Method: "tools/call", Tool: tool, Key: v.OperationKey,
		Expires: e.Now().Add(e.TTL).Unix(), Nonce: base64.RawURLEncoding.EncodeToString(nonce)}
	body, err := jsonx.Marshal(st)
	if err != nil {
		return nil, err
	}
	payload := base64.RawURLEncoding.EncodeToString(body)
	state := payload + "." + e.MAC(payload)
	msg := "countersign: operation " + v.OperationKey + " that your agent sent waits for your decision. " +
		"Open it in your countersign inbox, sign in, and approve or reject it there. Accepting here only opens the page; it approves nothing."
	return jsonx.Marshal(map[string]any{
		"resultType": "input_required",
		"inputRequests": map[string]any{elicitKey: map[string]any{"method": "elicitation/create",
			"params": map[string]any{"mode": "url", "elicitationId": st.Nonce, "url": e.InboxURL(v.OperationKey), "message": msg}}},
		"requestState": state,
	})
}

// redeem checks a requestState sent back with the retry of tool on key by
// p, and uses it up.
func (e *elicitor) redeem(ctx context.Context, p *approval.Principal, tool, key, state string) *rpcErr {
	bad := func(why string) *rpcErr {
		return &rpcErr{Code: rpcInvalidParams, Message: "invalid requestState: " + why + "; call send_operation again without it"}
	}
	payload, mac, ok := strings.Cut(state, ".")
	if !ok || !hmac.Equal([]byte(mac), []byte(e.MAC(payload))) {
		return bad("it was not issued here")
	}
	body, err := base64.RawURLEncoding.DecodeString(payload)
	var st requestState
	if err != nil || json.Unmarshal(body, &st) != nil {
		return bad("it was not issued here")
	}
	switch {
	case st.Principal != p.ID:
		return bad("it was issued to another principal")
	case st.Method != "tools/call" || st.Tool != tool || st.Key != key:
		return bad("it was issued for another call")
	case e.Now().Unix() > st.Expires:
		return bad("it has expired")
	}
	first, err := e.Once(ctx, elicitPurpose+":"+st.Nonce, e.TTL)
	if err != nil {
		return &rpcErr{Code: rpcInternal, Message: "countersign's store is unavailable; try again shortly"}
	}
	if !first {
		return bad("it was already used")
	}
	return nil
}
