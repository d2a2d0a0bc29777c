package jsonx

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestIndentBoundedMatchesIndent(t *testing.T) {
	for _, doc := range []string{
		`{}`, `[]`, `1`, `"a"`, `{"a":1}`, `{"a":[1,2,{"b":null,"c":[]}],"d":{}}`,
		`{"s":"with \"quotes\", commas, [brackets] and {braces}: \\"}`, `[[[[1]]],[{}],[[]]]`,
		` { "a" : [ 1 , 2 ] } `,
	} {
		var want bytes.Buffer
		if err := json.Indent(&want, []byte(doc), "", "  "); err != nil {
			t.Fatal(err)
		}
		got, ok := IndentBounded([]byte(doc), 1<<20)
		if !ok || string(got) != strings.TrimSpace(want.String()) {
			t.Errorf("IndentBounded(%s) =\n%s\nwant\n%s", doc, got, want.String())
		}
	}
}

func TestIndentBoundedStopsAtLimit(t *testing.T) {
	wide := []byte(strings.Repeat("[", 30) + strings.Repeat("1,", 5000) + "1" + strings.Repeat("]", 30))
	if _, ok := IndentBounded(wide, 3*len(wide)); ok {
		t.Fatal("a wide, deep document indented within 3 × its size")
	}
	flat := []byte(`{"title":"Quarterly review","start":"09:00","attendees":["ada","grace"]}`)
	if _, ok := IndentBounded(flat, 2*len(flat)+64); !ok {
		t.Fatal("an ordinary body did not indent")
	}
}
