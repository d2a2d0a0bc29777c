package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Allowances (SPEC §10), against approval fatigue: a human approves, once,
// a bounded envelope — an action, a match on its attributes, a budget of
// operations and/or of a sum, and a time to live. It is an operation like
// any other (action allowance.grant), approved through the same channels.
// Once it has run (it is then active), the principal's matching operations
// are approved by it when sent, and the budget is spent in the same store
// step as that approval, so replicas sending at once never overspend it.
// Any approver of its route may revoke it; spent or expired, the next
// operations go to humans again.

// GrantAction is the action name of an allowance.
const GrantAction = "allowance.grant"

// MaxAllowanceTTL bounds how long an allowance lives (SPEC §10).
const MaxAllowanceTTL = 7 * 24 * time.Hour

// AllowanceInput is an allowance's normalized input: what the human
// approves and what is hashed.
type AllowanceInput struct {
	Action     string           `json:"action"`
	Match      map[string]Limit `json:"match"`
	Budget     Budget           `json:"budget"`
	TTLSeconds int64            `json:"ttl_seconds"`
	Reason     string           `json:"reason"`
}

// Limit is what one attribute of a matching operation must be: one of In
// (every element, for a list attribute such as domains), and/or within
// Min and Max.
type Limit struct {
	In  []string `json:"in,omitempty"`
	Min *float64 `json:"min,omitempty"`
	Max *float64 `json:"max,omitempty"`
}

// Budget is what an allowance may approve in all: Count operations and/or
// a Sum of one numeric attribute.
type Budget struct {
	Count int        `json:"count,omitempty"`
	Sum   *SumBudget `json:"sum,omitempty"`
}

// SumBudget bounds the total of an attribute (e.g. body.amount).
type SumBudget struct {
	Attr string  `json:"attr"`
	Max  float64 `json:"max"`
}

// Allowance is an active allowance as the store keeps it.
type Allowance struct {
	ID        string // the key of its allowance.grant operation
	Principal string
	Input     AllowanceInput
	Until     time.Time
	// CountLeft and SumLeft are what is left of the budget (when bounded).
	CountLeft *int
	SumLeft   *float64
	Revoked   bool
}

// Spend is what approving one operation takes from an allowance.
type Spend struct {
	Allowance string
	Amount    float64 // of the sum budget; 0 without one
}

// grantAction is the allowance.grant action: its Prepare checks the
// envelope and renders it in plain words; its Execute activates it.
type grantAction struct{ s *Service }

func (g grantAction) Name() string { return GrantAction }

// rawAllowance is an agent's request as accepted on the wire.
type rawAllowance struct {
	Action string                     `json:"action"`
	Match  map[string]json.RawMessage `json:"match"`
	Budget Budget                     `json:"budget"`
	TTL    json.RawMessage            `json:"ttl"`
	Reason string                     `json:"reason"`
}

// Prepare validates an allowance request. Returns invalid_input,
// insufficient_scope (an allowance for an action the principal may not
// prepare) and policy_denied (rule allowance_not_honoured: no route would
// let it approve anything).
func (g grantAction) Prepare(_ context.Context, req PrepareRequest) (*Prepared, error) {
	var raw rawAllowance
	dec := json.NewDecoder(bytes.NewReader(req.Input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return nil, FieldErrors{{Field: "input", Reason: "must be {action, match, budget, ttl, reason}: " + strings.TrimPrefix(err.Error(), "json: ")}}.Err()
	}
	var fe FieldErrors
	in := AllowanceInput{Action: raw.Action, Match: map[string]Limit{}, Budget: raw.Budget, Reason: strings.TrimSpace(raw.Reason)}
	switch _, known := g.s.actions[raw.Action]; {
	case raw.Action == "":
		fe.Add("action", "required: the action the allowance approves (e.g. email.send)")
	case raw.Action == GrantAction:
		fe.Add("action", "an allowance cannot grant allowances")
	case !known:
		fe.Add("action", "no such action %q", raw.Action)
	case !req.Principal.AllowsAction(raw.Action):
		return nil, Errorf(CodeInsufficientScope, "principal %s may not prepare %s, so no allowance for it", req.Principal.ID, raw.Action)
	}
	if len(raw.Match) > 20 {
		fe.Add("match", "at most 20 attributes")
	}
	for _, written := range slices.Sorted(mapsKeys(raw.Match)) {
		b, err := parseLimit(raw.Match[written])
		attr, nerr := AttrName(written) // a JSON Pointer is matched as its dotted name
		_, twice := in.Match[attr]
		switch {
		case written == "" || len(written) > 100 || hasControl(written):
			fe.Add("match", "attribute names are 1-100 characters, without control characters")
		case nerr != nil:
			fe.Add("match."+written, "%v", nerr)
		case twice:
			fe.Add("match."+written, "names the attribute %s a second time", attr)
		case err != nil:
			fe.Add("match."+written, "%v", err)
		default:
			in.Match[attr] = b
		}
	}
	if in.Budget.Count < 0 || in.Budget.Count > 10000 {
		fe.Add("budget.count", "must be between 1 and 10000")
	}
	if s := in.Budget.Sum; s != nil && (s.Attr == "" || len(s.Attr) > 100 || hasControl(s.Attr) || !(s.Max > 0) || math.IsInf(s.Max, 0)) {
		fe.Add("budget.sum", "needs an attr (1-100 characters, without control characters) and a positive max")
	} else if s != nil {
		name, err := AttrName(s.Attr)
		if err != nil {
			fe.Add("budget.sum.attr", "%v", err)
		}
		in.Budget.Sum = &SumBudget{Attr: name, Max: s.Max}
	}
	if in.Budget.Count == 0 && in.Budget.Sum == nil {
		fe.Add("budget", "set count and/or sum: an allowance without a budget is not bounded")
	}
	ttl, err := parseTTL(raw.TTL)
	if err != nil {
		fe.Add("ttl", "%v", err)
	}
	in.TTLSeconds = int64(ttl / time.Second)
	if n := len(in.Reason); n == 0 || n > 2000 {
		fe.Add("reason", "required, at most 2000 characters: the human reads why")
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	partly, err := g.s.checkHonoured(req.Principal, in)
	if err != nil {
		return nil, err
	}
	attrs := map[string]string{"action": GrantAction, "allowed_action": in.Action}
	scope := in.Action // the principal needs the scope of what it asks to do unasked
	if b, ok := in.Match["target"]; ok && len(b.In) == 1 {
		attrs["target"] = b.In[0]
		scope += ":" + b.In[0]
	}
	pv := allowancePreview(req.Principal.ID, in)
	if partly != "" {
		pv.Summary += " " + partly
		pv.Warnings = append(pv.Warnings, partly)
	}
	return &Prepared{Input: in, Preview: pv, Scope: scope, Attrs: attrs}, nil
}

func parseLimit(v json.RawMessage) (Limit, error) {
	var list []string
	if json.Unmarshal(v, &list) == nil {
		if len(list) == 0 || len(list) > 100 {
			return Limit{}, fmt.Errorf("list 1-100 allowed values")
		}
		return checkedLimit(Limit{In: slices.Sorted(slices.Values(list))})
	}
	var one string
	if json.Unmarshal(v, &one) == nil {
		return checkedLimit(Limit{In: []string{one}})
	}
	var b Limit
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil || (b.In == nil && b.Min == nil && b.Max == nil) {
		return Limit{}, fmt.Errorf(`must be a list of allowed values, or {"in": [...], "min": n, "max": n}`)
	}
	slices.Sort(b.In)
	return checkedLimit(b)
}

// checkedLimit refuses allowed values with control characters. Actions
// report an object, a list or an unreadable string as a NUL-led marker
// (attrs.go), and text with control characters as such a marker too: an
// allowed value spelled like one would allow whatever it stands for.
func checkedLimit(b Limit) (Limit, error) {
	for _, v := range b.In {
		if hasControl(v) {
			return Limit{}, fmt.Errorf("allowed values may not hold control characters (%q)", v)
		}
	}
	return b, nil
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}

func parseTTL(v json.RawMessage) (time.Duration, error) {
	var d time.Duration
	var secs float64
	var s string
	switch {
	case json.Unmarshal(v, &secs) == nil:
		d = time.Duration(secs * float64(time.Second))
	case json.Unmarshal(v, &s) == nil:
		if days, ok := strings.CutSuffix(s, "d"); ok {
			n, err := strconv.Atoi(days)
			if err != nil {
				return 0, fmt.Errorf("%q is not a duration (e.g. 3d, 72h, 30m)", s)
			}
			d = time.Duration(n) * 24 * time.Hour
		} else {
			var err error
			if d, err = time.ParseDuration(s); err != nil {
				return 0, fmt.Errorf("%q is not a duration (e.g. 3d, 72h, 30m)", s)
			}
		}
	default:
		return 0, fmt.Errorf("required: a duration such as 72h or 3d, or seconds")
	}
	if d < time.Minute || d > MaxAllowanceTTL {
		return 0, fmt.Errorf("must be between 1 minute and 7 days")
	}
	return d, nil
}

// allowancePreview says in plain words what the allowance lets the agent
// do without asking.
func allowancePreview(principal string, in AllowanceInput) Preview {
	what := map[string]string{"email.send": "emails", "slack.post_message": "Slack messages",
		"http.request": "HTTP writes", "slack.delete_message": "Slack message deletions"}[in.Action]
	if what == "" {
		what = in.Action + " operations"
	}
	var cond []string
	for _, attr := range slices.Sorted(mapsKeys(in.Match)) {
		b := in.Match[attr]
		var parts []string
		if len(b.In) > 0 {
			switch attr {
			case "domains":
				parts = append(parts, "to people at "+strings.Join(b.In, " or "))
			case "target":
				parts = append(parts, "to "+strings.Join(b.In, " or "))
			default:
				parts = append(parts, attr+" in "+strings.Join(b.In, ", "))
			}
		}
		if b.Min != nil {
			parts = append(parts, fmt.Sprintf("%s at least %s", attr, num(*b.Min)))
		}
		if b.Max != nil {
			parts = append(parts, fmt.Sprintf("%s at most %s", attr, num(*b.Max)))
		}
		cond = append(cond, strings.Join(parts, " and "))
	}
	var budget []string
	if in.Budget.Count > 0 {
		budget = append(budget, fmt.Sprintf("up to %d %s", in.Budget.Count, what))
	} else {
		budget = append(budget, "any number of "+what)
	}
	if s := in.Budget.Sum; s != nil {
		budget = append(budget, fmt.Sprintf("%s totalling at most %s", s.Attr, num(s.Max)))
	}
	ttl := time.Duration(in.TTLSeconds) * time.Second
	sentence := "Lets agent " + principal + " carry out " + strings.Join(budget, ", ")
	if len(cond) > 0 {
		sentence += " " + strings.Join(cond, ", ")
	}
	sentence += ", without asking anyone, for " + humanDuration(ttl) + " after it is approved."
	p := Preview{Title: "Allow " + principal + ": " + strings.Join(budget, ", ") + " without asking", Summary: sentence,
		Warnings: []string{"standing approval: operations that match are approved without a person seeing them"}}
	if s := in.Budget.Sum; s != nil && in.Budget.Count == 0 {
		// The sum bounds amounts, not how many: zero costs nothing.
		p.Warnings = append(p.Warnings, fmt.Sprintf("No limit on how many: every matching operation whose %s is 0 "+
			"(or too small to add up) is approved, however many there are.", s.Attr))
	}
	add := func(name, label, value string) {
		p.Fields = append(p.Fields, Field{Name: name, Label: label, Value: value})
	}
	add("action", "Action", in.Action)
	for i, c := range cond {
		add("match."+strconv.Itoa(i), "Only", c)
	}
	add("budget", "Budget", strings.Join(budget, ", "))
	add("ttl", "For", humanDuration(ttl))
	add("reason", "Why (the agent's words)", in.Reason)
	return p
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func humanDuration(d time.Duration) string {
	switch {
	case d >= 48*time.Hour && d%(24*time.Hour) == 0:
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	case d >= 2*time.Hour:
		return fmt.Sprintf("%d hours", int(d.Hours()))
	}
	return fmt.Sprintf("%d minutes", int(d.Minutes()))
}

// Execute activates the allowance: from now until its TTL ends, the
// principal's matching operations are approved by it.
func (g grantAction) Execute(ctx context.Context, op *Operation) (json.RawMessage, error) {
	var in AllowanceInput
	if err := json.Unmarshal(op.Input, &in); err != nil {
		return nil, &ExecError{Code: CodeExecutionFailed, Message: "the stored allowance is unreadable; it was not activated"}
	}
	a := Allowance{ID: op.Key, Principal: op.Principal, Input: in, Until: g.s.now().UTC().Add(time.Duration(in.TTLSeconds) * time.Second)}
	if in.Budget.Count > 0 {
		n := in.Budget.Count
		a.CountLeft = &n
	}
	if s := in.Budget.Sum; s != nil {
		m := s.Max
		a.SumLeft = &m
	}
	if err := g.s.store.AddAllowance(ctx, a); err != nil {
		// Not activated: nothing was approved by it. The store said so, or
		// could not say; either way nothing outside countersign happened.
		return nil, &ExecError{Code: CodeExecutionFailed, Message: "the allowance could not be activated: " + SafeError(err)}
	}
	return json.Marshal(map[string]any{"allowance": op.Key, "active_until": a.Until, "budget": in.Budget})
}

// listAttrs are the attributes actions report as a comma-separated list
// (email.send's domains): an allowance's In holds for them when every
// element is in it. Any other value is one value, matched whole, so that
// "weekly,monthly" never passes for two allowed values.
var listAttrs = map[string]bool{"domains": true}
