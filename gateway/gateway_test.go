package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/action/mcpcall"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/gateway"
	"github.com/countersign/countersign/internal/testing/mcpupstream"
	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/upstream"
)

type fixture struct {
	gw     *gateway.Gateway
	svc    *approval.Service
	events *[]approval.Event
	log    string
}

type notifier struct{}

func (notifier) Notify(context.Context, approval.Notice) (map[string]string, error) { return nil, nil }

// newFixture is a service with mcp.call over a real pool of one hostile
// upstream, notes (read_note and flood pass, pid hidden), on a real store.
func newFixture(t *testing.T, passRate int) (*fixture, string) {
	t.Helper()
	d := t.TempDir()
	must(t, os.WriteFile(filepath.Join(d, "hello"), []byte("hello there"), 0o600))
	log := filepath.Join(d, "calls.jsonl")
	pool := upstream.New([]upstream.Spec{{Name: "notes", Command: []string{mcpupstream.Build(t), "-dir", d, "-log", log},
		Pass: []string{"read_note", "flood"}, Hide: []string{"pid"}, PassRate: passRate, MaxResultBytes: 1 << 20,
		State:   map[string]upstream.StateRead{"write_note": {Tool: "read_note", Args: map[string]string{"name": "{name}"}, Diff: "text"}},
		Timeout: 5 * time.Second}}, upstream.Options{})
	pool.Start(context.Background())
	t.Cleanup(func() { _ = pool.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	must(t, pool.WaitListed(ctx))

	st := store.New(redistest.Start(t).Client(t), slog.New(slog.DiscardHandler))
	t.Cleanup(func() { _ = st.Close() })
	var events []approval.Event
	svc, err := approval.NewService(approval.Config{
		Store: st, Actions: []approval.Action{mcpcall.New(pool)},
		Policy: &approval.Policy{
			Approvers: []*approval.Approver{{ID: "grace", Email: "grace@example.com"}},
			Routes:    []approval.RouteRule{{Name: "all", ApproverIDs: []string{"grace"}, Required: 1, Notify: []string{"console"}, ApprovalTTL: time.Hour}},
		},
		Notifiers: map[string]approval.Notifier{"console": notifier{}}, Links: approval.RandomKeyring(),
		PublicURL: "http://countersign.test", OnEvent: []func(approval.Event){func(ev approval.Event) { events = append(events, ev) }},
	})
	must(t, err)
	return &fixture{gw: gateway.New(svc, pool), svc: svc, events: &events, log: log}, d
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func names(f *fixture, scopes ...string) []string {
	var out []string
	for _, tl := range f.gw.Tools(&approval.Principal{ID: "p", Scopes: scopes}) {
		out = append(out, tl.Name)
	}
	slices.Sort(out)
	return out
}

// A principal sees the tools its scopes name, and no hidden one, nor one
// whose name cannot be offered.
func TestToolsFollowTheScopes(t *testing.T) {
	f, _ := newFixture(t, 0)
	all := names(f, "mcp:notes")
	for _, want := range []string{"notes__read_note", "notes__write_note", "notes__send_operation"} {
		if !slices.Contains(all, want) {
			t.Errorf("mcp:notes does not see %s: %v", want, all)
		}
	}
	for _, name := range all {
		if name == "notes__pid" || strings.Contains(name, " ") || len(name) > 64 {
			t.Errorf("offered %q", name)
		}
	}
	if got := names(f, "mcp:notes/write_note"); !slices.Equal(got, []string{"notes__write_note"}) {
		t.Errorf("mcp:notes/write_note sees %v", got)
	}
	if got := names(f, "email.send", "mcp:other"); len(got) != 0 {
		t.Errorf("no mcp:notes scope, yet sees %v", got)
	}
	if got := names(f, "*"); !slices.Equal(got, all) {
		t.Errorf("* sees %v", got)
	}
}

func code(err error) approval.Code {
	var e *approval.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func TestCallRefuses(t *testing.T) {
	f, _ := newFixture(t, 0)
	p := &approval.Principal{ID: "p", Scopes: []string{"mcp:notes/read_note"}}
	ctx := context.Background()
	for _, c := range []struct {
		name string
		code approval.Code
	}{
		{"send_operation", approval.CodeNotFound},   // countersign's own: no upstream's
		{"notes__pid", approval.CodeNotFound},       // hidden
		{"notes__nope", approval.CodeNotFound},      // not listed
		{"other__read_note", approval.CodeNotFound}, // no such upstream
		{"notes__write_note", approval.CodeInsufficientScope},
	} {
		if _, err := f.gw.Call(ctx, p, c.name, json.RawMessage(`{}`)); code(err) != c.code {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
		}
	}
}

// A pass call runs at once, is audited as passed (no operation), and is
// bounded by pass_rate and max_result_bytes.
func TestPassIsAuditedRateLimitedAndBounded(t *testing.T) {
	f, _ := newFixture(t, 3)
	p := &approval.Principal{ID: "p", Scopes: []string{"mcp:notes"}}
	ctx := context.Background()
	o, err := f.gw.Call(ctx, p, "notes__read_note", json.RawMessage(`{"name":"hello"}`))
	must(t, err)
	if o.Passed == nil || o.Operation != nil || !strings.Contains(o.Passed.Text, "hello there") {
		t.Fatalf("outcome: %+v", o)
	}
	var passed []approval.Event
	for _, ev := range *f.events {
		if ev.Event == approval.EventPassed {
			passed = append(passed, ev)
		}
	}
	if len(passed) != 1 || passed[0].Operation != "" || passed[0].Details["tool"] != "read_note" ||
		passed[0].Details["upstream"] != "notes" || len(passed[0].Details["arguments_sha256"].(string)) != 64 || passed[0].Outcome != "ok" {
		t.Fatalf("passed events: %+v", passed)
	}
	if _, err := f.gw.Call(ctx, p, "notes__flood", json.RawMessage(`{"kib":1100}`)); code(err) != approval.CodePolicyDenied {
		t.Fatalf("a result over max_result_bytes: %v", err)
	}
	_, err = f.gw.Call(ctx, p, "notes__read_note", json.RawMessage(`{"name":"hello"}`)) // the third
	must(t, err)
	_, err = f.gw.Call(ctx, p, "notes__read_note", json.RawMessage(`{"name":"hello"}`))
	if code(err) != approval.CodeRateLimited {
		t.Fatalf("the fourth pass call in a minute with pass_rate 3: %v", err)
	}
	// A guarded call is an operation, not a pass call: not counted.
	o, err = f.gw.Call(ctx, p, "notes__write_note", json.RawMessage(`{"name":"x","text":"y"}`))
	must(t, err)
	if o.Operation == nil || o.Operation.Status != approval.StatusPending || o.Operation.Action != mcpcall.Name {
		t.Fatalf("guarded: %+v", o)
	}
	if b, _ := os.ReadFile(f.log); len(b) != 0 {
		t.Fatalf("a guarded call reached the upstream before approval: %s", b)
	}
}

// A small call against a large state that is all escapes (what the
// upstream's read returns is the upstream's choice) is still stored: the
// preview keeps a bounded part of the read, and the binding only its
// digest (guarantee 10: stored bytes stay within 4 × request + 64 KiB).
func TestSmallCallAgainstLargeStateIsStored(t *testing.T) {
	f, dir := newFixture(t, 0)
	must(t, os.WriteFile(filepath.Join(dir, "big"), []byte(strings.Repeat("\x01\u202e\n", 60_000)), 0o600))
	p := &approval.Principal{ID: "p", Scopes: []string{"mcp:notes"}}
	o, err := f.gw.Call(context.Background(), p, "notes__write_note", json.RawMessage(`{"name":"big","text":"x"}`))
	must(t, err)
	if o.Operation == nil || o.Operation.Status != approval.StatusPending {
		t.Fatalf("outcome: %+v", o)
	}
}
