package approval

import (
	"fmt"
	"maps"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Match selects operations. Empty fields match anything; every field that
// is set must match (they are ANDed). Attrs must all equal the attributes
// the action reported; When conditions must all hold. For "either … or",
// write two routes: the first that matches wins.
type Match struct {
	// Action is an action name ("http.request") or a family ("slack.*").
	Action    string
	Principal string
	// Target is short for the attribute "target" (http.request).
	Target string
	// Tool is short for the attribute "tool" (host.tool_call).
	Tool  string
	Attrs map[string]string
	When  []Condition
}

func (m Match) matches(action, principal string, attrs map[string]string) bool {
	ok, _ := m.Check(action, principal, attrs)
	return ok
}

// Check reports whether the match selects an operation and why: when it
// does not, the first reason; when it does only because a condition could
// not be decided (see Condition), which one (for check-config to explain a
// route).
func (m Match) Check(action, principal string, attrs map[string]string) (bool, string) {
	if m.Action != "" && m.Action != action && !(strings.HasSuffix(m.Action, ".*") && strings.HasPrefix(action, strings.TrimSuffix(m.Action, "*"))) {
		return false, fmt.Sprintf("action is %s, not %s", action, m.Action)
	}
	if m.Principal != "" && m.Principal != principal {
		return false, fmt.Sprintf("principal is %s, not %s", principal, m.Principal)
	}
	if m.Target != "" && attrs["target"] != m.Target {
		return false, fmt.Sprintf("target is %q, not %s", attrs["target"], m.Target)
	}
	if m.Tool != "" && attrs["tool"] != m.Tool {
		return false, fmt.Sprintf("tool is %q, not %s", attrs["tool"], m.Tool)
	}
	var undecided []string
	for _, k := range slices.Sorted(maps.Keys(m.Attrs)) {
		c := Condition{Attr: k, Op: OpEq, Values: []string{m.Attrs[k]}}
		switch verdict, why := c.Eval(attrs); verdict {
		case Fails:
			return false, fmt.Sprintf("%s is %s, not %q", k, describeAttr(attrs, k), m.Attrs[k])
		case Undecidable:
			undecided = append(undecided, fmt.Sprintf("%s=%s cannot be evaluated (%s)", k, m.Attrs[k], why))
		}
	}
	for _, c := range m.When {
		switch verdict, why := c.Eval(attrs); verdict {
		case Fails:
			return false, fmt.Sprintf("%s does not hold (%s)", c, why)
		case Undecidable:
			undecided = append(undecided, fmt.Sprintf("%s cannot be evaluated (%s)", c, why))
		}
	}
	if len(undecided) > 0 {
		return true, "taken because " + strings.Join(undecided, "; ") +
			": a route whose condition cannot be evaluated is taken, so a malformed value lands on the route that guards against it"
	}
	return true, ""
}

func describeAttr(attrs map[string]string, k string) string {
	if v, ok := lookupAttr(attrs, k); ok {
		return DescribeAttrValue(v)
	}
	return "absent"
}

// String renders the match for humans: "action=http.request target=billing
// body.amount > 1000"; "everything" when it is empty.
func (m Match) String() string {
	var parts []string
	if m.Action != "" {
		parts = append(parts, "action="+m.Action)
	}
	if m.Principal != "" {
		parts = append(parts, "principal="+m.Principal)
	}
	if m.Target != "" {
		parts = append(parts, "target="+m.Target)
	}
	if m.Tool != "" {
		parts = append(parts, "tool="+m.Tool)
	}
	for _, k := range slices.Sorted(maps.Keys(m.Attrs)) {
		parts = append(parts, k+"="+m.Attrs[k])
	}
	for _, c := range m.When {
		parts = append(parts, c.String())
	}
	if len(parts) == 0 {
		return "everything"
	}
	return strings.Join(parts, " ")
}

// CondOp is the operator of a route condition.
type CondOp string

// The condition language of routes (match.when in the policy file). Each
// condition names one attribute the action reported (a string) and one
// operator. Attributes are strings; the numeric operators read them as
// numbers written as in JSON (1000, 12.5, 1e3).
//
//	eq, ne        equal / not equal to one value ("ne" holds when absent)
//	in, not_in    one of / none of a list ("not_in" holds when absent)
//	gt, gte,      numeric comparison; fails when the attribute is absent
//	lt, lte
//	present       the attribute is present (present: true) or absent (false)
//	matches       glob (path.Match: *, ?, [a-z]) over the whole value
//
// A condition on an attribute the operation does not have never holds,
// except ne, not_in and absent: a missing amount falls through to the next
// route, as the file reads.
//
// Conditions fail closed. A condition on an attribute that is present but
// cannot be compared is undecidable (Eval): a numeric operator on a value
// that is not a finite JSON number ("5,000", "", "null", true), or any
// operator but present/absent on a list, an object, an over-long string,
// or anything inside a list (AttrOpaque). An undecidable condition counts
// as holding, so the route is taken: the first route that guards against a
// value wins when the value is malformed, and "5,000" or [5000] can never
// pass over a stricter route. Put the stricter route first and match it on
// what makes it strict (a route written the other way round, lenient first
// with lte, would take malformed values on the lenient route).
const (
	OpEq      CondOp = "eq"
	OpNe      CondOp = "ne"
	OpIn      CondOp = "in"
	OpNotIn   CondOp = "not_in"
	OpGt      CondOp = "gt"
	OpGte     CondOp = "gte"
	OpLt      CondOp = "lt"
	OpLte     CondOp = "lte"
	OpPresent CondOp = "present"
	OpAbsent  CondOp = "absent"
	OpMatches CondOp = "matches"
)

// Condition is one test on an operation's attributes.
type Condition struct {
	Attr string
	Op   CondOp
	// Values is the operand of eq, ne, matches (one) and in, not_in (any).
	Values []string
	// Number is the operand of gt, gte, lt, lte.
	Number float64
}

// Validate reports a malformed condition (for the config loader).
func (c Condition) Validate() error {
	if c.Attr == "" {
		return fmt.Errorf("condition needs an attr")
	}
	switch c.Op {
	case OpEq, OpNe:
		if len(c.Values) != 1 {
			return fmt.Errorf("%s on %s takes one value", c.Op, c.Attr)
		}
	case OpIn, OpNotIn:
		if len(c.Values) == 0 {
			return fmt.Errorf("%s on %s needs at least one value", c.Op, c.Attr)
		}
	case OpMatches:
		if len(c.Values) != 1 {
			return fmt.Errorf("matches on %s takes one pattern", c.Attr)
		}
		if _, err := path.Match(c.Values[0], ""); err != nil {
			return fmt.Errorf("matches on %s: bad pattern %q", c.Attr, c.Values[0])
		}
	case OpGt, OpGte, OpLt, OpLte:
		if math.IsNaN(c.Number) || math.IsInf(c.Number, 0) {
			return fmt.Errorf("%s on %s needs a finite number", c.Op, c.Attr)
		}
	case OpPresent, OpAbsent:
	default:
		return fmt.Errorf("unknown operator %q (eq, ne, in, not_in, gt, gte, lt, lte, present, matches)", c.Op)
	}
	return nil
}

// Holds reports whether the condition selects an operation: it holds, or
// it cannot be decided (which takes the route: conditions fail closed).
func (c Condition) Holds(attrs map[string]string) bool {
	v, _ := c.Eval(attrs)
	return v != Fails
}

// String renders the condition: "body.amount > 1000", "method in [PUT DELETE]".
func (c Condition) String() string {
	num := strconv.FormatFloat(c.Number, 'f', -1, 64)
	switch c.Op {
	case OpPresent:
		return c.Attr + " present"
	case OpAbsent:
		return c.Attr + " absent"
	case OpEq:
		return c.Attr + " = " + strconv.Quote(strings.Join(c.Values, ""))
	case OpNe:
		return c.Attr + " != " + strconv.Quote(strings.Join(c.Values, ""))
	case OpIn:
		return c.Attr + " in [" + strings.Join(c.Values, " ") + "]"
	case OpNotIn:
		return c.Attr + " not in [" + strings.Join(c.Values, " ") + "]"
	case OpMatches:
		return c.Attr + " matches " + strconv.Quote(strings.Join(c.Values, ""))
	case OpGt:
		return c.Attr + " > " + num
	case OpGte:
		return c.Attr + " >= " + num
	case OpLt:
		return c.Attr + " < " + num
	case OpLte:
		return c.Attr + " <= " + num
	}
	return c.Attr + " " + string(c.Op) + "?"
}
