package approval

import (
	"encoding/json"
	"strings"
	"testing"

	gojcs "github.com/gowebpki/jcs"
)

// BenchmarkCanonicalAndHash is what every prepare computes from the
// normalized input: its canonical form and the payload hash. "before" is
// the reference JCS and the hash of the object encoded and canonicalized
// again, as until the one-pass canonicalizer (approval/jcs).
func BenchmarkCanonicalAndHash(b *testing.B) {
	in := map[string]any{"from": map[string]string{"address": "agent@corp.example"}, "subject": "Quarterly figures",
		"text": strings.Repeat("Thank you for your patience while we put together the figures. ", 15), "to": []map[string]string{{"address": "ada@client.example"}}}
	b.Run("before", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			raw, _ := json.Marshal(in)
			c, err := gojcs.Transform(raw)
			if err != nil {
				b.Fatal(err)
			}
			obj, _ := json.Marshal(struct {
				Action    string          `json:"action"`
				Input     json.RawMessage `json:"input"`
				Principal string          `json:"principal"`
			}{"email.send", c, "agent"})
			h, err := gojcs.Transform(obj)
			if err != nil {
				b.Fatal(err)
			}
			_ = SHA256Hex(h)
		}
	})
	b.Run("now", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c, err := Canonical(in)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := PayloadHash("email.send", c, "agent"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
