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
	for i := range propertyCases {
		g := &gen{rng: rng}
		body := g.value(0, true)
		input := `{"target":"calendar","method":"POST","path":"/events","body":` + body + `}`
		op, _, err := e.svc.Prepare(bg, e.agent, approval.PrepareCall{Action: httpreq.Name, Input: json.RawMessage(input)})
		why := oracle(t, body)
		var ae *approval.Error
		switch {
		case err != nil && errors.As(err, &ae) && ae.Code == approval.CodeInvalidInput && why != "":
			refused++
			continue
		case err != nil:
			t.Fatalf("seed %d case %d: body %s refused (%v), the oracle finds nothing wrong (%q)", seed, i, body, err, why)
		case why != "":
			t.Fatalf("seed %d case %d: body %s accepted, the oracle says %s", seed, i, body, why)
		}
		accepted++
		before := len(e.target.requests())
		if _, err := e.action.Execute(bg, op); err != nil {
			t.Fatalf("seed %d case %d: execute %s: %v", seed, i, body, err)
		}
		reqs := e.target.requests()
		if len(reqs) != before+1 {
			t.Fatalf("seed %d case %d: %d requests reached the target", seed, i, len(reqs)-before)
		}
		sent := reqs[len(reqs)-1].Body
		got := map[string]string{}
		if sent != "" || body != "null" { // a null body is no body
			got = extract(t, []byte(sent))
		}
		for name, v := range op.Attrs {
			if name != "body" && !strings.HasPrefix(name, "body.") {
				continue
			}
			if w, ok := got[name]; !ok || !sameAttr(v, w) {
				t.Fatalf("seed %d case %d: body %s sent %s: the policy read %s = %q, the target got %q (present %v)",
					seed, i, body, sent, name, v, w, ok)
			}
		}
		for name, w := range got {
			if v, ok := op.Attrs[name]; !ok && !insideList(op.Attrs, name) {
				t.Fatalf("seed %d case %d: body %s: the target got %s = %q, the policy read nothing (%q)", seed, i, body, name, w, v)
			}
		}
	}
	t.Logf("seed %d: %d cases, %d accepted and compared with what the target received, %d refused as the oracle says",
		seed, propertyCases, accepted, refused)
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
