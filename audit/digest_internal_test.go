package audit

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
)

// Sealing hashes the entry it encodes directly; verifying hashes a written
// line after taking its "hash" out. Both must give the same digest, or a
// log would not verify.
func TestDigestIsDigestOfTheWrittenLine(t *testing.T) {
	for _, ev := range []approval.Event{
		{Time: time.Unix(1900000000, 123456789).UTC(), Operation: "op_aaaaaaaaaaaaaaaaaaaaaaaaaa", Event: "prepared",
			Actor: "principal:agent", PayloadHash: "sha256:00", Status: approval.StatusDraft, Details: map[string]any{"route": "r"}},
		{Time: time.Unix(0, 0).UTC(), Event: CheckpointEvent, Actor: "system",
			Details: map[string]any{"covers": 1000, "head": "sha256:ff", "jws": "a.b.c", "nested": map[string]any{"z": []any{1.5, "<&>", nil}, "é": "\u2028"}}},
		{Event: "rejection", Actor: "approver:grace", Channel: "email", Outcome: "x", Details: map[string]any{"reason": "no \"quotes\"\n\x00"}},
	} {
		e := Entry{Event: ev, Chain: "s3.17", Seq: 42, Prev: "sha256:abc"}
		if err := e.Seal(); err != nil {
			t.Fatal(err)
		}
		line, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		want, err := digestOf(line)
		if err != nil {
			t.Fatal(err)
		}
		if e.Hash != want {
			t.Fatalf("%s: sealed %s, the written line hashes to %s", ev.Event, e.Hash, want)
		}
	}
}

// The sealer writes each line from the encoding it hashed; it must be the
// line json.Marshal writes for the sealed entry.
func TestSealLineIsTheEncodedLine(t *testing.T) {
	for _, ev := range []approval.Event{
		{Time: time.Unix(1900000000, 1).UTC(), Operation: "op_a", Event: "approval", Actor: "approver:grace", Channel: "slack",
			PayloadHash: "sha256:ab", Status: approval.StatusApproved, Details: map[string]any{"reason": "<b>&</b> \u2028 é", "n": 1.5}},
		{Event: CheckpointEvent, Actor: "system"},
	} {
		e := Entry{Event: ev, Chain: "s0.10", Seq: 7, Prev: "sha256:00"}
		line, err := e.sealLine(nil)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(Line{Audit: e})
		if err != nil {
			t.Fatal(err)
		}
		if string(line) != string(want) {
			t.Fatalf("sealed line\n %s\nencoded\n %s", line, want)
		}
		s := Entry{Event: ev, Chain: "s0.10", Seq: 7, Prev: "sha256:00"}
		if err := s.Seal(); err != nil || s.Hash != e.Hash {
			t.Fatalf("Seal gives %s, the line %s (%v)", s.Hash, e.Hash, err)
		}
	}
}
