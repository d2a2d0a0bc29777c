package approval_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/store"
)

// rendered is a test action whose preview is a function of its input
// (approval.Previewer); with diff set, Prepare adds a diff that the input
// alone does not give back.
type rendered struct {
	name string
	diff bool
	bad  bool // Preview fails (an unreadable stored input)
}

func (r *rendered) Name() string { return r.name }

func (r *rendered) Prepare(_ context.Context, req approval.PrepareRequest) (*approval.Prepared, error) {
	var in struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(req.Input, &in); err != nil {
		return nil, approval.FieldErrors{{Field: "input", Reason: "not an object"}}.Err()
	}
	p := render(in.Text)
	if r.diff {
		p.Diff = []approval.Change{{Field: "text", Before: json.RawMessage(`"old"`), After: json.RawMessage(`"new"`)}}
	}
	return &approval.Prepared{Input: in, Preview: p}, nil
}

func render(text string) approval.Preview {
	return approval.Preview{Title: "Say " + text, Summary: "It says it.",
		Fields: []approval.Field{{Name: "text", Label: "Text", Value: text, Long: true}}, Warnings: []string{"irreversible"}}
}

func (r *rendered) Preview(input json.RawMessage) (approval.Preview, error) {
	var in struct {
		Text string `json:"text"`
	}
	if r.bad {
		return approval.Preview{}, errors.New("unreadable")
	}
	if err := json.Unmarshal(input, &in); err != nil {
		return approval.Preview{}, err
	}
	return render(in.Text), nil
}

func (r *rendered) Execute(context.Context, *approval.Operation) (json.RawMessage, error) {
	return json.RawMessage(`{}`), nil
}

func TestPreviewIsRenderedFromTheStoredInput(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	st := store.New(rdb, nil)
	t.Cleanup(func() { _ = st.Close() })
	plain, withDiff := &rendered{name: "test.plain"}, &rendered{name: "test.diff", diff: true}
	agent := &approval.Principal{ID: "agent", Scopes: []string{"*"}}
	svc, err := approval.NewService(approval.Config{Store: st, Links: approval.RandomKeyring(),
		Actions: []approval.Action{plain, withDiff}, PublicURL: "http://countersign.test",
		Policy: &approval.Policy{Principals: []*approval.Principal{agent},
			Approvers: []*approval.Approver{{ID: "grace", Name: "Grace"}},
			Routes:    []approval.RouteRule{{Name: "all", ApproverIDs: []string{"grace"}, Required: 1, Notify: []string{"console"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	stored := func(key string) map[string]string {
		t.Helper()
		keys, err := rdb.Keys(bg, "cs:*:o:"+key).Result()
		if err != nil || len(keys) != 1 {
			t.Fatalf("keys of %s: %v %v", key, keys, err)
		}
		h, err := rdb.HGetAll(bg, keys[0]).Result()
		if err != nil {
			t.Fatal(err)
		}
		return h
	}

	op, _, err := svc.Prepare(bg, agent, approval.PrepareCall{Action: "test.plain", Input: json.RawMessage(`{"text":"hello"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if !op.Preview.Equal(render("hello")) {
		t.Fatalf("prepare answered preview %+v", op.Preview)
	}
	if _, ok := stored(op.Key)["pv"]; ok {
		t.Fatal("a preview that the input gives back is stored")
	}
	got, err := svc.Get(bg, agent, op.Key)
	if err != nil || !got.Preview.Equal(op.Preview) {
		t.Fatalf("read back %+v, %v; want %+v", got.Preview, err, op.Preview)
	}
	list, err := svc.List(bg, agent, "")
	if err != nil || len(list) != 1 || !list[0].Preview.Equal(op.Preview) {
		t.Fatalf("list: %+v, %v", list, err)
	}
	// A long-poll that ends with its context answers from the read it
	// started with (StandingStore): rendered too.
	waitCtx, cancelWait := context.WithTimeout(bg, 20*time.Millisecond)
	w, err := svc.Wait(waitCtx, agent, op.Key, time.Minute)
	cancelWait()
	if err != nil || !w.Preview.Equal(op.Preview) {
		t.Fatalf("wait: %+v, %v", w, err)
	}

	// A preview with more than the input says is kept whole.
	d, _, err := svc.Prepare(bg, agent, approval.PrepareCall{Action: "test.diff", Input: json.RawMessage(`{"text":"hi"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := stored(d.Key)["pv"]; !ok {
		t.Fatal("a preview with a diff is not stored")
	}
	if got, err := svc.Get(bg, agent, d.Key); err != nil || len(got.Preview.Diff) != 1 || !got.Preview.Equal(d.Preview) {
		t.Fatalf("read back %+v, %v", got.Preview, err)
	}

	// An input that can no longer be rendered is refused, never shown
	// with an empty preview (by a replica that has not rendered it yet).
	bad := &rendered{name: "test.plain", bad: true}
	st2 := store.New(rdb, nil) // a replica has its own store
	t.Cleanup(func() { _ = st2.Close() })
	replica, err := approval.NewService(approval.Config{Store: st2, Links: approval.RandomKeyring(),
		Actions: []approval.Action{bad}, PublicURL: "http://countersign.test",
		Policy: &approval.Policy{Principals: []*approval.Principal{agent}, Approvers: []*approval.Approver{{ID: "grace", Name: "Grace"}},
			Routes: []approval.RouteRule{{Name: "all", ApproverIDs: []string{"grace"}, Required: 1, Notify: []string{"console"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := replica.Get(bg, agent, op.Key); err == nil {
		t.Fatalf("read with an unrenderable input: %+v", got.Preview)
	}
	// What one reader does with the preview it was given reaches no other.
	a, _ := svc.Get(bg, agent, op.Key)
	a.Preview.Fields[0].Value = "changed"
	if b, _ := svc.Get(bg, agent, op.Key); b.Preview.Fields[0].Value != "hello" {
		t.Fatalf("a change to one read's preview showed in the next: %q", b.Preview.Fields[0].Value)
	}
}
