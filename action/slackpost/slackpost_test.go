package slackpost_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/action/slackpost"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/fakeslack"
	"github.com/slack-go/slack"
)

var bg = context.Background()

func prepare(t *testing.T, a approval.Action, input string) (*approval.Prepared, error) {
	t.Helper()
	return a.Prepare(bg, approval.PrepareRequest{Principal: &approval.Principal{ID: "agent"}, Input: json.RawMessage(input)})
}

// op builds the stored operation of a prepared input, as the service would.
func op(t *testing.T, name string, p *approval.Prepared) *approval.Operation {
	t.Helper()
	in, err := approval.Canonical(p.Input)
	if err != nil {
		t.Fatal(err)
	}
	hash, _ := approval.PayloadHash(name, in, "agent")
	return &approval.Operation{Key: "op_bbbbbbbbbbbbbbbbbbbbbbbbbb", Action: name, Input: in, PayloadHash: hash, State: p.State}
}

func TestPrepareValidates(t *testing.T) {
	a := slackpost.New(slackpost.Config{AllowedChannels: []string{"#general", "C0123456789"}})
	for _, tc := range []struct {
		name, input string
		code        approval.Code
		field       string
	}{
		{"no channel", `{"text":"hi"}`, approval.CodeInvalidInput, "channel"},
		{"bad channel", `{"channel":"#Has Spaces","text":"hi"}`, approval.CodeInvalidInput, "channel"},
		{"blank text", `{"channel":"#general","text":"  "}`, approval.CodeInvalidInput, "text"},
		{"long text", `{"channel":"#general","text":"` + strings.Repeat("x", 40001) + `"}`, approval.CodeInvalidInput, "text"},
		{"bad thread", `{"channel":"#general","text":"hi","thread_ts":"yesterday"}`, approval.CodeInvalidInput, "thread_ts"},
		{"unknown field", `{"channel":"#general","text":"hi","as_user":true}`, approval.CodeInvalidInput, "as_user"},
		{"not allowed", `{"channel":"#random","text":"hi"}`, approval.CodePolicyDenied, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := prepare(t, a, tc.input)
			if got := approval.ErrorCode(err); got != tc.code {
				t.Fatalf("code = %s (%v), want %s", got, err, tc.code)
			}
			if tc.field != "" {
				var e *approval.Error
				errors.As(err, &e)
				fields, _ := e.Details["fields"].([]approval.FieldError)
				if len(fields) == 0 || fields[0].Field != tc.field {
					t.Fatalf("fields = %v, want %s", fields, tc.field)
				}
			}
		})
	}
	for in, want := range map[string]string{
		`{"channel":"General","text":"hi"}`:                "#general",
		`{"channel":" #general ","text":"hi"}`:             "#general",
		`{"channel":"<#C0123456789|general>","text":"hi"}`: "C0123456789",
	} {
		p, err := prepare(t, a, in)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if got := p.Input.(slackpost.Input).Channel; got != want {
			t.Errorf("%s: channel = %s, want %s", in, got, want)
		}
	}
}

func TestPreviewShowsHowItWillLook(t *testing.T) {
	a := slackpost.New(slackpost.Config{})
	text := "Hi <!here>, see <https://evil.example/login|the docs> and <https://ok.example> &amp; ask <@U123|grace> in <#C0123456789|ops>"
	p, err := prepare(t, a, `{"channel":"#general","text":`+mustJSON(text)+`,"thread_ts":"1700000000.000100"}`)
	if err != nil {
		t.Fatal(err)
	}
	pv := p.Preview
	if got, want := pv.Title, "Reply in a Slack thread in #general"; got != want {
		t.Errorf("title = %q, want %q", got, want)
	}
	fields := map[string]string{}
	for _, f := range pv.Fields {
		fields[f.Name] = f.Value
	}
	if fields["text"] != text {
		t.Errorf("text field %q is not the exact text", fields["text"])
	}
	if got, want := fields["appears_as"], "Hi @here, see the docs (https://evil.example/login) and https://ok.example & ask @grace in #ops"; got != want {
		t.Errorf("appears as\n %q, want\n %q", got, want)
	}
	w := strings.Join(pv.Warnings, "\n")
	for _, want := range []string{"notifies everyone in the channel: @here", "mentions and notifies: U123", `"the docs" → https://evil.example/login`} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %q:\n%s", want, w)
		}
	}
	if strings.Contains(w, "ok.example") {
		t.Errorf("a plain link is not disguised: %s", w)
	}
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

func TestExecutePostsOnceWithMetadata(t *testing.T) {
	fake := fakeslack.New(t)
	a := slackpost.New(slackpost.Config{Client: fake.Client("xoxb"), Sleep: func(context.Context, time.Duration) {}})
	p, err := prepare(t, a, `{"channel":"#general","text":"*Deploy* done"}`)
	if err != nil {
		t.Fatal(err)
	}
	o := op(t, slackpost.Name, p)
	fake.Fail("chat.postMessage", 2, fakeslack.Failure{Status: 429, RetryAfter: time.Second})
	res, err := a.Execute(bg, o)
	if err != nil {
		t.Fatal(err)
	}
	var r slackpost.Result
	_ = json.Unmarshal(res, &r)
	ch := fake.ChannelID("#general")
	if r.Channel != ch || r.TS == "" {
		t.Fatalf("result %s", res)
	}
	msgs := fake.Messages(ch)
	if len(msgs) != 1 || msgs[0].Text != "*Deploy* done" || msgs[0].Metadata.EventPayload["operation_key"] != o.Key {
		t.Fatalf("messages %+v", msgs)
	}
	if c := fake.Calls("chat.postMessage")[2]; c.Form.Get("unfurl_links") != "false" || c.Form.Get("unfurl_media") != "false" {
		t.Errorf("unfurl not disabled: %v", c.Form)
	}
}

func TestExecuteFailures(t *testing.T) {
	fake := fakeslack.New(t)
	a := slackpost.New(slackpost.Config{Client: fake.Client("xoxb"), Sleep: func(context.Context, time.Duration) {}})
	p, _ := prepare(t, a, `{"channel":"#general","text":"hi"}`)
	o := op(t, slackpost.Name, p)
	for _, tc := range []struct {
		name    string
		fail    fakeslack.Failure
		unknown bool
	}{
		{"refused", fakeslack.Failure{Error: "not_in_channel"}, false},
		{"server error", fakeslack.Failure{Status: 502}, true},
		{"rate limited too long", fakeslack.Failure{Status: 429, RetryAfter: time.Minute}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake.Fail("chat.postMessage", 1, tc.fail)
			_, err := a.Execute(bg, o)
			var ee *approval.ExecError
			if !errors.As(err, &ee) || ee.Code != approval.CodeExecutionFailed || ee.OutcomeUnknown != tc.unknown {
				t.Fatalf("err = %#v", err)
			}
		})
	}
	// Nothing to reach at all: nothing was sent.
	dead := slackpost.New(slackpost.Config{Client: slack.New("xoxb", slack.OptionAPIURL("http://127.0.0.1:1/api/"))})
	_, err := dead.Execute(bg, o)
	var ee *approval.ExecError
	if !errors.As(err, &ee) || ee.OutcomeUnknown {
		t.Fatalf("unreachable: %#v", err)
	}
}

func TestUndoDeletesThePostedMessage(t *testing.T) {
	fake := fakeslack.New(t)
	cfg := slackpost.Config{Client: fake.Client("xoxb")}
	post, del := slackpost.New(cfg), slackpost.NewDelete(cfg)
	p, _ := prepare(t, post, `{"channel":"#general","text":"oops <@U1>"}`)
	o := op(t, slackpost.Name, p)
	res, err := post.Execute(bg, o)
	if err != nil {
		t.Fatal(err)
	}
	o.Status, o.Result = approval.StatusSucceeded, res

	name, input, err := post.UndoInput(bg, o)
	if err != nil || name != slackpost.DeleteName {
		t.Fatalf("undo input: %s %v", name, err)
	}
	dp, err := prepare(t, del, string(input))
	if err != nil {
		t.Fatal(err)
	}
	if dp.State == nil {
		t.Fatal("deletion not bound to the message's state")
	}
	var shown string
	for _, f := range dp.Preview.Fields {
		if f.Name == "text" {
			shown = f.Value
		}
	}
	if shown != "oops <@U1>" {
		t.Fatalf("preview shows %q", shown)
	}
	d := op(t, slackpost.DeleteName, dp)
	if err := del.Recheck(bg, d); err != nil {
		t.Fatalf("recheck: %v", err)
	}
	if _, err := del.Execute(bg, d); err != nil {
		t.Fatal(err)
	}
	var r slackpost.Result
	_ = json.Unmarshal(res, &r)
	if m, _ := fake.Message(r.Channel, r.TS); !m.Deleted {
		t.Fatal("message not deleted")
	}
	// Deleting again: the message is gone, so nothing is written.
	_, err = del.Execute(bg, d)
	var ee *approval.ExecError
	if !errors.As(err, &ee) || ee.Code != approval.CodeStaleState {
		t.Fatalf("second delete: %v", err)
	}
	if got := fake.Count("chat.delete"); got != 1 {
		t.Fatalf("chat.delete calls = %d, want 1", got)
	}
	if _, err := prepare(t, del, string(input)); approval.ErrorCode(err) != approval.CodeStaleState {
		t.Fatalf("prepare after deletion: %v", err)
	}
}

func TestUndoRefusedWhenMessageChanged(t *testing.T) {
	fake := fakeslack.New(t)
	cfg := slackpost.Config{Client: fake.Client("xoxb")}
	post, del := slackpost.New(cfg), slackpost.NewDelete(cfg)
	p, _ := prepare(t, post, `{"channel":"C0123456789","text":"v1","thread_ts":""}`)
	o := op(t, slackpost.Name, p)
	// A thread reply.
	parentCh, parentTS, _ := fake.Client("xoxb").PostMessageContext(bg, "C0123456789", slack.MsgOptionText("parent", false))
	_ = parentCh
	var in slackpost.Input
	_ = json.Unmarshal(o.Input, &in)
	in.ThreadTS = parentTS
	o.Input, _ = approval.Canonical(in)
	res, err := post.Execute(bg, o)
	if err != nil {
		t.Fatal(err)
	}
	o.Result = res
	_, input, _ := post.UndoInput(bg, o)
	dp, err := prepare(t, del, string(input))
	if err != nil || dp.State == nil {
		t.Fatalf("prepare: %v", err)
	}
	var r slackpost.Result
	_ = json.Unmarshal(res, &r)
	_, _, _, _ = fake.Client("xoxb").UpdateMessageContext(bg, r.Channel, r.TS, slack.MsgOptionText("v2", false))
	_, err = del.Execute(bg, op(t, slackpost.DeleteName, dp))
	var ee *approval.ExecError
	if !errors.As(err, &ee) || ee.Code != approval.CodeStaleState {
		t.Fatalf("delete of an edited message: %v", err)
	}
	if fake.Count("chat.delete") != 0 {
		t.Fatal("deleted anyway")
	}
}

func TestUndoInputRefusesWithoutResult(t *testing.T) {
	a := slackpost.New(slackpost.Config{})
	_, _, err := a.UndoInput(bg, &approval.Operation{Key: "op_x", Action: slackpost.Name})
	if approval.ErrorCode(err) != approval.CodeInvalidState {
		t.Fatalf("err = %v", err)
	}
}

// A Slack date can carry a link its reader never sees (issue 8): the
// preview says where it goes and warns.
func TestPreviewFlagsADateThatLinks(t *testing.T) {
	a := slackpost.New(slackpost.Config{})
	text := "Meeting <!date^1700000000^{date_short}^https://evil.example/login|Tuesday 3pm>, and <!date^1700000000^{time}|at noon>"
	p, err := prepare(t, a, `{"channel":"#general","text":`+mustJSON(text)+`}`)
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	for _, f := range p.Preview.Fields {
		fields[f.Name] = f.Value
	}
	if got, want := fields["appears_as"], "Meeting Tuesday 3pm (https://evil.example/login), and at noon"; got != want {
		t.Errorf("appears as %q, want %q", got, want)
	}
	if w := strings.Join(p.Preview.Warnings, "\n"); !strings.Contains(w, `a date "Tuesday 3pm" → https://evil.example/login`) {
		t.Errorf("no warning about the date's link:\n%s", w)
	}
}

// Each post, the rate-limited retries included, re-checks the claim: once
// it is lost, nothing more is posted.
func TestExecuteLostClaimPostsNothing(t *testing.T) {
	fake := fakeslack.New(t)
	a := slackpost.New(slackpost.Config{Client: fake.Client("xoxb"), Sleep: func(context.Context, time.Duration) {}})
	p, err := prepare(t, a, `{"channel":"#general","text":"hi"}`)
	if err != nil {
		t.Fatal(err)
	}
	o := op(t, slackpost.Name, p)
	fake.Fail("chat.postMessage", 1, fakeslack.Failure{Status: 429, RetryAfter: time.Second})
	checks := 0
	ctx := approval.WithClaimCheck(bg, func(context.Context) error {
		checks++
		if checks > 1 {
			return &approval.ClaimLostError{Status: approval.StatusFailed}
		}
		return nil
	})
	_, err = a.Execute(ctx, o)
	var ee *approval.ExecError
	if !errors.As(err, &ee) || ee.OutcomeUnknown || ee.Details["phase"] != "fence" {
		t.Fatalf("error %v", err)
	}
	if n := len(fake.Messages(fake.ChannelID("#general"))); n != 0 || checks != 2 {
		t.Fatalf("%d messages posted, %d checks", n, checks)
	}
}
