package slackapp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"sync"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
)

// Socket Mode: with an app-level token (SLACK_APP_TOKEN, xapp-…) the app
// opens a WebSocket to Slack (apps.connections.open) and interactions
// arrive over it instead of POST /slack/interactions, so countersign needs
// no public URL. Slack authenticates the socket with the app token, so
// there is no request signature to check; everything else is Handle's:
// replay dedupe (by envelope id: Slack redelivers an unacknowledged
// envelope with the same id), the user → approver mapping and the
// decision rules. Each envelope is acknowledged once handled, within the
// DecideTimeout (2.5 s, inside Slack's 3 s), with a view submission's
// response as the ack's payload.

// maxInFlight bounds the envelopes handled at once; more wait their turn
// (Slack redelivers what is not acknowledged in time).
const maxInFlight = 16

// NewSocketClient is a Socket Mode client for api (a client with the bot
// token and slack.OptionAppLevelToken), logging through log at debug
// level (slack-go's own log includes payloads; it is off unless debug).
func NewSocketClient(api *slack.Client, log *slog.Logger) *socketmode.Client {
	return socketmode.New(api, socketmode.OptionLog(slogOutput{log}), socketmode.OptionReadLimit(1<<20))
}

type slogOutput struct{ log *slog.Logger }

func (o slogOutput) Output(_ int, s string) error {
	if o.log != nil {
		o.log.Debug("slack socket mode: " + s)
	}
	return nil
}

// RunSocket receives interactions over Socket Mode until ctx ends, and
// waits for those in progress. The client reconnects by itself when the
// socket drops or Slack asks it to; when it gives up (the app token is
// refused, or Slack cannot be reached), RunSocket tries again later, with
// backoff.
func (h *Handler) RunSocket(ctx context.Context, sm *socketmode.Client) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		wait := time.Second
		for {
			err := sm.RunContext(ctx)
			if ctx.Err() != nil {
				return
			}
			h.log.Error("slack: socket mode stopped; will reconnect", "err", err, "retry_in", wait)
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(wait*2, 5*time.Minute)
		}
	}()
	slots := make(chan struct{}, maxInFlight)
	for {
		var evt socketmode.Event
		select {
		case <-ctx.Done():
			return
		case evt = <-sm.Events:
		}
		switch evt.Type {
		case socketmode.EventTypeConnected:
			h.log.Info("slack: socket mode connected")
		case socketmode.EventTypeConnectionError:
			if e, ok := evt.Data.(*slack.ConnectionErrorEvent); ok {
				h.log.Warn("slack: socket mode cannot connect; retrying", "attempt", e.Attempt, "retry_in", e.Backoff, "err", e.Error())
			}
		case socketmode.EventTypeInvalidAuth:
			h.log.Error("slack: socket mode: the app token is refused (check SLACK_APP_TOKEN and connections:write)")
		case socketmode.EventTypeIncomingError, socketmode.EventTypeErrorBadMessage, socketmode.EventTypeErrorWriteFailed:
			h.log.Warn("slack: socket mode: " + string(evt.Type))
		case socketmode.EventTypeInteractive:
			if evt.Request == nil {
				continue
			}
			req := *evt.Request
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				h.envelope(ctx, sm, req)
			}()
		case socketmode.EventTypeEventsAPI, socketmode.EventTypeSlashCommand:
			// Not countersign's; acknowledged so Slack does not redeliver it.
			if evt.Request != nil {
				h.ack(ctx, sm, *evt.Request, nil)
			}
		}
	}
}

// envelope handles one interactive envelope and acknowledges it.
func (h *Handler) envelope(ctx context.Context, sm *socketmode.Client, req socketmode.Request) {
	key := "slack-envelope:" + req.EnvelopeID
	if req.EnvelopeID == "" {
		sum := sha256.Sum256(req.Payload)
		key = "slack-envelope:none:" + hex.EncodeToString(sum[:])
	}
	resp, err := h.interact(req.Payload, key)
	if err != nil {
		h.log.Warn("slack: socket mode: malformed interaction ignored", "reason", err.Error())
	}
	h.ack(ctx, sm, req, resp)
}

func (h *Handler) ack(ctx context.Context, sm *socketmode.Client, req socketmode.Request, payload any) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := sm.AckCtx(ctx, req.EnvelopeID, payload); err != nil {
		h.log.Warn("slack: socket mode: acknowledgement not sent", "err", err)
	}
}
