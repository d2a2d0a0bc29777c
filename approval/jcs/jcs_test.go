package jcs_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/countersign/countersign/approval/jcs"
	gojcs "github.com/gowebpki/jcs"
)

// same checks that Transform and the reference agree: both refuse, or both
// give the same bytes.
func same(t *testing.T, in []byte) {
	t.Helper()
	want, werr := gojcs.Transform(in)
	got, gerr := jcs.Transform(in)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("%q: reference error %v, ours %v (ours gave %q)", in, werr, gerr, got)
	}
	if werr == nil && !bytes.Equal(got, want) {
		t.Fatalf("%q:\n got  %q\n want %q", in, got, want)
	}
}

var cases = []string{
	`{"b":1,"a":[true,null,"x"]}`, `{"a":1e3,"b":0.1,"c":-0,"d":100000000000000000000}`,
	`"\u00e9\ud83d\ude00\u2028"`, `[{"z":{},"y":[]},"<&>"]`, `{"amount":"5,000","to":["ada@client.example"]}`,
	` { "a" : [ 1 , 2 ] , "b" : { } } `, `{"\u20ac":1,"\ud83d\ude00":2,"\ufb01":3,"a":4,"":5}`,
	`{"a":1,"a":2}`, `{"b":1,"a":2,"b":3}`, `[1,]`, `[,1]`, `{"a":1,}`, `{,}`, `[1 2]`, `1 2`, `tru`, `true `, ` null`,
	`-0`, `-0.0`, `0.000001`, `1e-7`, `123456789012345`, `1234567890123456`, `12345678901234567890`, `1E+2`, `1e400`,
	`01`, `1.`, `.5`, `+1`, `-`, `"\u0000\u001f\u007f\b\f\n\r\t\"\\\/"`, `"\ud800"`, `"\udc00"`, `"\ud800\u0041"`,
	`"\uD83D\uDE00"`, `"\x"`, "\"\x01\"", "\"\xff\"", "\"\xed\xa0\x80\"", `"abc`, `[`, `{`, `{"a"`, `{"a":`, ``, ` `,
	`[1]x`, `{"a":1}}`, `[true{}]`, `[1:2]`, "[\u00e9]", `{"a" 1}`, `[[[[[[]]]]]]`, `{"a":{"c":1,"b":2},"0":[{"y":1,"x":2}]}`,
	`"é"`, `{"é":1,"e":2,"z":3}`, `5e-324`, `1.7976931348623157e308`, `9007199254740993`, `-9007199254740993`,
}

func TestSameAsReference(t *testing.T) {
	for _, c := range cases {
		same(t, []byte(c))
	}
	if _, err := jcs.Transform(nil); err == nil {
		t.Fatal("nil accepted")
	}
}

func TestDeepDocumentsFallBack(t *testing.T) {
	for _, depth := range []int{63, 64, 65, 200} {
		same(t, []byte(strings.Repeat(`{"b":1,"a":`, depth)+"0"+strings.Repeat("}", depth)))
		same(t, []byte(strings.Repeat("[", depth)+strings.Repeat("]", depth)))
	}
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", "é\u2028\x00\x1f\"\\", "<&>"} {
		want, _ := gojcs.Transform(must(json.Marshal(s)))
		if got := jcs.AppendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s want %s", s, got, want)
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// FuzzSameAsReference: on any input, ours and the reference agree.
func FuzzSameAsReference(f *testing.F) {
	for _, c := range cases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, in []byte) { same(t, in) })
}

func BenchmarkTransform(b *testing.B) {
	doc := []byte(`{"to":[{"address":"client@client.example","name":"Ada"}],"subject":"Quarterly figures","from":{"address":"bench@example.test"},"text":"` +
		strings.Repeat("Hello Ada, the figures are attached. ", 28) + `\n"}`)
	b.Run("ours", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			if _, err := jcs.Transform(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reference", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			if _, err := gojcs.Transform(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
}
