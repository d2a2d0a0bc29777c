// Package callback posts the status changes of a principal's operations to
// the principal's status webhook (policy file: callback_url,
// callback_secret), signed. It is approval.Callbacks; the workers call it
// and retry what it could not deliver.
//
// Each POST carries one event (Event) as JSON and these headers:
//
//	X-Countersign-Event-Id:  the event id, the same on every retry (de-duplicate by it)
//	X-Countersign-Timestamp: Unix seconds when this attempt was signed
//	X-Countersign-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>" with the secret>
//	Idempotency-Key:         the event id again
//
// Any 2xx acknowledges the event; anything else (redirects included: they
// are never followed) is retried with backoff, a 429's Retry-After
// honoured. Connections go only to public addresses, or to loopback when
// the URL itself names a loopback host (internal/netguard).
package callback

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/netguard"
)

var _ approval.Callbacks = (*Sender)(nil)

// Hook is one principal's status webhook.
type Hook struct {
	Principal string
	URL       string
	Secret    []byte
}

// Sender posts events to the principals' hooks.
type Sender struct {
	hooks   map[string]Hook
	clients map[netguard.Policy]*http.Client
	// Now is the clock of the signature timestamps.
	Now func() time.Time
}

// Timeout bounds one POST, connection included.
const Timeout = 10 * time.Second

// New builds a sender for hooks.
func New(hooks []Hook) *Sender {
	s := &Sender{hooks: map[string]Hook{}, Now: time.Now, clients: map[netguard.Policy]*http.Client{
		netguard.PublicOnly:    netguard.Client(netguard.PublicOnly, Timeout),
		netguard.AllowLoopback: netguard.Client(netguard.AllowLoopback, Timeout),
	}}
	for _, h := range hooks {
		s.hooks[h.Principal] = h
	}
	return s
}

// Has reports whether principal has a hook.
func (s *Sender) Has(principal string) bool { _, ok := s.hooks[principal]; return ok }

// Event is the JSON body of one POST.
type Event struct {
	ID             string          `json:"id"`
	Type           string          `json:"type"` // operation.status_changed
	OperationKey   string          `json:"operation_key"`
	Action         string          `json:"action"`
	Status         approval.Status `json:"status"`
	PreviousStatus approval.Status `json:"previous_status,omitempty"`
	Sequence       int             `json:"sequence"`
	OccurredAt     time.Time       `json:"occurred_at"`
	Error          *EventError     `json:"error,omitempty"`
}

// EventError is what a failed operation's event says of its error; GET
// /v1/operations/{key} has the rest.
type EventError struct {
	Code           string `json:"code"`
	OutcomeUnknown *bool  `json:"outcome_unknown,omitempty"`
}

// EventType is the type of every event.
const EventType = "operation.status_changed"

// Body is the event's JSON.
func Body(c approval.StatusChange) ([]byte, error) {
	ev := Event{ID: c.ID, Type: EventType, OperationKey: c.Operation, Action: c.Action, Status: c.Status,
		PreviousStatus: c.Previous, Sequence: c.Seq, OccurredAt: c.At.UTC()}
	if c.Code != "" {
		ev.Error = &EventError{Code: c.Code, OutcomeUnknown: c.OutcomeUnknown}
	}
	return json.Marshal(ev)
}

// Sign is the X-Countersign-Signature value of body signed at ts.
func Sign(secret []byte, ts string, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Verify checks a received event as a receiver should: the signature over
// "<timestamp>.<body>" in constant time, and a timestamp within tolerance
// of now. It returns nil when the event is authentic and fresh.
func Verify(secret []byte, header http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	ts := header.Get("X-Countersign-Timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errors.New("no timestamp")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return errors.New("timestamp outside the tolerance")
	}
	if !hmac.Equal([]byte(header.Get("X-Countersign-Signature")), []byte(Sign(secret, ts, body))) {
		return errors.New("signature does not verify")
	}
	return nil
}

// Post delivers one change to the principal's hook. Errors name neither
// the URL nor the secret.
func (s *Sender) Post(ctx context.Context, principal string, c approval.StatusChange) error {
	h, ok := s.hooks[principal]
	if !ok {
		return nil // the hook was removed from the configuration: nothing to deliver
	}
	body, err := Body(c)
	if err != nil {
		return err
	}
	ts := strconv.FormatInt(s.Now().Unix(), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return errors.New("status webhook: the callback_url is not usable")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "countersign-callback/1")
	req.Header.Set("X-Countersign-Event-Id", c.ID)
	req.Header.Set("Idempotency-Key", c.ID)
	req.Header.Set("X-Countersign-Timestamp", ts)
	req.Header.Set("X-Countersign-Signature", Sign(h.Secret, ts, body))
	resp, err := s.clients[netguard.PolicyFor(h.URL)].Do(req)
	if err != nil {
		if netguard.Refused(err) {
			return errors.New("status webhook: the callback_url resolves to a private or loopback address, which is refused")
		}
		// The transport's error repeats the URL (which may hold a token).
		return errors.New("status webhook: the request failed (connection refused, timed out or reset)")
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return fmt.Errorf("status webhook: HTTP %d redirect refused (redirects are never followed)", resp.StatusCode)
	case resp.StatusCode == http.StatusTooManyRequests:
		secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return &approval.RetryAfterError{After: time.Duration(min(max(secs, 1), 3600)) * time.Second,
			Err: errors.New("status webhook: HTTP 429")}
	}
	return fmt.Errorf("status webhook: HTTP %d", resp.StatusCode)
}
