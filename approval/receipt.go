package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"
)

// Countersignature receipts (SPEC §9): a signed statement, carried with the
// effect, that humans approved exactly this operation. A target checks it
// without trusting countersign's executor. The domain decides what a
// receipt says and when one may exist; the signing (JOSE, keys) is a
// ReceiptSigner that cmd/ injects (package receipt).

// ReceiptTTL is how long a receipt is valid after it is minted.
const ReceiptTTL = 5 * time.Minute

// ReceiptClaims are the claims of a receipt, exactly as SPEC §9 names them.
// Package receipt verifies into this same type.
type ReceiptClaims struct {
	// Issuer is countersign's public URL.
	Issuer string `json:"iss"`
	// ID is the operation key, or "op_…:N" for item N of a bulk operation:
	// a target accepts each receipt once.
	ID string `json:"jti"`
	// IssuedAt and Expires are NumericDates (Unix seconds).
	IssuedAt int64 `json:"iat"`
	Expires  int64 `json:"exp"`
	// Audience is the target name, or "email", "slack", "teams".
	Audience string `json:"aud"`
	// Action is the operation's action, e.g. "http.request".
	Action string `json:"act"`
	// PayloadHash is the payload hash the approvers saw.
	PayloadHash string `json:"ph"`
	// HTTP is the exact write, for http.request.
	HTTP *ReceiptHTTP `json:"http,omitempty"`
	// Approvals are who approved, through which channel, when.
	Approvals []ReceiptApproval `json:"apr"`
	// Required is the quorum the route asked for.
	Required int `json:"req"`
	// Allowance is the id of the allowance that approved it (SPEC §10).
	Allowance string `json:"allowance,omitempty"`
}

// ReceiptHTTP is the write an http.request receipt covers.
type ReceiptHTTP struct {
	Method string `json:"method"`
	// URL is the absolute URL written to, query included.
	URL string `json:"url"`
	// BodySHA256 is the lowercase hex SHA-256 of the body bytes as sent
	// (of the empty string when there is no body).
	BodySHA256 string `json:"body_sha256"`
	// IfMatch is the If-Match header sent, if any.
	IfMatch string `json:"if_match,omitempty"`
}

// ReceiptApproval is one approval a receipt names.
type ReceiptApproval struct {
	Subject string    `json:"sub"` // approver id
	Via     string    `json:"via"` // channel
	At      time.Time `json:"at"`
}

// ReceiptSigner signs receipt claims into a compact JWS. It holds the keys;
// nothing of them reaches the domain, and its errors never carry them.
type ReceiptSigner interface {
	SignReceipt(c *ReceiptClaims) (string, error)
}

// ReceiptRequest asks for the receipt of one effect.
type ReceiptRequest struct {
	// Audience is who receives the effect: the target's name, or "email",
	// "slack", "teams".
	Audience string
	// HTTP is the exact write, for http.request.
	HTTP *ReceiptHTTP
	// Item, for one item of a bulk operation, is its number N as in its
	// Idempotency-Key: the receipt's id is then "op_…:N". Empty for the
	// operation itself.
	Item string
}

// Receipt is one minted receipt.
type Receipt struct {
	ID    string // jti
	Token string // compact JWS
}

// Countersigner mints the receipts of one executing operation. The worker
// makes it only after winning the claim approved→executing, and hands it to
// the action through the context of Execute: outside an execution there is
// none, so a receipt exists only for an operation that is executing, once.
// It is safe for concurrent use.
type Countersigner struct {
	signer ReceiptSigner
	base   ReceiptClaims
	now    func() time.Time

	mu     sync.Mutex
	minted []Receipt
}

type countersignerKey struct{}

// CountersignerFrom returns the countersigner of the execution ctx belongs
// to, or nil. A nil *Countersigner mints nothing (receipts not configured).
func CountersignerFrom(ctx context.Context) *Countersigner {
	c, _ := ctx.Value(countersignerKey{}).(*Countersigner)
	return c
}

// countersign binds a countersigner to op, which the caller has just
// claimed for execution, and returns a context carrying it. Without a
// signer it returns ctx and nil.
func (s *Service) countersign(ctx context.Context, op *Operation) (context.Context, *Countersigner) {
	if s.receipts == nil {
		return ctx, nil
	}
	c := NewCountersigner(s.receipts, s.publicURL, op, s.now)
	return WithCountersigner(ctx, c), c
}

// NewCountersigner makes the countersigner of one execution of op. The
// Service makes one for each execution once its claim is won; a test that
// runs an action's Execute by hand makes its own.
func NewCountersigner(signer ReceiptSigner, issuer string, op *Operation, now func() time.Time) *Countersigner {
	c := &Countersigner{signer: signer, now: now, base: ReceiptClaims{
		Issuer: issuer, ID: op.Key, Action: op.Action, PayloadHash: op.PayloadHash,
		Required: op.Route.Required, Approvals: []ReceiptApproval{}, Allowance: op.Allowance,
	}}
	for _, d := range op.Approvals {
		c.base.Approvals = append(c.base.Approvals, ReceiptApproval{Subject: d.Approver, Via: d.Via, At: d.At.UTC()})
	}
	return c
}

// WithCountersigner returns ctx carrying c, for an action's Execute.
func WithCountersigner(ctx context.Context, c *Countersigner) context.Context {
	return context.WithValue(ctx, countersignerKey{}, c)
}

var itemPattern = regexp.MustCompile(`^[0-9]{1,9}$`)

// Mint signs the receipt of one effect, right before the effect is sent.
// Each id is minted at most once per execution. A nil Countersigner
// returns "" and no error: the effect then goes without a receipt.
func (c *Countersigner) Mint(r ReceiptRequest) (string, error) {
	if c == nil {
		return "", nil
	}
	if r.Audience == "" {
		return "", errors.New("receipt: no audience")
	}
	id := c.base.ID
	if r.Item != "" {
		if !itemPattern.MatchString(r.Item) {
			return "", fmt.Errorf("receipt: item %q is not a number", r.Item)
		}
		id += ":" + r.Item
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.minted {
		if m.ID == id {
			return "", fmt.Errorf("receipt: %s was already minted in this execution", id)
		}
	}
	claims := c.base
	now := c.now()
	claims.ID, claims.Audience, claims.HTTP = id, r.Audience, r.HTTP
	claims.IssuedAt, claims.Expires = now.Unix(), now.Add(ReceiptTTL).Unix()
	tok, err := c.signer.SignReceipt(&claims)
	if err != nil {
		return "", fmt.Errorf("receipt: sign %s: %w", id, err)
	}
	c.minted = append(c.minted, Receipt{ID: id, Token: tok})
	return tok, nil
}

// Minted lists the receipts minted so far, in order.
func (c *Countersigner) Minted() []Receipt {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Receipt(nil), c.minted...)
}

// attach records the execution's receipts: the operation's own receipt as
// result.receipt (when the result is a JSON object), and the receipts' ids
// in the outcome event. It returns the result to store.
func (c *Countersigner) attach(result json.RawMessage, done Event) json.RawMessage {
	minted := c.Minted()
	if len(minted) == 0 {
		return result
	}
	var own *Receipt
	for i := range minted {
		if minted[i].ID == c.base.ID {
			own = &minted[i]
		}
	}
	if done.Details != nil {
		if own != nil {
			done.Details["receipt"] = own.ID
		}
		if len(minted) > 1 || own == nil {
			ids := make([]string, len(minted))
			for i, m := range minted {
				ids[i] = m.ID
			}
			done.Details["receipts"] = ids
		}
	}
	if own == nil || !bytes.HasPrefix(bytes.TrimSpace(result), []byte("{")) {
		return result
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(result, &obj) != nil {
		return result
	}
	tok, _ := json.Marshal(own.Token)
	obj["receipt"] = tok
	// Keep the result's text as the action wrote it ("<op_…@example.com>"
	// stays readable).
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(obj) != nil {
		return result
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
