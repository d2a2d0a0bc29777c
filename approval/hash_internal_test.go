package approval

import (
	"encoding/json"
	"testing"
)

// FuzzPayloadHash: the payload hash written directly is the hash of the
// canonical object, for any input, action and principal (invalid UTF-8
// and invalid JSON included: both refuse, or both agree).
func FuzzPayloadHash(f *testing.F) {
	f.Add("email.send", []byte(`{"to":["a@b.example"],"text":"<hi>\u2028"}`), "agent")
	f.Add("http.request", []byte(` { "b" : 1e3 , "a" : [ -0 ] } `), "p\xff")
	f.Add("x", []byte(nil), "y")
	f.Add("x", []byte(``), "y")
	f.Add("x", []byte(`{"a":1,"a":2}`), "y")
	f.Fuzz(func(t *testing.T, action string, input []byte, principal string) {
		var in json.RawMessage
		if input != nil {
			in = json.RawMessage(input)
		}
		got, gerr := PayloadHash(action, in, principal)
		want, werr := payloadHashSlow(action, in, principal)
		if (gerr != nil) != (werr != nil) || got != want {
			t.Fatalf("PayloadHash(%q, %q, %q) = %s, %v; the canonical object gives %s, %v", action, input, principal, got, gerr, want, werr)
		}
	})
}
