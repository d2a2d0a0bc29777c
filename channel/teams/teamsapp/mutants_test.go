package teamsapp_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/channel/teams/teamsapp"
	"github.com/countersign/countersign/internal/testing/faketeams"
)

// Tests written for the survivors of the mutation run of issue 19 (see
// docs/mutation.md, "Web and chat adapters").

// invokeWith is the signed invoke request of c, with its activity changed
// by edit (as a client other than countersign's card could send it).
func (e *env) invokeWith(t *testing.T, c faketeams.Click, edit func(act map[string]any)) *http.Request {
	t.Helper()
	var act map[string]any
	if err := json.Unmarshal(e.fake.InvokeActivity(c), &act); err != nil {
		t.Fatal(err)
	}
	edit(act)
	body, err := json.Marshal(act)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Authorization", "Bearer "+e.fake.Token(act["serviceUrl"].(string), faketeams.Sign{}))
	return req
}

// A click counts only from a countersign button: an Action.Execute that
// names the operation and the payload hash. Each one missing alone, by an
// approver of the operation, is refused and changes nothing.
func TestMutantsEachPartOfAButtonIsRequired(t *testing.T) {
	e := newEnv(t, opts{notify: []string{"teams"}})
	op := e.prepareSend(t, "Hi", "Hello")
	g := cardOf(t, e.cards(t, op.Key, 2), grace.ID)
	action := func(act map[string]any) map[string]any {
		return act["value"].(map[string]any)["action"].(map[string]any)
	}
	for _, tc := range []struct {
		name string
		edit func(act map[string]any)
	}{
		{"not Action.Execute", func(act map[string]any) { action(act)["type"] = "Action.Submit" }},
		{"no payload hash", func(act map[string]any) { delete(action(act)["data"].(map[string]any), "hash") }},
		{"no operation", func(act map[string]any) { delete(action(act)["data"].(map[string]any), "op") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(t, e.invokeWith(t, e.fake.ClickOn(g, "approve", grace, ""), tc.edit))
			if r.HTTPStatus != 200 || r.Card == nil || !strings.Contains(faketeams.Text(r.Card), "This button is not a valid countersign button") {
				t.Fatalf("HTTP %d, card:\n%s", r.HTTPStatus, faketeams.Text(r.Card))
			}
		})
	}
	if cur := e.get(t, op.Key); cur.Status != approval.StatusPending || len(cur.Approvals) != 0 || cur.Rejection != nil {
		t.Fatalf("operation changed: %s %+v", cur.Status, cur.Approvals)
	}
}

// New refuses a configuration without its service, verifier or replay
// store.
func TestMutantsNewRequiresItsParts(t *testing.T) {
	if h, err := teamsapp.New(teamsapp.Config{}); err == nil || h != nil {
		t.Fatalf("New without service, verifier and replay store: %v, %v", h, err)
	}
}

// The note of a recorded approval says what happens next: with one
// approval required, the action runs; with a quorum, how many there are.
func TestMutantsApprovalNoteSaysWhatIsNext(t *testing.T) {
	for _, tc := range []struct {
		required   int
		want, dont string
	}{
		{1, "countersign carries it out now, exactly as shown, once", "of 1 approvals"},
		{2, "Your approval was recorded: 1 of 2 approvals.", "carries it out now"},
	} {
		e := newEnv(t, opts{notify: []string{"teams"}, required: tc.required})
		op := e.prepareSend(t, "Hi", "Hello")
		g := cardOf(t, e.cards(t, op.Key, 2), grace.ID)
		text := faketeams.Text(e.click(t, g, "approve", grace, "").Card)
		if !strings.Contains(text, tc.want) || strings.Contains(text, tc.dont) {
			t.Fatalf("required %d: the note says:\n%s", tc.required, text)
		}
	}
}

// A replayed activity changes nothing; its answer is the operation's card
// as it stands for an approver, and a note without content for anyone else.
func TestMutantsReplayedActivityAnswers(t *testing.T) {
	e := newEnv(t, opts{notify: []string{"teams"}, required: 2})
	op := e.prepareSend(t, "Quarterly numbers", "Hello")
	g := cardOf(t, e.cards(t, op.Key, 2), grace.ID)
	for _, tc := range []struct {
		user       faketeams.User
		want, dont string
	}{
		{grace, "Quarterly numbers", "nothing to show"},
		{stranger, "countersign has nothing to show for this card.", "Quarterly numbers"},
	} {
		c := e.fake.ClickOn(g, "reject", tc.user, "")
		c.ID = "f:replayed-" + tc.user.Name
		e.do(t, e.fake.Invoke(target, c, faketeams.Sign{}))
		r := e.do(t, e.fake.Invoke(target, c, faketeams.Sign{}))
		text := faketeams.Text(r.Card)
		if r.HTTPStatus != 200 || r.Card == nil || !strings.Contains(text, tc.want) || strings.Contains(text, tc.dont) {
			t.Fatalf("%s's replay: HTTP %d:\n%s", tc.user.Name, r.HTTPStatus, text)
		}
	}
	if cur := e.get(t, op.Key); cur.Status != approval.StatusPending || len(cur.Approvals) != 0 || cur.Rejection != nil {
		t.Fatalf("operation changed: %s", cur.Status)
	}
}
