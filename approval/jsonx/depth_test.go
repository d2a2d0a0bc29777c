package jsonx

import (
	"strings"
	"testing"
)

func TestCheckDepth(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, c := range []struct {
		name, doc string
		max       int
		path      string // "" and ok: no error
		ok        bool
	}{
		{"flat", `{"a":1}`, 2, "", true},
		{"at the limit", deep(32), 32, "", true},
		{"one past", deep(33), 32, strings.Repeat("[0]", 32), false},
		{"keys", `{"a":{"b":[1,{"c":{}}]}}`, 3, "a.b[1]", false},
		{"second key", `{"x":1,"y":{"z":[[]]}}`, 3, "y.z[0]", false},
		{"brackets in strings", `{"a":"[[[[[[","b\"[{":"{{{{"}`, 1, "", true},
		{"escaped quote then bracket", `["\\",[[]]]`, 2, "[1][0]", false},
		{"keys after closing", `{"a":{},"b":{"c":{}}}`, 2, "b.c", false},
		{"long key cut", `{"` + strings.Repeat("k", 100) + `":[[]]}`, 2, strings.Repeat("k", 64) + "[0]", false},
		{"unterminated string", `["abc`, 2, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := CheckDepth([]byte(c.doc), c.max)
			if c.ok {
				if e != nil {
					t.Fatalf("refused: %v", e)
				}
				return
			}
			if e == nil {
				t.Fatal("accepted")
			}
			if e.Path != c.path {
				t.Fatalf("path %q, want %q", e.Path, c.path)
			}
		})
	}
}

// The scan is linear and allocation-light: a 9,000-deep document costs one
// pass and a stack of at most MaxDepth frames.
func BenchmarkCheckDepthDeep(b *testing.B) {
	doc := []byte(`{"body":` + strings.Repeat("[", 9000) + strings.Repeat("]", 9000) + `}`)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if CheckDepth(doc, MaxDepth) == nil {
			b.Fatal("accepted")
		}
	}
}

func BenchmarkCheckDepthWide(b *testing.B) {
	doc := []byte(`{"a":[` + strings.Repeat(`{"k":"v","n":[1,2,3]},`, 10000) + `1]}`)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if e := CheckDepth(doc, MaxDepth); e != nil {
			b.Fatal(e)
		}
	}
}
