package httpreq_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/countersign/countersign/action/httpreq"
	"github.com/countersign/countersign/approval"
)

// Property (guarantee 13): for bodies of any shape — nesting, lists, keys
// holding dots, slashes, tildes and other scripts, numbers in every
// spelling — what the policy reads (the operation's attributes: route
// conditions, allowance matches and sum budgets) is exactly what is
// re-extracted from the bytes the real executor sent to the target; and
// an input is refused exactly when an oracle written apart from the code
// under test finds two values with one name or a number that a double
// does not hold.
//
// propertyCases bodies run per test run; PROPERTY_SEED picks another
// sequence (the seed is logged on failure).
const propertyCases = 1500

func TestProperty_PolicyReadsWhatTheTargetReceives(t *testing.T) {
	seed := uint64(19)
	if s := os.Getenv("PROPERTY_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	e := pathsEnv(t)
	e.agent.Quotas = approval.Quotas{MaxDrafts: 1 << 20, MaxPending: 1 << 20, MaxStoredBytes: 1 << 40,
		RequestsPerMinute: 1 << 20, SendsPerMinute: 1 << 20}
	accepted, refused := 0, 0
	bulks := 0
	for i := range propertyCases {
		g := &gen{rng: rng}
		// One request, or (one case in four) a bulk of two or three.
		bodies := []string{g.value(0, true)}
		if g.rng.IntN(4) == 0 {
			for range 1 + g.rng.IntN(2) {
				bodies = append(bodies, g.value(0, true))
			}
		}
		input := `{"target":"calendar","method":"POST","path":"/events","body":` + bodies[0] + `}`
		if len(bodies) > 1 {
			var items []string
			for _, b := range bodies {
				items = append(items, `{"method":"POST","path":"/events","body":`+b+`}`)
			}
			input = `{"target":"calendar","items":[` + strings.Join(items, ",") + `]}`
		}
		op, _, err := e.svc.Prepare(bg, e.agent, approval.PrepareCall{Action: httpreq.Name, Input: json.RawMessage(input)})
		why := ""
		for _, b := range bodies {
			if why == "" {
				why = oracle(t, b)
			}
		}
		var ae *approval.Error
		switch {
		case err != nil && errors.As(err, &ae) && ae.Code == approval.CodeInvalidInput && why != "":
			refused++
			continue
		case err != nil:
			t.Fatalf("seed %d case %d: %s refused (%v), the oracle finds nothing wrong", seed, i, input, err)
		case why != "":
			t.Fatalf("seed %d case %d: %s accepted, the oracle says %s", seed, i, input, why)
		}
		accepted++
		before := len(e.target.requests())
		if _, err := e.action.Execute(bg, op); err != nil {
			t.Fatalf("seed %d case %d: execute %s: %v", seed, i, input, err)
		}
		reqs := e.target.requests()
		if len(reqs) != before+len(bodies) {
			t.Fatalf("seed %d case %d: %d requests reached the target, want %d", seed, i, len(reqs)-before, len(bodies))
		}
		var got []map[string]string // what each write carried, re-extracted
		for j, r := range reqs[before:] {
			m := map[string]string{}
			if r.Body != "" || bodies[j] != "null" { // a null body is no body
				m = extract(t, []byte(r.Body))
			}
			got = append(got, m)
		}
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d case %d: %s: %s", seed, i, input, fmt.Sprintf(format, args...))
		}
		for name, v := range op.Attrs {
			if strings.HasPrefix(name, "sum(") {
				checkTotal(fail, name, v, got)
				continue
			}
			if name != "body" && !strings.HasPrefix(name, "body.") {
				continue
			}
			if v == approval.AttrOpaque("value that differs between the items of a bulk") {
				if agreed(got, name) {
					fail("the items agree on %s = %q, the policy read it as differing", name, got[0][name])
				}
				continue
			}
			for j := range got {
				if w, ok := got[j][name]; !ok || !sameAttr(v, w) {
					fail("the policy read %s = %q, write %d carried %q (present %v)", name, v, j, w, ok)
				}
			}
		}
		for j := range got {
			for name, w := range got[j] {
				if _, ok := op.Attrs[name]; !ok && !insideList(op.Attrs, name) {
					fail("write %d carried %s = %q, the policy read nothing", j, name, w)
				}
			}
		}
		if len(bodies) > 1 {
			bulks++
		}
	}
	t.Logf("seed %d: %d cases, %d accepted (%d of them bulks) and compared with what the target received, %d refused as the oracle says",
		seed, propertyCases, accepted, bulks, refused)
	if accepted < propertyCases/4 || refused < propertyCases/20 {
		t.Fatalf("the generator is lopsided: %d accepted, %d refused", accepted, refused)
	}
}

// gen writes random JSON text: member names from a pool built to collide
// when dotted, and numbers in many spellings, some beyond a double.
type gen struct{ rng *rand.Rand }

var (
	genKeys = []string{"a", "b", "c", "a.b", "b.c", "a.b.c", "amount", "customer", "tier", "customer.tier",
		"app.example/name", "x/y", "~0", "t~1", "~", "é", "日本", "0", "1", "a.0", "", ".", "a.", "\u202e"}
	genNumbers = []string{"0", "-0", "1", "1.0", "1e3", "1E+3", "12.50", "0.1", "-7", "90000", "1e21", "1e-7",
		"9007199254740992", "9007199254740993", "123456789012345678901", "1e400", "-1e400", "1e-400",
		"0.30000000000000004", "0.1000000000000000000001", "5e-324", "1.7976931348623157e308"}
	genStrings = []string{"gold", "platinum", "a.b", "x/y", "Ω", "line\nbreak", "", "1000", strings.Repeat("z", 300)}
)

func (g *gen) value(depth int, top bool) string {
	k := g.rng.IntN(10)
	if top {
		k = g.rng.IntN(20) // bodies are mostly objects
		if k < 18 {
			k = 0
		} else {
			k = 1 + g.rng.IntN(9)
		}
	}
	if depth > 4 && k < 2 {
		k = 2 + g.rng.IntN(8)
	}
	switch k {
	case 0, 1:
		if k == 1 && !top {
			n := g.rng.IntN(4)
			parts := make([]string, n)
			for i := range parts {
				parts[i] = g.value(depth+1, false)
			}
			return "[" + strings.Join(parts, ",") + "]"
		}
		n := 1 + g.rng.IntN(4)
		parts := make([]string, n)
		for i := range parts {
			key, _ := json.Marshal(genKeys[g.rng.IntN(len(genKeys))])
			parts[i] = string(key) + ":" + g.value(depth+1, false)
		}
		return "{" + strings.Join(parts, ",") + "}"
	case 2, 3, 4:
		if g.rng.IntN(3) == 0 {
			return strconv.Itoa(g.rng.IntN(2000000) - 1000000)
		}
		return genNumbers[g.rng.IntN(len(genNumbers))]
	case 5, 6:
		s, _ := json.Marshal(genStrings[g.rng.IntN(len(genStrings))])
		return string(s)
	case 7:
		return "true"
	case 8:
		return "null"
	}
	return `"` + strconv.Itoa(g.rng.IntN(100)) + `.` + strconv.Itoa(g.rng.IntN(100)) + `"`
}

// oracle says what is wrong with body by guarantee 13 ("" for nothing):
// it names every value by its dotted path (list elements by index) and
// compares numbers as exact rationals, with none of the code under test.
func oracle(t *testing.T, body string) string {
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	names := map[string]int{}
	var why string
	var walk func(name string, root bool) bool
	walk = func(name string, root bool) bool {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("generated JSON %s: %v", body, err)
		}
		if !root {
			if names[name]++; names[name] == 2 && why == "" {
				why = "two values named " + strconv.Quote(name)
			}
		}
		join := func(k string) string {
			if root {
				return k
			}
			return name + "." + k
		}
		switch x := tok.(type) {
		case json.Delim:
			if x == '{' {
				for dec.More() {
					k, _ := dec.Token()
					walk(join(k.(string)), false)
				}
			} else {
				for i := 0; dec.More(); i++ {
					walk(join(strconv.Itoa(i)), false)
				}
			}
			_, _ = dec.Token()
		case json.Number:
			exact, _ := new(big.Rat).SetString(string(x))
			f, err := strconv.ParseFloat(string(x), 64)
			back, _ := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
			if (err != nil || back == nil || exact.Cmp(back) != 0) && why == "" {
				why = "number " + string(x) + " is not a double"
			}
		}
		return true
	}
	walk("body", true)
	return why
}

// extract re-reads the bytes the target received, as a program reading
// them would: every value by its dotted name ("body", "body.a", …), not
// descending into lists. Scalars are their JSON text (strings unquoted),
// objects "{}", lists "[]".
func extract(t *testing.T, sent []byte) map[string]string {
	dec := json.NewDecoder(bytes.NewReader(sent))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("the target received %q: %v", sent, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("the target received more than one value: %q", sent)
	}
	out := map[string]string{}
	var flat func(name string, v any)
	flat = func(name string, v any) {
		switch x := v.(type) {
		case map[string]any:
			out[name] = "{}"
			for k, sub := range x {
				flat(name+"."+k, sub)
			}
		case []any:
			out[name] = "[]"
		case string:
			out[name] = x
		case json.Number:
			out[name] = "#" + x.String()
		case bool:
			out[name] = strconv.FormatBool(x)
		case nil:
			out[name] = "null"
		default:
			out[name] = fmt.Sprint(x)
		}
	}
	flat("body", v)
	return out
}

// sameAttr compares an attribute the policy read with a value extracted
// from what the target received: numbers by exact value, text exactly,
// and markers by kind (an opaque string is a long one or one holding
// control characters).
func sameAttr(attr, got string) bool {
	switch {
	case attr == approval.AttrObject:
		return got == "{}"
	case attr == approval.AttrOpaque("list"):
		return got == "[]"
	case strings.HasPrefix(attr, "\x00"):
		return !strings.HasPrefix(got, "#") && got != "{}" && got != "[]" &&
			(len(got) > 256 || strings.ContainsFunc(got, func(r rune) bool { return r < 0x20 || r == 0x7f }))
	case strings.HasPrefix(got, "#"):
		a, ok1 := new(big.Rat).SetString(attr)
		b, ok2 := new(big.Rat).SetString(got[1:])
		return ok1 && ok2 && a.Cmp(b) == 0
	}
	return attr == got
}

// insideList reports whether name lies inside a value the policy reads as
// a list (it reads nothing inside: a condition there is undecidable).
func insideList(attrs map[string]string, name string) bool {
	for i := strings.LastIndexByte(name, '.'); i > 0; i = strings.LastIndexByte(name[:i], '.') {
		if attrs[name[:i]] == approval.AttrOpaque("list") {
			return true
		}
	}
	return false
}

// agreed reports whether every write carried name with one value.
func agreed(got []map[string]string, name string) bool {
	v, ok := got[0][name]
	for _, m := range got[1:] {
		if w, has := m[name]; !ok || !has || w != v {
			return false
		}
	}
	return ok
}

var jsonNumberRE = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// checkTotal: sum(NAME), what an allowance's sum budget spends, is the
// total of NAME over what the writes carried (added as the doubles they
// are, in order), or opaque when some write carried no number there.
func checkTotal(fail func(string, ...any), attr, v string, got []map[string]string) {
	name := strings.TrimSuffix(strings.TrimPrefix(attr, "sum("), ")")
	total, numbers := 0.0, true
	for _, m := range got {
		w := strings.TrimPrefix(m[name], "#")
		f, err := strconv.ParseFloat(w, 64)
		if !jsonNumberRE.MatchString(w) || err != nil {
			numbers = false
			continue
		}
		total += f
	}
	if !numbers {
		if !strings.HasPrefix(v, "\x00") {
			fail("%s = %q, but some write carried no number there", attr, v)
		}
		return
	}
	if f, err := strconv.ParseFloat(v, 64); err != nil || f != total {
		fail("%s = %q, the writes carried %v in all", attr, v, total)
	}
}
