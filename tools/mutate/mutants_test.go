package main

import (
	"go/parser"
	"go/token"
	"slices"
	"strings"
	"testing"
)

const goSrc = `package p

const limit = 1

func f(a, b int, ok bool) bool {
	if a < b && ok {
		return true
	}
	for i := 0; i != a; i++ {
	}
	return false
}
`

func TestGoMutantsEachKindAndEachBuilds(t *testing.T) {
	ms, err := goMutants("p/p.go", []byte(goSrc))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, m.String())
		// Every mutant is still Go (a mutant that does not parse would
		// count as killed by the compiler, and say nothing of the tests).
		out := m.apply([]byte(goSrc))
		if _, err := parser.ParseFile(token.NewFileSet(), "p.go", out, 0); err != nil {
			t.Errorf("%s does not parse: %v\n%s", m, err, out)
		}
		if string(out) == goSrc {
			t.Errorf("%s changes nothing", m)
		}
	}
	want := []string{
		"p/p.go:6: < -> <=", "p/p.go:6: < -> >=", "p/p.go:6: && -> ||", "p/p.go:6: if condition negated",
		"p/p.go:6: early return removed", "p/p.go:7: return true -> false", "p/p.go:9: constant 0 -> 1",
		"p/p.go:9: != -> ==", "p/p.go:11: return false -> true",
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("missing mutant %q in\n%s", w, strings.Join(got, "\n"))
		}
	}
	// The package constant is left alone (mutating it breaks builds, not logic).
	for _, g := range got {
		if strings.HasPrefix(g, "p/p.go:3:") {
			t.Errorf("a mutant of a package-level declaration: %s", g)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d mutants, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
}

const luaSrc = `-- guard: returns 0 when x < 1 (comment, not code)
local st = get('st')
if not st then return {'missing'} end
if st ~= 'a<b' and n >= 2 then
  return 1
end
`

func TestLuaMutantsSkipCommentsAndStrings(t *testing.T) {
	var got []string
	for _, m := range luaMutants("s.lua", []byte(luaSrc)) {
		got = append(got, m.String()+" => "+strings.TrimSpace(strings.Split(string(m.apply([]byte(luaSrc))), "\n")[m.Line-1]))
	}
	want := []string{
		"s.lua:3: if condition negated => if not (not st) then return {'missing'} end",
		"s.lua:3: early return removed => ",
		"s.lua:4: ~= -> == => if st == 'a<b' and n >= 2 then",
		"s.lua:4: >= -> > => if st ~= 'a<b' and n > 2 then",
		"s.lua:4: >= -> < => if st ~= 'a<b' and n < 2 then",
		"s.lua:4: and -> or => if st ~= 'a<b' or n >= 2 then",
		"s.lua:4: if condition negated => if not (st ~= 'a<b' and n >= 2) then",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("mutants\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
