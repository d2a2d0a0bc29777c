package slackpost_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/countersign/countersign/action/slackpost"
	"github.com/countersign/countersign/approval"
)

// The preview is rendered again from the stored input (approval.Previewer):
// it must be exactly the one Prepare showed.
func TestPreviewFromStoredInputIsPreparesPreview(t *testing.T) {
	a := slackpost.New(slackpost.Config{})
	for _, in := range []string{
		`{"channel":"#general","text":"Hello"}`,
		`{"channel":"C0123456789","text":"<!channel> see <https://evil.example|docs> and <@U123>","thread_ts":" 1700000000.000100 "}`,
		`{"channel":"#ops","text":"` + "\u202e" + `reversed, and a long one"}`,
	} {
		prep, err := a.Prepare(context.Background(), approval.PrepareRequest{Principal: &approval.Principal{ID: "agent"}, Input: json.RawMessage(in)})
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		canon, err := approval.Canonical(prep.Input)
		if err != nil {
			t.Fatal(err)
		}
		again, err := a.Preview(canon)
		if err != nil || !again.Equal(prep.Preview) {
			t.Fatalf("%s:\nprepare %+v\nstored  %+v (%v)", in, prep.Preview, again, err)
		}
	}
	if _, err := a.Preview([]byte(`{"channel":"#x","text":"y","extra":1}`)); err == nil {
		t.Fatal("an input with an unknown field rendered")
	}
}
