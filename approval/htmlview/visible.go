package htmlview

import (
	"math"
	"strconv"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// look is what the styles in force say about the text of an element, as
// the recipient's program would paint it.
type look struct {
	// hidden names why nothing inside is seen ("display:none"), or "".
	hidden string
	// visHidden is visibility:hidden, inherited and undone by visible.
	visHidden bool
	color     rgba // the text colour (inherited)
	bg        rgba // the opaque backdrop painted behind the text
	fontPx    float64
	opacity   float64
	// fillTransparent: -webkit-text-fill-color makes glyphs transparent.
	fillTransparent bool
}

func rootLook() look { return look{color: black, bg: white, fontPx: 16, opacity: 1} }

// minReadable: below these, text is not read by anyone.
const (
	minFontPx   = 4    // px
	minOpacity  = 0.1  // of the text, all layers together
	minContrast = 1.5  // WCAG ratio against the backdrop (1 = same colour)
	offscreenPx = 200  // a negative offset this large moves text out of view
	farPx       = 4000 // a positive one this large moves it far away
)

// child computes the look of element n under parent look p, from its
// cascaded properties and presentational attributes.
func child(p look, n *html.Node, props map[string]string) look {
	l := p
	get := func(k string) string { return props[k] }
	hide := func(why string) {
		if l.hidden == "" {
			l.hidden = why
		}
	}
	if _, ok := attrOK(n, "hidden"); ok && get("display") == "" {
		hide("the hidden attribute")
	}
	switch n.DataAtom {
	case atom.Dialog:
		if _, open := attrOK(n, "open"); !open {
			hide("a closed <dialog>")
		}
	case atom.Font:
		if c, ok := parseColor(attr(n, "color")); ok {
			l.color = c
		}
		if sz := attr(n, "size"); sz != "" {
			if v, err := strconv.Atoi(strings.TrimPrefix(sz, "+")); err == nil && v <= 0 && !strings.HasPrefix(sz, "+") && !strings.HasPrefix(sz, "-") {
				l.fontPx = 10
			}
		}
	case atom.Body:
		if c, ok := parseColor(attr(n, "text")); ok {
			l.color = c
		}
	}
	if c, ok := parseColor(attr(n, "bgcolor")); ok {
		l.bg = over(c, l.bg)
	}
	if p.hidden == "" && n.Parent != nil && n.Parent.DataAtom == atom.Details && n.DataAtom != atom.Summary {
		if _, open := attrOK(n.Parent, "open"); !open {
			hide("a closed <details>")
		}
	}
	if len(props) == 0 {
		return l
	}
	if v := get("display"); v == "none" {
		hide("display:none")
	}
	switch get("visibility") {
	case "hidden", "collapse":
		l.visHidden = true
	case "visible":
		l.visHidden = false
	}
	if get("mso-hide") == "all" {
		hide("mso-hide:all")
	}
	if v := get("content-visibility"); v == "hidden" {
		hide("content-visibility:hidden")
	}
	if v, ok := ratio(get("opacity")); ok {
		l.opacity *= v
	}
	for _, f := range funcs(get("filter")) {
		if f.name == "opacity" && len(f.args) > 0 {
			if v, ok := ratio(f.args[0]); ok {
				l.opacity *= v
			}
		}
		if f.name == "alpha" && len(f.args) > 0 { // alpha(opacity=0)
			if v, err := strconv.ParseFloat(strings.TrimPrefix(f.args[0], "opacity="), 64); err == nil {
				l.opacity *= v / 100
			}
		}
		if f.name == "blur" && len(f.args) > 0 {
			if v, ok := length(f.args[0], l.fontPx); ok && v >= l.fontPx/2 {
				hide("blurred (filter:blur)")
			}
		}
	}
	if l.opacity < minOpacity {
		hide("opacity")
	}
	if v := get("font-size"); v != "" {
		l.fontPx = fontSize(v, p.fontPx)
	}
	if v := get("color"); v != "" {
		if c, ok := parseColor(v); ok {
			l.color = c
		} else if v == "inherit" {
			l.color = p.color
		}
	}
	if v := get("-webkit-text-fill-color"); v != "" {
		if c, ok := parseColor(v); ok {
			l.fillTransparent = c.a < minOpacity
			if !l.fillTransparent {
				l.color = c
			}
		}
	}
	if v := get("background-color"); v != "" {
		if c, ok := parseColor(v); ok {
			l.bg = over(c, p.bg)
		}
	}
	// Out of view: positioned, shifted, indented or transformed away.
	pos := get("position")
	if pos == "absolute" || pos == "fixed" || pos == "relative" || pos == "sticky" {
		for _, k := range []string{"left", "top", "right", "bottom"} {
			if v, ok := offset(get(k), l.fontPx); ok && (v <= -offscreenPx || v >= farPx) {
				hide("positioned out of view (" + k + ")")
			}
		}
	}
	for _, k := range []string{"margin-left", "margin-top", "text-indent", "margin-right", "translate"} {
		if v, ok := offset(strings.Fields(get(k) + " 0")[0], l.fontPx); ok && (v <= -offscreenPx || (k != "text-indent" && v >= farPx)) {
			hide("moved out of view (" + k + ")")
		}
	}
	if ls, ok := length(get("letter-spacing"), l.fontPx); ok && ls <= -l.fontPx/2 {
		hide("letters squeezed together (letter-spacing)")
	}
	if sc := get("scale"); sc != "" {
		for _, t := range strings.Fields(sc) {
			if v, ok := ratio(t); ok && math.Abs(v) < 0.1 {
				hide("scaled to nothing (scale)")
			}
		}
	}
	if get("zoom") != "" {
		if v, ok := ratio(get("zoom")); ok && v < 0.25 {
			hide("zoomed to nothing (zoom)")
		}
	}
	transform(get("transform"), l.fontPx, hide)
	// Clipped away.
	if c := get("clip"); strings.HasPrefix(c, "rect(") && (pos == "absolute" || pos == "fixed") {
		if zeroArea(c, l.fontPx) {
			hide("clipped (clip)")
		}
	}
	if c := get("clip-path"); c != "" {
		for _, f := range funcs(c) {
			switch f.name {
			case "inset":
				if v, ok := lengthPct(strings.Join(f.args[:min(1, len(f.args))], ""), l.fontPx, 2*offscreenPx); ok && v >= offscreenPx {
					hide("clipped (clip-path)")
				}
			case "circle", "ellipse":
				if len(f.args) > 0 {
					if v, ok := length(f.args[0], l.fontPx); ok && v < 1 {
						hide("clipped (clip-path)")
					}
				}
			case "polygon", "rect", "xywh":
				if zeroArea(c, l.fontPx) {
					hide("clipped (clip-path)")
				}
			}
		}
	}
	// A box too small to show its text, cutting off what overflows.
	ov := get("overflow")
	if ov == "hidden" || ov == "clip" || ov == "scroll" || ov == "auto" || get("text-overflow") != "" && ov != "" {
		for _, k := range []string{"width", "height", "max-width", "max-height"} {
			if v, ok := length(get(k), l.fontPx); ok && v <= 1 {
				hide("in a box too small to show it (" + k + ")")
			}
		}
		// Indented past its own right edge (the "text-indent: 100%" way).
		if v, ok := offset(get("text-indent"), l.fontPx); ok && v >= 500 {
			hide("indented out of its box (text-indent)")
		}
		if lh, ok := length(get("line-height"), l.fontPx); ok && lh <= 1 {
			if h, ok := length(get("height"), l.fontPx); ok && h <= l.fontPx/2 {
				hide("in a box too small to show it (line-height)")
			}
		}
	}
	if v, ok := length(get("max-height"), l.fontPx); ok && v <= 0 && ov == "" {
		// Most mail programs clip max-height:0 boxes (the usual way to hide
		// a part from all but some clients): taken as hidden.
		hide("in a box of no height (max-height)")
	}
	return l
}

// visible says whether text painted with look l is seen, or why not.
func (l look) why() string {
	switch {
	case l.hidden != "":
		return l.hidden
	case l.visHidden:
		return "visibility:hidden"
	case l.fontPx < minFontPx:
		return "a font too small to read"
	case l.fillTransparent || l.color.a*l.opacity < minOpacity:
		return "transparent text"
	case contrast(over(l.color, l.bg), l.bg) < minContrast:
		return "text coloured like its background"
	}
	return ""
}

type cssFunc struct {
	name string
	args []string
}

// funcs reads "name(args) name(args)…".
func funcs(s string) []cssFunc {
	var out []cssFunc
	for _, t := range cssTokens(s) {
		open := strings.IndexByte(t, '(')
		if open <= 0 || !strings.HasSuffix(t, ")") {
			continue
		}
		args := strings.FieldsFunc(t[open+1:len(t)-1], func(r rune) bool { return r == ',' || r == ' ' })
		out = append(out, cssFunc{name: strings.TrimSpace(t[:open]), args: args})
	}
	return out
}

// transform reports a transform that scales text to nothing or moves it out of view.
func transform(s string, em float64, hide func(string)) {
	for _, f := range funcs(s) {
		var nums []float64
		for _, a := range f.args {
			v, err := strconv.ParseFloat(a, 64)
			if err != nil {
				v = math.NaN()
			}
			nums = append(nums, v)
		}
		switch f.name {
		case "scale", "scalex", "scaley", "scale3d":
			for _, v := range nums {
				if !math.IsNaN(v) && math.Abs(v) < 0.1 {
					hide("scaled to nothing (transform)")
				}
			}
		case "matrix":
			if len(nums) == 6 && math.Abs(nums[0]*nums[3]-nums[1]*nums[2]) < 0.01 {
				hide("scaled to nothing (transform)")
			}
			if len(nums) == 6 && (nums[4] <= -offscreenPx || nums[5] <= -offscreenPx) {
				hide("moved out of view (transform)")
			}
		case "translate", "translatex", "translatey", "translate3d":
			for _, a := range f.args {
				if v, ok := offset(a, em); ok && (v <= -offscreenPx || v >= farPx) {
					hide("moved out of view (transform)")
				}
			}
		case "rotatex", "rotatey":
			if len(f.args) > 0 {
				if d, err := strconv.ParseFloat(strings.TrimSuffix(f.args[0], "deg"), 64); err == nil && math.Abs(math.Mod(d, 180)) == 90 {
					hide("turned edge-on (transform)")
				}
			}
		}
	}
}

// zeroArea reports whether a rect()/polygon() clip leaves no area: all
// its lengths are within 1px of each other.
func zeroArea(s string, em float64) bool {
	var vs []float64
	for _, t := range strings.FieldsFunc(s, func(r rune) bool { return r == '(' || r == ')' || r == ',' || r == ' ' }) {
		if v, ok := length(t, em); ok {
			vs = append(vs, v)
		} else if t == "auto" {
			return false
		}
	}
	if len(vs) < 2 {
		return false
	}
	lo, hi := vs[0], vs[0]
	for _, v := range vs {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	return hi-lo <= 1
}

// offset is a length for left/top/margins, a percentage taken of a 600 px
// wide message.
func offset(s string, em float64) (float64, bool) { return lengthPct(s, em, 600) }

func lengthPct(s string, em, base float64) (float64, bool) {
	s = strings.TrimSpace(s)
	if strings.HasSuffix(s, "%") {
		v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
		return v * base / 100, err == nil
	}
	return length(s, em)
}

// ratio reads a number or percentage (opacity, scale).
func ratio(s string) (float64, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	if strings.HasSuffix(s, "%") {
		v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
		return v / 100, err == nil
	}
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil && !math.IsNaN(v)
}

// fontSize computes a font-size value against the parent's size in px.
func fontSize(v string, parent float64) float64 {
	switch v {
	case "xx-small":
		return 9
	case "x-small":
		return 10
	case "small":
		return 13
	case "medium":
		return 16
	case "large":
		return 18
	case "x-large":
		return 24
	case "xx-large":
		return 32
	case "xxx-large":
		return 48
	case "smaller":
		return parent / 1.2
	case "larger":
		return parent * 1.2
	case "inherit", "initial", "unset":
		return parent
	}
	if strings.HasSuffix(v, "%") {
		if r, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64); err == nil {
			return parent * r / 100
		}
		return parent
	}
	if px, ok := length(v, parent); ok {
		return px
	}
	return parent
}
