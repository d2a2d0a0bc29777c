package htmlview

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/net/html"
)

// A small CSS cascade: enough of selectors, specificity, !important,
// inline styles and inheritance to tell which text the recipient's mail
// program shows, from the styles the document itself carries (<style>
// rules, style attributes, and the presentational attributes mail HTML
// still uses). Unknown selector parts match (a pseudo-class, :not(…)), so
// that a rule that may apply is taken to apply: a hiding rule that only
// may hide is reported, never missed.

// maxRules bounds the work: a style sheet with more rules than this is
// not evaluated, and the view says so (Hidden, with that reason).
const maxRules = 400

type decl struct {
	prop, val string
	important bool
}

type rule struct {
	sel   []compound // right to left: sel[0] is the subject
	comb  []byte     // comb[i] joins sel[i] to sel[i+1]: ' ', '>', '+', '~'
	spec  int
	order int
	decls []decl
	// pseudo is the pseudo-element (before, after…) the rule styles,
	// whose content property adds text.
	pseudo string
}

type compound struct {
	tag     string
	id      string
	classes []string
	attrs   []attrSel
}

type attrSel struct{ name, op, val string }

// parseSheet reads the rules of a style sheet (comments removed, at-rules
// such as @media and @supports read as if they applied).
func parseSheet(css string, rules *[]rule, order *int) (tooMany bool) {
	return parseRules(css, rules, order, false)
}

// parseRules reads rules; noColors drops the colour declarations (inside
// a dark-scheme media query, where the mail program paints its own dark
// background too, so its colours are not compared with the light one).
func parseRules(css string, rules *[]rule, order *int, noColors bool) (tooMany bool) {
	css = stripComments(css)
	for len(css) > 0 {
		open := strings.IndexByte(css, '{')
		semi := strings.IndexByte(css, ';')
		if open < 0 {
			return false
		}
		prelude := strings.TrimSpace(css[:open])
		if strings.HasPrefix(prelude, "@") && semi >= 0 && semi < open { // @import …; @charset …;
			css = css[semi+1:]
			continue
		}
		end := matching(css, open)
		body := css[open+1 : end]
		if end < len(css) {
			css = css[end+1:]
		} else {
			css = ""
		}
		if strings.HasPrefix(prelude, "@") {
			name := strings.ToLower(strings.Fields(prelude + " ")[0])
			lp := strings.ToLower(prelude)
			switch {
			case name == "@media" && (strings.Contains(lp, "print") || strings.Contains(lp, "speech")) && !strings.Contains(lp, "screen") && !strings.Contains(lp, "all"):
				// Not what a reader sees on screen.
			case name == "@media" || name == "@supports" || name == "@document" || name == "@-moz-document" ||
				name == "@layer" || name == "@container" || name == "@scope":
				dark := noColors || strings.Contains(lp, "prefers-color-scheme") && strings.Contains(lp, "dark")
				if parseRules(body, rules, order, dark) {
					return true
				}
			}
			continue
		}
		decls := parseDecls(body)
		if noColors {
			decls = slices.DeleteFunc(decls, func(d decl) bool {
				return d.prop == "color" || strings.HasPrefix(d.prop, "background") || d.prop == "-webkit-text-fill-color"
			})
		}
		for _, s := range splitTop(prelude, ',') {
			r, ok := parseSelector(s)
			if !ok {
				continue
			}
			*order++
			r.order, r.decls = *order, decls
			*rules = append(*rules, r)
			if len(*rules) > maxRules {
				return true
			}
		}
	}
	return false
}

// unescape resolves CSS escapes (\61 is "a", \: is ":"), as a browser
// does before it reads a name or value.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		j := i + 1
		for j < len(s) && j-i <= 6 && isHex(s[j]) {
			j++
		}
		if j == i+1 {
			b.WriteByte(s[j])
			i = j
			continue
		}
		v, _ := strconv.ParseUint(s[i+1:j], 16, 32)
		if v == 0 || v > 0x10ffff {
			v = 0xfffd
		}
		b.WriteRune(rune(v))
		if j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n') {
			j++
		}
		i = j - 1
	}
	return b.String()
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func stripComments(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "/*")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		j := strings.Index(s[i+2:], "*/")
		if j < 0 {
			return b.String()
		}
		b.WriteByte(' ')
		s = s[i+2+j+2:]
	}
}

// matching is the index of the brace that closes the one at open, or len(s).
func matching(s string, open int) int {
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return len(s)
}

// splitTop splits s at sep outside parentheses, brackets and quotes.
func splitTop(s string, sep byte) []string {
	var out []string
	depth, start := 0, 0
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else if c == '\\' {
				i++
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '(' || c == '[':
			depth++
		case c == ')' || c == ']':
			depth--
		case c == sep && depth == 0:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// parseDecls reads "prop: value !important; …".
func parseDecls(s string) []decl {
	s = unescape(stripComments(s))
	var out []decl
	for _, d := range splitTop(s, ';') {
		i := strings.IndexByte(d, ':')
		if i < 0 {
			continue
		}
		p := strings.ToLower(strings.TrimSpace(d[:i]))
		v := strings.TrimSpace(d[i+1:])
		imp := false
		if j := strings.LastIndexByte(v, '!'); j >= 0 && strings.EqualFold(strings.TrimSpace(v[j+1:]), "important") {
			imp, v = true, strings.TrimSpace(v[:j])
		}
		if p == "" {
			continue
		}
		if p != "content" {
			v = strings.ToLower(v)
		}
		out = append(out, decl{prop: p, val: v, important: imp})
	}
	return out
}

// parseSelector reads one complex selector; ok is false for one that can
// match nothing here (a syntax it does not know at all).
func parseSelector(s string) (rule, bool) {
	s = strings.TrimSpace(s)
	var r rule
	var comps []compound
	var combs []byte
	cur := compound{}
	have := false
	ids, cls, tags := 0, 0, 0
	flush := func() {
		comps = append(comps, cur)
		cur, have = compound{}, false
	}
	pendingComb := byte(0)
	i := 0
	ident := func() string {
		j := i
		for j < len(s) && (isIdent(s[j]) || s[j] == '\\') {
			if s[j] == '\\' {
				j++
			}
			j++
		}
		if j > len(s) {
			j = len(s)
		}
		v := s[i:j]
		i = j
		return strings.ReplaceAll(v, `\`, "")
	}
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			i++
			if have && pendingComb == 0 {
				pendingComb = ' '
			}
			continue
		case c == '>' || c == '+' || c == '~':
			i++
			pendingComb = c
			continue
		}
		if pendingComb != 0 {
			if have {
				flush()
				combs = append(combs, pendingComb)
			}
			pendingComb = 0
		}
		switch {
		case c == '*':
			i++
			have = true
		case c == '#':
			i++
			cur.id = ident()
			ids++
			have = true
		case c == '.':
			i++
			cur.classes = append(cur.classes, ident())
			cls++
			have = true
		case c == '[':
			end := strings.IndexByte(s[i:], ']')
			if end < 0 {
				return r, false
			}
			cur.attrs = append(cur.attrs, parseAttrSel(s[i+1:i+end]))
			i += end + 1
			cls++
			have = true
		case c == ':':
			i++
			el := false
			if i < len(s) && s[i] == ':' {
				i++
				el = true
			}
			name := strings.ToLower(ident())
			if i < len(s) && s[i] == '(' {
				end := matchingParen(s, i)
				i = end + 1
			}
			switch name {
			case "before", "after", "first-line", "first-letter", "marker", "placeholder", "selection":
				el = true
			}
			if el {
				r.pseudo = name
				tags++
			} else {
				cls++
			}
			have = true
		case isIdent(c):
			cur.tag = strings.ToLower(ident())
			tags++
			have = true
		default:
			return r, false
		}
	}
	if !have {
		return r, false
	}
	flush()
	// Store right to left.
	for l, rr := 0, len(comps)-1; l < rr; l, rr = l+1, rr-1 {
		comps[l], comps[rr] = comps[rr], comps[l]
	}
	for l, rr := 0, len(combs)-1; l < rr; l, rr = l+1, rr-1 {
		combs[l], combs[rr] = combs[rr], combs[l]
	}
	r.sel, r.comb = comps, combs
	r.spec = ids*10000 + cls*100 + tags
	return r, true
}

func matchingParen(s string, open int) int {
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return len(s) - 1
}

func isIdent(c byte) bool {
	return c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

func parseAttrSel(s string) attrSel {
	s = strings.TrimSpace(s)
	for _, op := range []string{"~=", "|=", "^=", "$=", "*=", "="} {
		if i := strings.Index(s, op); i >= 0 {
			v := strings.TrimSpace(s[i+len(op):])
			if f := strings.Fields(v); len(f) > 1 && (strings.EqualFold(f[len(f)-1], "i") || strings.EqualFold(f[len(f)-1], "s")) {
				v = strings.TrimSpace(v[:strings.LastIndex(v, f[len(f)-1])])
			}
			v = strings.Trim(v, `"'`)
			return attrSel{name: strings.ToLower(strings.TrimSpace(s[:i])), op: op, val: v}
		}
	}
	return attrSel{name: strings.ToLower(s)}
}

func (c compound) matches(n *html.Node) bool {
	if n.Type != html.ElementNode {
		return false
	}
	if c.tag != "" && c.tag != n.Data {
		return false
	}
	if c.id != "" && attr(n, "id") != c.id {
		return false
	}
	if len(c.classes) > 0 {
		have := strings.Fields(attr(n, "class"))
		for _, want := range c.classes {
			if !contains(have, want) {
				return false
			}
		}
	}
	for _, a := range c.attrs {
		v, ok := attrOK(n, a.name)
		if !ok {
			return false
		}
		switch a.op {
		case "=":
			ok = v == a.val
		case "~=":
			ok = contains(strings.Fields(v), a.val)
		case "|=":
			ok = v == a.val || strings.HasPrefix(v, a.val+"-")
		case "^=":
			ok = strings.HasPrefix(v, a.val)
		case "$=":
			ok = strings.HasSuffix(v, a.val)
		case "*=":
			ok = strings.Contains(v, a.val)
		}
		if !ok {
			return false
		}
	}
	return true
}

// maxSteps bounds the selector matching of one document: descendant and
// sibling combinators over a deep tree can cost a power of its depth.
// Past it nothing more matches and the view says its styles were not
// all evaluated.
const maxSteps = 2_000_000

// steps counts matching work; it is per document (Render is not shared
// between goroutines: each call has its own walker and counter).
type steps struct{ n int }

func (st *steps) exhausted() bool { return st.n > maxSteps }

func (r *rule) matches(n *html.Node, st *steps) bool { return r.matchFrom(0, n, st) }

func (r *rule) matchFrom(i int, n *html.Node, st *steps) bool {
	st.n++
	if st.n > maxSteps || !r.sel[i].matches(n) {
		return false
	}
	if i == len(r.sel)-1 {
		return true
	}
	switch r.comb[i] {
	case '>':
		return r.matchFrom(i+1, parentElement(n), st)
	case ' ':
		for p := parentElement(n); p != nil; p = parentElement(p) {
			if r.matchFrom(i+1, p, st) {
				return true
			}
		}
	case '+':
		return r.matchFrom(i+1, prevElement(n), st)
	case '~':
		for p := prevElement(n); p != nil; p = prevElement(p) {
			if r.matchFrom(i+1, p, st) {
				return true
			}
		}
	}
	return false
}

func parentElement(n *html.Node) *html.Node {
	if n == nil || n.Parent == nil || n.Parent.Type != html.ElementNode {
		return nil
	}
	return n.Parent
}

func prevElement(n *html.Node) *html.Node {
	if n == nil {
		return nil
	}
	for p := n.PrevSibling; p != nil; p = p.PrevSibling {
		if p.Type == html.ElementNode {
			return p
		}
	}
	return nil
}

// ruleIndex finds the rules that may match an element by the id, class
// or tag their subject requires, so that a long style sheet costs little
// per element.
type ruleIndex struct {
	rules                []rule
	byID, byClass, byTag map[string][]int
	any                  []int
	buf                  []int
	steps                steps
}

func newRuleIndex(rules []rule) *ruleIndex {
	ix := &ruleIndex{rules: rules, byID: map[string][]int{}, byClass: map[string][]int{}, byTag: map[string][]int{}}
	for i, r := range rules {
		c := r.sel[0]
		switch {
		case c.id != "":
			ix.byID[c.id] = append(ix.byID[c.id], i)
		case len(c.classes) > 0:
			ix.byClass[c.classes[0]] = append(ix.byClass[c.classes[0]], i)
		case c.tag != "":
			ix.byTag[c.tag] = append(ix.byTag[c.tag], i)
		default:
			ix.any = append(ix.any, i)
		}
	}
	return ix
}

// candidates are the rules that may match n, in sheet order.
func (ix *ruleIndex) candidates(n *html.Node) []int {
	out := append(ix.buf[:0], ix.any...)
	out = append(out, ix.byTag[n.Data]...)
	if id := attr(n, "id"); id != "" {
		out = append(out, ix.byID[id]...)
	}
	for _, c := range strings.Fields(attr(n, "class")) {
		out = append(out, ix.byClass[c]...)
	}
	sort.Ints(out)
	out = slices.Compact(out)
	ix.buf = out
	return out
}

// cascade is the declared value of each property of element n: sheet
// rules by importance, specificity and order, the style attribute above
// the sheet's normal rules and below its important ones.
func cascade(ix *ruleIndex, n *html.Node) map[string]string {
	type cand struct {
		d          decl
		imp, local int
		spec, ord  int
	}
	var cs []cand
	for _, i := range ix.candidates(n) {
		r := &ix.rules[i]
		if r.pseudo != "" || !r.matches(n, &ix.steps) {
			continue
		}
		for _, d := range r.decls {
			cs = append(cs, cand{d: d, imp: b2i(d.important), spec: r.spec, ord: r.order})
		}
	}
	if st, ok := attrOK(n, "style"); ok {
		for _, d := range parseDecls(st) {
			cs = append(cs, cand{d: d, imp: b2i(d.important), local: 1})
		}
	}
	if len(cs) == 0 {
		return nil
	}
	sort.SliceStable(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		if a.imp != b.imp {
			return a.imp < b.imp
		}
		if a.local != b.local {
			return a.local < b.local
		}
		if a.spec != b.spec {
			return a.spec < b.spec
		}
		return a.ord < b.ord
	})
	out := make(map[string]string, len(cs))
	for _, c := range cs {
		for _, p := range expand(c.d) {
			out[p.prop] = p.val
		}
	}
	return out
}

// expand turns the shorthands that matter here into longhands.
func expand(d decl) []decl {
	switch d.prop {
	case "background", "background-image":
		// A colour, or the first colour of a gradient (a gradient of one
		// colour paints like that colour).
		for _, tok := range cssTokens(d.val) {
			if _, ok := parseColor(tok); ok {
				return []decl{{prop: "background-color", val: tok}}
			}
			if strings.Contains(tok, "gradient(") && strings.HasSuffix(tok, ")") {
				for _, arg := range splitTop(tok[strings.IndexByte(tok, '(')+1:len(tok)-1], ',') {
					if c := strings.Fields(arg); len(c) > 0 {
						if _, ok := parseColor(c[0]); ok {
							return []decl{{prop: "background-color", val: c[0]}}
						}
					}
				}
			}
		}
		if d.prop == "background-image" {
			return nil
		}
		return []decl{{prop: "background-color", val: "transparent"}}
	case "inset":
		f := strings.Fields(d.val)
		if len(f) == 0 {
			return nil
		}
		get := func(i int) string {
			switch {
			case i < len(f):
				return f[i]
			case i == 2:
				return f[0]
			case i == 3 && len(f) > 1:
				return f[1]
			}
			return f[0]
		}
		return []decl{{prop: "top", val: get(0)}, {prop: "right", val: get(1)}, {prop: "bottom", val: get(2)}, {prop: "left", val: get(3)}}
	case "margin":
		f := strings.Fields(d.val)
		if len(f) == 0 {
			return nil
		}
		left := f[0]
		if len(f) == 4 {
			left = f[3]
		} else if len(f) >= 2 {
			left = f[1]
		}
		return []decl{{prop: "margin-top", val: f[0]}, {prop: "margin-left", val: left}}
	case "font":
		for _, tok := range strings.Fields(d.val) {
			if _, ok := length(strings.SplitN(tok, "/", 2)[0], 16); ok {
				return []decl{{prop: "font-size", val: strings.SplitN(tok, "/", 2)[0]}}
			}
		}
	case "overflow-x", "overflow-y":
		return []decl{d, {prop: "overflow", val: d.val}}
	}
	return []decl{d}
}

// cssTokens splits a value at blanks outside parentheses.
func cssTokens(s string) []string {
	var out []string
	for _, t := range splitTop(strings.ReplaceAll(strings.ReplaceAll(s, "\t", " "), "\n", " "), ' ') {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// length is a CSS length in px, relative units against em (the element's
// font size in px); ok is false for what is not a length.
func length(s string, em float64) (float64, bool) {
	s = strings.TrimSpace(strings.ToLower(s))
	if s == "0" {
		return 0, true
	}
	units := []struct {
		u string
		f float64
	}{{"px", 1}, {"pt", 4.0 / 3}, {"pc", 16}, {"in", 96}, {"cm", 96 / 2.54}, {"mm", 96 / 25.4}, {"q", 96 / 101.6},
		{"rem", 16}, {"em", em}, {"ex", em / 2}, {"ch", em / 2}, {"vw", 10}, {"vh", 8}, {"vmin", 8}, {"vmax", 10}, {"%", em / 100}}
	for _, u := range units {
		if strings.HasSuffix(s, u.u) {
			v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(s, u.u)), 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return 0, false
			}
			return v * u.f, true
		}
	}
	if strings.HasPrefix(s, "calc(") || strings.HasPrefix(s, "min(") || strings.HasPrefix(s, "max(") || strings.HasPrefix(s, "clamp(") {
		// The most negative (or smallest) length inside: a calc that
		// hides uses one.
		best, found := 0.0, false
		for _, t := range strings.FieldsFunc(s[strings.IndexByte(s, '(')+1:], func(r rune) bool { return r == ' ' || r == ',' || r == '(' || r == ')' }) {
			if v, ok := length(t, em); ok && (!found || math.Abs(v) > math.Abs(best)) {
				best, found = v, true
			}
		}
		return best, found
	}
	return 0, false
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
