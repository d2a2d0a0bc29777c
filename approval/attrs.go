package approval

import (
	"fmt"
	"math"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
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
