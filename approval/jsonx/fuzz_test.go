package jsonx

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzJSON: for valid JSON, CheckDepth agrees with the depth a decoder
// sees, and IndentBounded (when within its limit) writes what json.Indent
// writes.
func FuzzJSON(f *testing.F) {
	for _, s := range []string{`{}`, `[[[]]]`, `{"a":[1,{"b":"[\"{"}]}`, `"x"`, `[1,2,[3,[4]]]`, ` {"k" : [ ] } `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e := CheckDepth(b, 4)
		if !json.Valid(b) {
			return
		}
		depth, max := 0, 0
		dec := json.NewDecoder(bytes.NewReader(b))
		for {
			tok, err := dec.Token()
			if err != nil {
				break
			}
			switch tok {
			case json.Delim('['), json.Delim('{'):
				depth++
				max = maxInt(max, depth)
			case json.Delim(']'), json.Delim('}'):
				depth--
			}
		}
		if (e != nil) != (max > 4) {
			t.Fatalf("CheckDepth(%s, 4) = %v, depth is %d", b, e, max)
		}
		var want bytes.Buffer
		if err := json.Indent(&want, b, "", "  "); err != nil {
			t.Fatal(err)
		}
		got, ok := IndentBounded(b, 1<<20)
		if ok && !bytes.Equal(got, bytes.TrimSpace(want.Bytes())) {
			t.Fatalf("IndentBounded(%s) =\n%s\nwant\n%s", b, got, want.Bytes())
		}
		if small, ok := IndentBounded(b, len(b)); ok && len(small) > len(b) {
			t.Fatalf("over its limit: %d > %d", len(small), len(b))
		}
	})
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}
