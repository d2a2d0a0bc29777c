// Package email is the email.send action: an agent prepares an email, a
// human approves the exact message, and countersign sends it once.
//
// The normalized input (Input) is the single source of the preview, the
// payload hash and the message that Execute sends, so what the approver
// read is what the recipients get.
package email

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/channel/email/mailer"
)

// Name is the action's contract name.
const Name = "email.send"

// Limits are the policy gates of email.send from the config file
// (limits: email.send: {max_recipients, allowed_domains}).
type Limits struct {
	// MaxRecipients caps to+cc+bcc; 0 means only the hard ceiling of
	// HardMaxRecipients applies.
	MaxRecipients int
	// AllowedDomains, when non-empty, is the list of recipient domains
	// allowed. Matching is exact ("client.example" does not allow
	// "eu.client.example"), because a subdomain can belong to someone
	// else; write "*.client.example" to allow every subdomain (but not
	// client.example itself; list both for both). Internationalized names
	// may be written in Unicode or punycode.
	AllowedDomains []string
	// InternalDomains are the organisation's own domains: recipients
	// elsewhere count as external for routing (the attribute
	// external_recipients). The sender's domain is always internal.
	InternalDomains []string
	// MaxAttachments and MaxAttachmentBytes (decoded, all files together)
	// bound attachments; 0 means DefaultMaxAttachments and
	// DefaultMaxAttachmentBytes, and neither may pass the hard limits.
	MaxAttachments     int
	MaxAttachmentBytes int
}

// Action implements email.send.
type Action struct {
	sender   mailer.Sender
	from     Address
	max      int
	exact    map[string]bool
	suffix   []string // ".client.example" for "*.client.example"
	limited  bool
	internal map[string]bool
	attach   attachLimits
}

var (
	_ approval.Action          = (*Action)(nil)
	_ approval.IrreversibleOps = (*Action)(nil)
)

// New returns the action sending through sender as from. It fails on an
// allowed domain that is not a valid domain name, so a typo in the config
// stops the start instead of silently refusing every email.
func New(sender mailer.Sender, from mail.Address, limits Limits) (*Action, error) {
	if sender == nil {
		return nil, errors.New("email.send: no sender")
	}
	// The sender is configuration, not agent input: it may be on a
	// single-label host such as localhost in development.
	if _, err := mail.ParseAddress(from.String()); err != nil || strings.IndexFunc(from.Name, unicode.IsControl) >= 0 {
		return nil, fmt.Errorf("email.send: from address %q is invalid", from.Address)
	}
	at := strings.LastIndexByte(from.Address, '@')
	f := Address{Name: strings.TrimSpace(from.Name), Address: from.Address[:at] + "@" + strings.ToLower(from.Address[at+1:])}
	if limits.MaxRecipients < 0 {
		return nil, errors.New("email.send: max_recipients must not be negative")
	}
	al := attachLimits{count: cmp.Or(limits.MaxAttachments, DefaultMaxAttachments), bytes: cmp.Or(limits.MaxAttachmentBytes, DefaultMaxAttachmentBytes)}
	if al.count < 0 || al.count > HardMaxAttachments {
		return nil, fmt.Errorf("email.send: max_attachments must be between 0 and %d", HardMaxAttachments)
	}
	if al.bytes < 0 || al.bytes > HardMaxAttachmentBytes {
		return nil, fmt.Errorf("email.send: max_attachment_bytes must be at most %d (20 MiB)", HardMaxAttachmentBytes)
	}
	a := &Action{sender: sender, from: f, max: limits.MaxRecipients, exact: map[string]bool{},
		limited: len(limits.AllowedDomains) > 0, internal: map[string]bool{f.domain(): true}, attach: al}
	for _, d := range limits.InternalDomains {
		n, err := normalizeDomain(d)
		if err != nil {
			return nil, fmt.Errorf("email.send: internal domain %q: %v", d, err)
		}
		a.internal[n] = true
	}
	for _, d := range limits.AllowedDomains {
		wild := strings.HasPrefix(d, "*.")
		n, err := normalizeDomain(strings.TrimPrefix(d, "*."))
		if err != nil {
			return nil, fmt.Errorf("email.send: allowed domain %q: %v", d, err)
		}
		if wild {
			a.suffix = append(a.suffix, "."+n)
		} else {
			a.exact[n] = true
		}
	}
	return a, nil
}

// Name returns "email.send".
func (a *Action) Name() string { return Name }

// Irreversible: a sent email cannot be unsent, so every operation an
// allowance could cover is irreversible (approval.IrreversibleOps).
func (a *Action) Irreversible(map[string][]string) (bool, string) { return true, "" }

// Prepare validates and normalizes the agent's input and renders the
// preview. Returns invalid_input listing every bad field (details.fields),
// or policy_denied with details.rule max_recipients or allowed_domains.
// It sends nothing.
func (a *Action) Prepare(_ context.Context, req approval.PrepareRequest) (*approval.Prepared, error) {
	in, fe := normalize(req.Input, a.from)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	if err := a.checkPolicy(&in); err != nil {
		return nil, err
	}
	return &approval.Prepared{
		Input:   in,
		Preview: preview(&in),
		Scope:   Name,
		Attrs:   a.attrs(&in),
	}, nil
}

// attrs are the facts routes may match on: how many recipients, which
// domains (of the recipients and of Reply-To), and how many are outside the organisation, so that a route can
// send external email to a stricter set of approvers
// (when: [{attr: external_recipients, gt: 0}]).
func (a *Action) attrs(in *Input) map[string]string {
	rcpts := in.recipients()
	external := 0
	seen := map[string]bool{}
	var domains []string
	for _, r := range rcpts {
		d := r.domain()
		if !a.internal[d] {
			external++
		}
		if !seen[d] {
			seen[d] = true
			domains = append(domains, d)
		}
	}
	// Where answers go counts as a domain the email reaches: a route or an
	// allowance bounding domains bounds Reply-To too.
	if r := in.ReplyTo; r != nil && !seen[r.domain()] {
		domains = append(domains, r.domain())
	}
	slices.Sort(domains)
	return map[string]string{
		"action": Name, "recipients": strconv.Itoa(len(rcpts)), "domains": strings.Join(domains, ","),
		"external_recipients": strconv.Itoa(external), "attachments": strconv.Itoa(len(in.Attachments)),
	}
}

func (a *Action) checkPolicy(in *Input) error {
	rcpts := in.recipients()
	if a.max > 0 && len(rcpts) > a.max {
		e := approval.PolicyDenied("max_recipients", "%d recipients; this service allows at most %d per email", len(rcpts), a.max)
		e.Details["max"] = a.max
		e.Details["count"] = len(rcpts)
		return e
	}
	if n := len(in.Attachments); n > a.attach.count {
		e := approval.PolicyDenied("max_attachments", "%d attachments; this service allows at most %d per email", n, a.attach.count)
		e.Details["max"], e.Details["count"] = a.attach.count, n
		return e
	}
	if n := attachmentBytes(in.Attachments); n > a.attach.bytes {
		e := approval.PolicyDenied("max_attachment_bytes", "attachments are %d bytes together (decoded); this service allows at most %d", n, a.attach.bytes)
		e.Details["max"], e.Details["bytes"] = a.attach.bytes, n
		return e
	}
	if !a.limited {
		return nil
	}
	var refused []string
	for _, r := range rcpts {
		if !a.allowed(r.domain()) {
			refused = append(refused, r.Address)
		}
	}
	if len(refused) > 0 {
		e := approval.PolicyDenied("allowed_domains", "recipient domain not allowed: %s", strings.Join(refused, ", "))
		e.Details["addresses"] = refused
		return e
	}
	return nil
}

func (a *Action) allowed(domain string) bool {
	if a.exact[domain] {
		return true
	}
	for _, s := range a.suffix {
		if strings.HasSuffix(domain, s) {
			return true
		}
	}
	return false
}

// Preview renders a stored input again (approval.Previewer): the preview
// is a function of the normalized input alone, so operations are kept
// without a second copy of the message in their preview.
func (a *Action) Preview(input json.RawMessage) (approval.Preview, error) {
	in, err := stored(input)
	if err != nil {
		return approval.Preview{}, err
	}
	return preview(&in), nil
}

var _ approval.Previewer = (*Action)(nil)

// stored reads a normalized input as Prepare stored it.
func stored(raw json.RawMessage) (Input, error) {
	var in Input
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return Input{}, err
	}
	if len(in.recipients()) == 0 || in.From.Address == "" {
		return Input{}, errors.New("email.send: stored input without sender or recipients")
	}
	return in, nil
}

// Result is what a sent email records on its operation.
type Result struct {
	MessageID string   `json:"message_id"`
	Accepted  []string `json:"accepted"`
}

// MessageID is the Message-ID (without angle brackets) of the email an
// operation sends: the operation key at the sender's domain (the domain of
// the stored From). It depends on the stored operation alone, so a manual
// retry of an operation whose outcome was unknown carries the same id and
// mail systems can recognise the duplicate.
func MessageID(opKey, senderDomain string) string { return opKey + "@" + senderDomain }

// Execute sends the stored normalized input of op, and nothing else, with
// the operation's receipt in the Countersign-Receipt header.
// Failures are *approval.ExecError with code execution_failed; their
// OutcomeUnknown is true only when the email may have gone out.
func (a *Action) Execute(ctx context.Context, op *approval.Operation) (json.RawMessage, error) {
	if !approval.ValidOperationKey(op.Key) {
		return nil, &approval.ExecError{Code: approval.CodeExecutionFailed, Message: "invalid operation key; nothing was sent"}
	}
	in, err := stored(op.Input)
	if err != nil {
		return nil, &approval.ExecError{Code: approval.CodeExecutionFailed, Message: "the stored email input is unreadable; nothing was sent"}
	}
	m, err := message(&in, op.Key)
	if err != nil {
		return nil, &approval.ExecError{Code: approval.CodeExecutionFailed, Message: "the stored email input is unreadable (" + err.Error() + "); nothing was sent"}
	}
	tok, err := approval.CountersignerFrom(ctx).Mint(approval.ReceiptRequest{Audience: ReceiptAudience})
	if err != nil {
		return nil, &approval.ExecError{Code: approval.CodeExecutionFailed, Message: "could not sign the receipt; nothing was sent"}
	}
	if tok != "" {
		m.Headers[ReceiptHeader] = foldToken(tok)
	}
	// The claim is re-checked right before the message is handed to SMTP
	// (approval/fence.go).
	if err := approval.CheckClaim(ctx); err != nil {
		return nil, approval.ClaimLostExecError(err)
	}
	accepted, err := a.sender.Send(ctx, m)
	if err != nil {
		e := &approval.ExecError{Code: approval.CodeExecutionFailed, OutcomeUnknown: mailer.OutcomeUnknown(err),
			Message: "sending the email failed; it may or may not have been delivered"}
		var se *mailer.SendError
		if errors.As(err, &se) {
			e.Message = se.Message()
			e.Details = map[string]any{"stage": string(se.Stage)}
			if se.Code != 0 {
				e.Details["smtp_code"] = se.Code
			}
		}
		return nil, e
	}
	if accepted == nil {
		accepted = []string{}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // keep "<op_…@example.com>" readable
	if err := enc.Encode(Result{MessageID: "<" + m.MessageID + ">", Accepted: accepted}); err != nil {
		return nil, err // unreachable; a foreign error is recorded as outcome unknown, true here
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Receipts (SPEC §9): every message carries the operation's receipt.
const (
	ReceiptHeader   = "Countersign-Receipt"
	ReceiptAudience = "email"
)

// foldToken puts a space every 64 characters of a receipt, where the
// message writer folds the header onto lines of its own: a whole receipt
// on one line may pass the 998-character limit of a header line. A JWS
// has no whitespace, so a verifier removes it (receipt.Verify does).
func foldToken(tok string) string {
	var b strings.Builder
	for len(tok) > 64 {
		b.WriteString(tok[:64])
		b.WriteByte(' ')
		tok = tok[64:]
	}
	b.WriteString(tok)
	return b.String()
}

// message builds the email of in for operation opKey: the stored input,
// attachments decoded from their stored base64 and checked against their
// approved SHA-256.
func message(in *Input, opKey string) (*mailer.Message, error) {
	var attachments []mailer.Attachment
	for _, at := range in.Attachments {
		data, err := at.decoded()
		sum := sha256.Sum256(data)
		if err != nil || hex.EncodeToString(sum[:]) != at.SHA256 || len(data) != at.Size {
			return nil, fmt.Errorf("attachment %d does not match its approved SHA-256", len(attachments))
		}
		attachments = append(attachments, mailer.Attachment{Name: at.Name, ContentType: at.ContentType, Data: data})
	}
	conv := func(l []Address) []mail.Address {
		var out []mail.Address
		for _, a := range l {
			out = append(out, a.mail())
		}
		return out
	}
	m := &mailer.Message{
		From:        in.From.mail(),
		Attachments: attachments,
		To:          conv(in.To),
		Cc:          conv(in.Cc),
		Bcc:         conv(in.Bcc),
		Subject:     in.Subject,
		Text:        in.Text,
		HTML:        in.HTML,
		MessageID:   MessageID(opKey, in.From.domain()),
		Headers:     map[string]string{"X-Countersign-Operation": opKey},
	}
	if in.ReplyTo != nil {
		r := in.ReplyTo.mail()
		m.ReplyTo = &r
	}
	return m, nil
}
