package audit

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	gojcs "github.com/gowebpki/jcs"
)

// BenchmarkSeal is the sealer's work per event: hash the entry and encode
// its line. "before" is how it was done until the sealer wrote the line
// from the encoding it hashed: encode, decode to a map, encode again,
// canonicalize with the reference JCS, then encode the line once more.
func BenchmarkSeal(b *testing.B) {
	ev := approval.Event{Time: time.Unix(1900000000, 123000000).UTC(), Operation: "op_abcdefghijklmnopqrstuvwxyz", Event: "sent",
		Actor: "principal:support-agent", PayloadHash: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		Status: approval.StatusPending, Details: map[string]any{"approvers": []string{"grace", "ada"}, "required": 1,
			"expires_at": time.Unix(1900003600, 0).UTC()}}
	b.Run("before", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			e := Entry{Event: ev, Chain: "s3.17", Seq: 42, Prev: "sha256:00"}
			raw, _ := json.Marshal(e)
			var obj map[string]json.RawMessage
			_ = json.Unmarshal(raw, &obj)
			delete(obj, "hash")
			again, _ := json.Marshal(obj)
			c, err := gojcs.Transform(again)
			if err != nil {
				b.Fatal(err)
			}
			e.Hash = approval.SHA256Hex(c)
			if _, err := json.Marshal(Line{Audit: e}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("now", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			e := Entry{Event: ev, Chain: "s3.17", Seq: 42, Prev: "sha256:00"}
			if _, err := e.sealLine(nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
