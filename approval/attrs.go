package approval

import (
	"encoding/json"
	"fmt"
	"math"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/countersign/countersign/approval/jsonx"
)

// Route attributes are strings. Some values an action sees cannot be read
// as one string: a list, an object, a string too long or with control
// characters. An action reports them with one of the markers below instead
// of leaving them out, because a value left out reads as absent, and an
// absent value lets an operation pass over the route that guards it.
//
// Markers start with a NUL byte, which no attribute an action reports as
// text contains (actions report text with control characters as opaque).

const attrMarker = "\x00"

// AttrObject marks an object whose fields are reported too, as
// "<name>.<field>": a condition on a field reads it, a condition comparing
// the object itself cannot be decided.
const AttrObject = attrMarker + "object"

// AttrOpaque marks a value nothing can be read from (kind says what it is:
// "list", "long string"): a condition on it, or on anything inside it
// ("<name>.<field>"), cannot be decided.
func AttrOpaque(kind string) string { return attrMarker + "opaque " + kind }

// DescribeAttrValue renders an attribute value for explanations: quoted
// text, or what a marker stands for ("an object", "a list").
func DescribeAttrValue(v string) string {
	switch {
	case v == AttrObject:
		return "an object"
	case strings.HasPrefix(v, attrMarker+"opaque "):
		return "a " + strings.TrimPrefix(v, attrMarker+"opaque ")
	case strings.HasPrefix(v, attrMarker):
		return "an unreadable value"
	}
	return strconv.Quote(v)
}

// Attribute names (guarantee 13). Inside, every value an action reports
// is addressed by one JSON Pointer (RFC 6901) into its normalized input;
// people write the dotted name of that pointer, its tokens joined by "."
// ("body.customer.tier" for /body/customer/tier). Input in which two
// values would have the same dotted name (a member "customer.tier" beside
// a member "tier" of "customer") is refused before any action reads it
// (CheckJSONMembers), so in what is accepted a dotted name stands for
// exactly one value, and a member whose name holds dots or slashes is
// addressed by its dotted name as it is ("body.app.example/name" reads the
// member "app.example/name"). A name may also be written as the pointer
// itself, starting with "/" ("/body/app.example~1name"); AttrName turns it
// into the dotted name.

// AttrName is the canonical spelling of an attribute name written in the
// policy file or an allowance: a dotted name as it is, a JSON Pointer as
// its dotted name. Returns an error for a malformed pointer.
func AttrName(s string) (string, error) {
	if !strings.HasPrefix(s, "/") {
		return s, nil
	}
	tokens, err := jsonx.ParsePointer(s)
	if err != nil {
		return "", fmt.Errorf("attribute %q: %w", s, err)
	}
	return jsonx.DottedName(tokens), nil
}

// SumAttr is the attribute under which an action that makes several
// writes in one operation (a bulk) reports the total of the numeric
// attribute name over them: "sum(body.amount)". An allowance's sum budget
// spends it where it is reported, so that one operation writing 90,000
// five times spends 450,000, not 90,000. It is the total as JSON writes a
// number, or opaque when some of the writes hold the attribute as
// something else than a number (the budget then approves nothing).
func SumAttr(name string) string { return "sum(" + name + ")" }

// AttrSet builds an action's attributes by JSON Pointer: each value is set
// once under its pointer's dotted name, and a second value under the same
// name makes that name opaque (a condition on it cannot be decided, so the
// route that guards against it is taken), whatever the order. Input is
// refused before it gets here when that would happen; AttrSet is the
// second line.
type AttrSet struct {
	Attrs map[string]string
	from  map[string]string // dotted name -> pointer that set it
}

// NewAttrSet starts a set holding attrs (names without a pointer of their
// own, such as "target").
func NewAttrSet(attrs map[string]string) *AttrSet {
	return &AttrSet{Attrs: attrs, from: map[string]string{}}
}

// Set reports v for the value at tokens.
func (s *AttrSet) Set(tokens []string, v string) {
	name, ptr := jsonx.DottedName(tokens), jsonx.Pointer(tokens)
	first, seen := s.from[name]
	_, had := s.Attrs[name]
	if (seen && first != ptr) || (!seen && had) {
		s.from[name] = "\x00conflict" // stays opaque whatever comes next
		s.Attrs[name] = AttrOpaque("value that has two names")
		return
	}
	s.from[name] = ptr
	s.Attrs[name] = v
}

// AddJSON reports a decoded JSON value (encoding/json with UseNumber) at
// tokens, and an object's members below it, each by its own pointer: an
// object is AttrObject, a list is opaque (nothing inside it is read), a
// string is TextAttr, a number its JSON text, true/false/null as written.
// Actions whose input holds free-form JSON report it so (http.request's
// body under "body"; an MCP tool call's arguments under "args").
func (s *AttrSet) AddJSON(tokens []string, v any) {
	switch x := v.(type) {
	case map[string]any:
		s.Set(tokens, AttrObject)
		for k, sub := range x {
			s.AddJSON(append(tokens[:len(tokens):len(tokens)], k), sub)
		}
	case []any:
		s.Set(tokens, AttrOpaque("list"))
	case string:
		s.Set(tokens, TextAttr(x))
	case json.Number:
		s.Set(tokens, x.String())
	case bool:
		s.Set(tokens, strconv.FormatBool(x))
	case nil:
		s.Set(tokens, "null")
	default:
		s.Set(tokens, AttrOpaque("value"))
	}
}

// MaxAttrText bounds a text attribute; a longer one is opaque (routes
// match on small facts, not on whole documents).
const MaxAttrText = 256

// TextAttr is s as an attribute: s itself, or opaque when it is longer
// than MaxAttrText or holds control characters.
func TextAttr(s string) string {
	if len(s) > MaxAttrText {
		return AttrOpaque("long string")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return AttrOpaque("string with control characters")
		}
	}
	return s
}

// Verdict is how a condition answers an operation.
type Verdict int

const (
	Fails Verdict = iota
	Holds
	// Undecidable: the attribute is present but of a kind the condition
	// cannot compare (not a number for gt, a list for eq, …). The route is
	// then taken: see Condition.
	Undecidable
)

// jsonNumber is the only spelling numeric conditions read: JSON's. "5,000",
// "0x1388", "Inf", " 5000" and "1_000" are not numbers here, whatever
// strconv or a target may make of them.
var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// lookupAttr finds name in attrs. A name inside an opaque value (an
// ancestor "a" of "a.b" marked AttrOpaque) is unreadable: ok is true and
// the value is that marker.
func lookupAttr(attrs map[string]string, name string) (string, bool) {
	if v, ok := attrs[name]; ok {
		return v, true
	}
	for i := strings.LastIndexByte(name, '.'); i > 0; i = strings.LastIndexByte(name[:i], '.') {
		if v, ok := attrs[name[:i]]; ok && strings.HasPrefix(v, attrMarker) && v != AttrObject {
			return v, true
		}
	}
	return "", false
}

// Eval answers the condition for an operation's attributes, and says why
// when it fails or cannot be decided.
func (c Condition) Eval(attrs map[string]string) (Verdict, string) {
	v, ok := lookupAttr(attrs, c.Attr)
	unreadable := ok && strings.HasPrefix(v, attrMarker)
	why := func() string { return fmt.Sprintf("%s is %s", c.Attr, describeAttr(attrs, c.Attr)) }
	verdict := func(b bool) (Verdict, string) {
		if b {
			return Holds, ""
		}
		return Fails, why()
	}
	switch c.Op {
	case OpPresent:
		return verdict(ok)
	case OpAbsent:
		return verdict(!ok)
	}
	if unreadable {
		return Undecidable, fmt.Sprintf("%s is %s, which %s cannot compare", c.Attr, DescribeAttrValue(v), c.Op)
	}
	switch c.Op {
	case OpEq:
		return verdict(ok && len(c.Values) == 1 && v == c.Values[0])
	case OpNe:
		return verdict(!ok || len(c.Values) != 1 || v != c.Values[0])
	case OpIn:
		return verdict(ok && slices.Contains(c.Values, v))
	case OpNotIn:
		return verdict(!ok || !slices.Contains(c.Values, v))
	case OpMatches:
		if !ok || len(c.Values) != 1 {
			return Fails, why()
		}
		m, err := path.Match(c.Values[0], v)
		return verdict(err == nil && m)
	case OpGt, OpGte, OpLt, OpLte:
		if !ok {
			return Fails, why()
		}
		n, err := strconv.ParseFloat(v, 64)
		if !jsonNumber.MatchString(v) || err != nil || math.IsInf(n, 0) || math.IsNaN(n) {
			return Undecidable, fmt.Sprintf("%s is %s, not a number", c.Attr, DescribeAttrValue(v))
		}
		switch c.Op {
		case OpGt:
			return verdict(n > c.Number)
		case OpGte:
			return verdict(n >= c.Number)
		case OpLt:
			return verdict(n < c.Number)
		default:
			return verdict(n <= c.Number)
		}
	}
	return Fails, "unknown operator " + string(c.Op)
}
