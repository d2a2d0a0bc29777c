package fakeslack_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/fakeslack"
	"github.com/slack-go/slack"
)

var bg = context.Background()

func TestPostUpdateDeleteAreRecorded(t *testing.T) {
	fake := fakeslack.New(t)
	fake.Token = "xoxb-good"
	api := fake.Client("xoxb-good")

	btn := slack.NewButtonBlockElement("approve", `{"op":"x"}`, slack.NewTextBlockObject(slack.PlainTextType, "Approve", false, false))
	ch, ts, err := api.PostMessageContext(bg, "#approvals", slack.MsgOptionText("hello", false),
		slack.MsgOptionBlocks(slack.NewActionBlock("b1", btn)),
		slack.MsgOptionMetadata(slack.SlackMetadata{EventType: "t", EventPayload: map[string]any{"k": "v"}}))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ch, fake.ChannelID("#approvals"); got != want {
		t.Fatalf("channel = %s, want %s", got, want)
	}
	m, ok := fake.Message(ch, ts)
	if !ok || m.Text != "hello" || m.Button("approve") == nil || m.ActionBlockID() != "b1" {
		t.Fatalf("message = %+v", m)
	}
	if m.Metadata == nil || m.Metadata.EventPayload["k"] != "v" {
		t.Fatalf("metadata = %+v", m.Metadata)
	}
	if _, _, _, err := api.UpdateMessageContext(bg, ch, ts, slack.MsgOptionText("done", false), slack.MsgOptionBlocks()); err != nil {
		t.Fatal(err)
	}
	m, _ = fake.Message(ch, ts)
	if m.Text != "done" || m.Button("approve") != nil || m.Updates != 1 {
		t.Fatalf("updated = %+v", m)
	}
	if _, _, err := api.DeleteMessageContext(bg, ch, ts); err != nil {
		t.Fatal(err)
	}
	if _, _, err := api.DeleteMessageContext(bg, ch, ts); err == nil || err.Error() != "message_not_found" {
		t.Fatalf("second delete: %v", err)
	}
	if got, want := fake.Count("chat.delete"), 2; got != want {
		t.Fatalf("deletes = %d, want %d", got, want)
	}
	if _, err := fake.Client("xoxb-bad").AuthTestContext(bg); err == nil || err.Error() != "invalid_auth" {
		t.Fatalf("bad token: %v", err)
	}
	if c := fake.Calls("chat.postMessage")[0]; c.Token != "xoxb-good" || c.Form.Get("channel") != "#approvals" {
		t.Fatalf("call = %+v", c)
	}
}

func TestFailures(t *testing.T) {
	fake := fakeslack.New(t)
	api := fake.Client("xoxb")
	fake.Fail("chat.postMessage", 1, fakeslack.Failure{Status: 500})
	fake.Fail("chat.postMessage", 1, fakeslack.Failure{Status: 429, RetryAfter: 7 * time.Second})
	fake.Fail("chat.postMessage", 1, fakeslack.Failure{Status: 503, AfterEffect: true})

	_, _, err := api.PostMessageContext(bg, "#a", slack.MsgOptionText("1", false))
	var sce slack.StatusCodeError
	if !errors.As(err, &sce) || sce.Code != 500 {
		t.Fatalf("first: %v", err)
	}
	_, _, err = api.PostMessageContext(bg, "#a", slack.MsgOptionText("2", false))
	var rl *slack.RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter != 7*time.Second {
		t.Fatalf("second: %v", err)
	}
	_, _, err = api.PostMessageContext(bg, "#a", slack.MsgOptionText("3", false))
	if !errors.As(err, &sce) || sce.Code != 503 {
		t.Fatalf("third: %v", err)
	}
	if _, _, err = api.PostMessageContext(bg, "#a", slack.MsgOptionText("4", false)); err != nil {
		t.Fatal(err)
	}
	// Only the ambiguous failure and the success left messages behind.
	msgs := fake.Messages(fake.ChannelID("#a"))
	if len(msgs) != 2 || msgs[0].Text != "3" || msgs[1].Text != "4" {
		t.Fatalf("messages = %+v", msgs)
	}
}

func TestHistoryWithMetadata(t *testing.T) {
	fake := fakeslack.New(t)
	api := fake.Client("xoxb")
	ch, ts, err := api.PostMessageContext(bg, "C0123ABC", slack.MsgOptionText("x", false),
		slack.MsgOptionMetadata(slack.SlackMetadata{EventType: "e", EventPayload: map[string]any{"op": "op_1"}}))
	if err != nil {
		t.Fatal(err)
	}
	h, err := api.GetConversationHistoryContext(bg, &slack.GetConversationHistoryParameters{
		ChannelID: ch, Latest: ts, Inclusive: true, Limit: 1, IncludeAllMetadata: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Messages) != 1 || h.Messages[0].Metadata.EventPayload["op"] != "op_1" {
		t.Fatalf("history = %+v", h.Messages)
	}
	_, reply, err := api.PostMessageContext(bg, ch, slack.MsgOptionText("r", false), slack.MsgOptionTS(ts))
	if err != nil {
		t.Fatal(err)
	}
	msgs, _, _, err := api.GetConversationRepliesContext(bg, &slack.GetConversationRepliesParameters{
		ChannelID: ch, Timestamp: ts, Latest: reply, Inclusive: true})
	if err != nil || len(msgs) != 2 || msgs[1].Text != "r" {
		t.Fatalf("replies = %+v, %v", msgs, err)
	}
}

func TestSignedPayloadVerifies(t *testing.T) {
	body := fakeslack.FormBody(fakeslack.BlockActions(fakeslack.Click{UserID: "U1", TeamID: "T1",
		ActionID: "approve", Value: "v", ChannelID: "C1", MessageTS: "1.2"}))
	req := fakeslack.SignedRequest("http://x/slack/interactions", "s3cret", time.Now(), body)
	sv, err := slack.NewSecretsVerifier(req.Header, "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = sv.Write(body)
	if err := sv.Ensure(); err != nil {
		t.Fatalf("ensure: %v", err)
	}
	form, _ := url.ParseQuery(string(body))
	var ic slack.InteractionCallback
	if err := json.Unmarshal([]byte(form.Get("payload")), &ic); err != nil {
		t.Fatal(err)
	}
	if ic.Type != slack.InteractionTypeBlockActions || len(ic.ActionCallback.BlockActions) != 1 ||
		ic.ActionCallback.BlockActions[0].ActionID != "approve" || ic.User.ID != "U1" || ic.Team.ID != "T1" ||
		ic.Container.MessageTs != "1.2" || ic.TriggerID == "" {
		t.Fatalf("parsed %+v", ic)
	}

	sub := fakeslack.ViewSubmission(fakeslack.Submission{UserID: "U1", TeamID: "T1", CallbackID: "cb",
		PrivateMetadata: "pm", Values: map[string]map[string]string{"reason": {"reason": "no"}}})
	var vs slack.InteractionCallback
	if err := json.Unmarshal(sub, &vs); err != nil {
		t.Fatal(err)
	}
	if vs.Type != slack.InteractionTypeViewSubmission || vs.View.CallbackID != "cb" || vs.View.PrivateMetadata != "pm" ||
		vs.View.State.Values["reason"]["reason"].Value != "no" {
		t.Fatalf("submission %+v", vs.View)
	}
}
