// Package webhook is the webhook channel: it POSTs a signed JSON
// notification to a configured URL, for teams that route approvals into
// another tool. It carries approval links only when the webhook is
// configured to (links: true), one notification per approver then.
//
// Signature: X-Countersign-Signature: sha256=<hex HMAC-SHA256 of
// "<X-Countersign-Timestamp>.<body>" with the webhook's secret>.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/countersign/countersign/approval"
)

var (
	_ approval.Notifier = (*Webhooks)(nil)
	_ approval.Updater  = (*Webhooks)(nil)
)

// Hook is one configured webhook.
type Hook struct {
	Name   string
	URL    string
	Secret []byte
	Links  bool
}

// Webhooks delivers to the configured hooks by name (the job's target).
type Webhooks struct {
	Hooks  map[string]Hook
	Client *http.Client
	Now    func() time.Time
}

// idlePerHost is how many connections to one receiver are kept open
// between notifications. net/http keeps 2 by default, so with more
// deliveries in flight at once most posts dialled a new connection.
const idlePerHost = 32

// New builds the channel.
func New(hooks []Hook) *Webhooks {
	var tr http.RoundTripper // nil: http.DefaultTransport, when it was replaced (tests record requests)
	if dt, ok := http.DefaultTransport.(*http.Transport); ok {
		t := dt.Clone()
		t.MaxIdleConnsPerHost = idlePerHost
		tr = t
	}
	w := &Webhooks{Hooks: map[string]Hook{}, Client: &http.Client{Timeout: 10 * time.Second, Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, Now: time.Now}
	for _, h := range hooks {
		w.Hooks[h.Name] = h
	}
	return w
}

// PerApprover reports whether the hook gets one notification per approver
// (with that approver's link) rather than one for the operation.
func (w *Webhooks) PerApprover(target string) bool { return w.Hooks[target].Links }

// Payload is the JSON body of a notification. Machine fields
// (operation_key, action, status, payload_hash, times) are as stored;
// every human-readable text (title, summary, field labels and values,
// diff values, warnings, outcome, names) is the approval message's safe
// rendering: hidden characters shown as ⟨U+XXXX⟩ and listed in
// hidden_characters. All of title, summary, fields and diff is the
// agent's text: a tool that shows it should fence it off from its own.
type Payload struct {
	Type         string                  `json:"type"` // approval_requested, operation_updated
	OperationKey string                  `json:"operation_key"`
	Action       string                  `json:"action"`
	Status       approval.Status         `json:"status"`
	Title        string                  `json:"title"`
	Summary      string                  `json:"summary"`
	Fields       []Field                 `json:"fields"`
	Diff         []Change                `json:"diff,omitempty"`
	Warnings     []string                `json:"warnings,omitempty"`
	WarningCodes []string                `json:"warning_codes,omitempty"` // the stable code of each warning
	Requester    string                  `json:"requester"`
	OnBehalfOf   string                  `json:"on_behalf_of,omitempty"`
	PayloadHash  string                  `json:"payload_hash"`
	ExpiresAt    time.Time               `json:"expires_at"`
	Required     int                     `json:"required"`
	Approvals    []approval.DecisionView `json:"approvals,omitempty"`
	Rejection    *approval.DecisionView  `json:"rejection,omitempty"`
	Outcome      string                  `json:"outcome"`
	Approver     string                  `json:"approver,omitempty"`
	ApprovalURL  string                  `json:"approval_url,omitempty"`
	// HiddenCharacters names the hidden characters escaped in the texts.
	HiddenCharacters []string `json:"hidden_characters,omitempty"`
}

// Field is one preview field, rendered safely.
type Field struct {
	Name  string `json:"name"`
	Label string `json:"label"`
	Value string `json:"value"`
	Long  bool   `json:"long,omitempty"`
	// Format "html": Value is the source; HTML is what its recipient reads.
	Format string    `json:"format,omitempty"`
	Lines  int       `json:"lines"`
	Chars  int       `json:"chars"`
	HTML   *HTMLPart `json:"html,omitempty"`
	// Item is the bulk item (from 1) the field belongs to, or 0.
	Item int `json:"item,omitempty"`
}

// HTMLPart is an HTML body as its recipient reads it.
type HTMLPart struct {
	Text   string   `json:"text"`
	Links  []Link   `json:"links"`
	Remote []string `json:"remote,omitempty"`
	// DiffersFromText is true when its words say something other than the text part.
	DiffersFromText bool `json:"differs_from_text"`
}

// Link is one link of an HTML part, with where it really goes.
type Link struct {
	N    int    `json:"n"`
	Text string `json:"text"`
	Href string `json:"href"`
}

// Change is one field of a diff; before and after are JSON text, absent
// when the side does not exist.
type Change struct {
	Field  string  `json:"field"`
	Before *string `json:"before,omitempty"`
	After  *string `json:"after,omitempty"`
	// Item is the bulk item (from 1) the change belongs to, or 0.
	Item int `json:"item,omitempty"`
}

func payload(typ string, m approval.Message) Payload {
	p := Payload{Type: typ, OperationKey: m.OperationKey, Action: m.Action, Status: m.Status, Title: m.Title,
		Summary: m.Summary, Fields: []Field{}, Warnings: m.Warnings, WarningCodes: m.WarningCodes, Requester: m.Requester,
		OnBehalfOf: m.OnBehalfOf, PayloadHash: m.PayloadHash, ExpiresAt: m.ExpiresAt, Required: m.Required,
		Approvals: m.Approvals, Rejection: m.Rejection, Outcome: m.Outcome}
	for _, f := range m.Fields {
		wf := Field{Name: f.Name, Label: f.Label, Value: f.Value, Long: f.Long, Format: f.Format, Lines: f.Lines, Chars: f.Chars, Item: f.Item}
		if h := f.HTML; h != nil {
			wf.HTML = &HTMLPart{Text: h.Text, Links: []Link{}, Remote: h.Remote, DiffersFromText: h.Mismatch.Differs}
			for _, l := range h.Links {
				wf.HTML.Links = append(wf.HTML.Links, Link{N: l.N, Text: l.Text, Href: l.Href})
			}
		}
		p.Fields = append(p.Fields, wf)
	}
	for _, c := range m.Diff {
		wc := Change{Field: c.Field, Item: c.Item}
		if !c.BeforeAbsent {
			wc.Before = &c.Before
		}
		if !c.AfterAbsent {
			wc.After = &c.After
		}
		p.Diff = append(p.Diff, wc)
	}
	for _, h := range m.Hidden {
		p.HiddenCharacters = append(p.HiddenCharacters, h.Name)
	}
	return p
}

// Notify posts an approval_requested notification.
func (w *Webhooks) Notify(ctx context.Context, n approval.Notice) (map[string]string, error) {
	h, ok := w.Hooks[n.Job.Target]
	if !ok {
		return nil, fmt.Errorf("webhook %q is not configured", n.Job.Target)
	}
	p := payload("approval_requested", n.Message)
	if n.Approver != nil {
		p.Approver = n.Approver.ID
	}
	if h.Links {
		p.ApprovalURL = n.Link
	}
	if err := w.post(ctx, h, n.Job.ID, p); err != nil {
		return nil, err
	}
	return map[string]string{"webhook": h.Name}, nil
}

// Update posts an operation_updated notification when the operation moves on.
func (w *Webhooks) Update(ctx context.Context, d approval.Delivery, m approval.Message) error {
	h, ok := w.Hooks[d.Handle["webhook"]]
	if !ok {
		return nil // the hook was removed from the configuration
	}
	return w.post(ctx, h, d.Job+"/"+string(m.Status), payload("operation_updated", m))
}

// Sign computes the signature header value for body at timestamp ts.
func Sign(secret []byte, ts string, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

func (w *Webhooks) post(ctx context.Context, h Hook, delivery string, p Payload) error {
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	ts := strconv.FormatInt(w.Now().Unix(), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook %s: bad URL", h.Name)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "countersign-webhook/1")
	req.Header.Set("X-Countersign-Timestamp", ts)
	req.Header.Set("X-Countersign-Delivery", p.OperationKey+"/"+delivery)
	req.Header.Set("Idempotency-Key", p.OperationKey+"/"+delivery)
	if len(h.Secret) > 0 {
		req.Header.Set("X-Countersign-Signature", Sign(h.Secret, ts, body))
	}
	resp, err := w.Client.Do(req)
	if err != nil {
		// The URL error would repeat the URL (which may hold a token).
		return fmt.Errorf("webhook %s: request failed", h.Name)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusTooManyRequests:
		secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return &approval.RetryAfterError{After: time.Duration(max(secs, 1)) * time.Second,
			Err: fmt.Errorf("webhook %s: 429", h.Name)}
	}
	return fmt.Errorf("webhook %s: HTTP %d", h.Name, resp.StatusCode)
}
