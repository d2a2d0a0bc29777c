package jsonx

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/countersign/countersign/approval/jcs"
)

func TestCheckMembers(t *testing.T) {
	for _, tc := range []struct {
		doc                  string
		name, first, second  string // a *NameConflict
		numberAt, numberText string // a *NumberError
	}{
		{doc: `{"customer":{"tier":"gold"},"customer.tier":"platinum"}`, name: "customer.tier", first: "/customer/tier", second: "/customer.tier"},
		{doc: `{"customer.tier":"platinum","customer":{"tier":"gold"}}`, name: "customer.tier", first: "/customer.tier", second: "/customer/tier"},
		{doc: `{"a":{"b.c":1,"b":{"c":2}}}`, name: "a.b.c", first: "/a/b.c", second: "/a/b/c"},
		{doc: `{"a.b":{"c":1},"a":{"b.c":2}}`, name: "a.b.c", first: "/a.b/c", second: "/a/b.c"},
		{doc: `{"a.b":1,"a":{"b":{"c":1}}}`, name: "a.b", first: "/a.b", second: "/a/b"}, // an object and a number
		{doc: `{"x":[{"a.b":1,"a":{"b":2}}]}`, name: "x.0.a.b", first: "/x/0/a.b", second: "/x/0/a/b"},
		{doc: `{"x":[1,2],"x.1":3}`, name: "x.1", first: "/x/1", second: "/x.1"},
		{doc: `{"a":1,"a":2}`, name: "a", first: "/a", second: "/a"},
		{doc: `{"":{"a":1},".a":2}`, name: ".a", first: "//a", second: "/.a"},
		{doc: `{"a~":{"b/c":1},"a~.b/c":2}`, name: "a~.b/c", first: "/a~0/b~1c", second: "/a~0.b~1c"},
		{doc: `{"app.example/name":1,"app":{"example":2}}`},
		{doc: `{"a":{"b":1},"b":{"a":1},"list":[{"a":1},{"a":1}]}`},
		{doc: `[{"a":1},{"a":1}]`},
		{doc: `{"n":[1,{"m":9007199254740993}]}`, numberAt: "/n/1/m", numberText: "9007199254740993"},
		{doc: `{"n":1e400}`, numberAt: "/n", numberText: "1e400"},
		{doc: `{"n":1e-400}`, numberAt: "/n", numberText: "1e-400"},
		{doc: `{"n":[-0,1.0,1e3,0.1,12.50]}`},
		{doc: `9007199254740993`, numberAt: "", numberText: "9007199254740993"},
	} {
		err := CheckMembers([]byte(tc.doc))
		var nc *NameConflict
		var ne *NumberError
		switch {
		case tc.name != "":
			if !errors.As(err, &nc) || nc.Name != tc.name || nc.First != tc.first || nc.Second != tc.second {
				t.Errorf("%s: %v, want %q at %s and %s", tc.doc, err, tc.name, tc.first, tc.second)
			}
		case tc.numberText != "":
			if !errors.As(err, &ne) || ne.Pointer != tc.numberAt || ne.Number != tc.numberText {
				t.Errorf("%s: %v, want the number %s at %q", tc.doc, err, tc.numberText, tc.numberAt)
			}
		case err != nil:
			t.Errorf("%s: %v, want accepted", tc.doc, err)
		}
	}
	if err := CheckMembers([]byte(`{"a":`)); err == nil {
		t.Error("a malformed document was accepted")
	}
}

func TestPointer(t *testing.T) {
	for _, tc := range []struct {
		tokens []string
		ptr    string
	}{
		{nil, ""},
		{[]string{"body", "customer", "tier"}, "/body/customer/tier"},
		{[]string{"body", "app.example/name"}, "/body/app.example~1name"},
		{[]string{"a~b", "~1", ""}, "/a~0b/~01/"},
	} {
		if got := Pointer(tc.tokens); got != tc.ptr {
			t.Errorf("Pointer(%q) = %q, want %q", tc.tokens, got, tc.ptr)
		}
		back, err := ParsePointer(tc.ptr)
		if err != nil || strings.Join(back, "\x00") != strings.Join(tc.tokens, "\x00") || len(back) != len(tc.tokens) {
			t.Errorf("ParsePointer(%q) = %q, %v", tc.ptr, back, err)
		}
	}
	for _, bad := range []string{"body", "/a~2", "/a~"} {
		if _, err := ParsePointer(bad); err == nil {
			t.Errorf("ParsePointer(%q) accepted", bad)
		}
	}
}

// FuzzCheckMembers: the hashed check answers as a check keeping every
// name, and as a decoder-based reference: two values with one dotted name
// or a number RoundTrip refuses.
func FuzzCheckMembers(f *testing.F) {
	for _, s := range []string{`{"a":{"b":1},"a.b":2}`, `{"x":[1,{"y":2}],"x.1.y":3}`, `{"a":1e400}`, `{"a.b":{"c":[]}}`, `[1,2,{"":{"":0}}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) || CheckDepth(b, MaxDepth) != nil {
			return
		}
		got, exact := CheckMembers(b), checkMembersExact(b)
		if (got == nil) != (exact == nil) {
			t.Fatalf("%s: hashed %v, exact %v", b, got, exact)
		}
		if want := referenceProblem(b); (got == nil) != (want == "") {
			t.Fatalf("%s: CheckMembers %v, reference %q", b, got, want)
		}
	})
}

// referenceProblem decodes b with encoding/json's Token API apart from
// walk, names values by joining keys and indexes with ".", and checks
// numbers with jcs.RoundTrip.
func referenceProblem(b []byte) string {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	seen := map[string]bool{}
	problem := ""
	var value func(name string, root bool)
	value = func(name string, root bool) {
		tok, _ := dec.Token()
		if !root {
			if seen[name] && problem == "" {
				problem = "name " + name
			}
			seen[name] = true
		}
		child := func(k string) string {
			if root {
				return k
			}
			return name + "." + k
		}
		switch x := tok.(type) {
		case json.Delim:
			for i := 0; dec.More(); i++ {
				if x == '{' {
					k, _ := dec.Token()
					value(child(k.(string)), false)
				} else {
					value(child(itoa(i)), false)
				}
			}
			_, _ = dec.Token()
		case json.Number:
			if _, err := jcs.RoundTrip(string(x)); err != nil && problem == "" {
				problem = "number " + string(x)
			}
		}
	}
	value("", true)
	return problem
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

// BenchmarkCheckMembers: the cost the check adds to every prepare, on a
// body of about 64 KiB (objects, lists, strings, numbers).
func BenchmarkCheckMembers(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"items":[`)
	for i := 0; sb.Len() < 64<<10; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"id":` + itoa(i) + `,"title":"Weekly sync","amount":1250.5,"time":{"start":"2026-06-01T10:00:00Z","zone":"UTC"},"tags":["a","b"]}`)
	}
	sb.WriteString(`]}`)
	doc := []byte(sb.String())
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckMembers(doc); err != nil {
			b.Fatal(err)
		}
	}
}
