// Package htmlview shows the HTML part of an email the way its recipient
// will read it, without anything that could act on the approver: a
// sanitized document (no scripts, no styles, no remote loads, no forms)
// for a sandboxed frame, its visible text for channels that cannot show
// HTML, every link with its real target, every remote resource it would
// load, and whether its words differ from the text part.
package htmlview

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/microcosm-cc/bluemonday"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// View is the HTML part as an approver sees it.
type View struct {
	// Doc is a complete, sanitized HTML document for a sandboxed frame.
	// Links are inert and numbered ("… [1]"), images are replaced by
	// "[image 1: alt]", so nothing in it loads or navigates.
	Doc string
	// Text is what a reader sees of it, block by block, with the same
	// link and image markers.
	Text string
	// Words is Text without the markers, for comparing with the text part.
	Words string
	// Links are the link targets in document order, as written.
	Links []Link
	// Remote are the remote resources the recipient's mail program may
	// load (images, backgrounds, style sheets): tracking, or text in
	// pictures that no one here sees.
	Remote []string
	// Hidden says some of its text is hidden by styling from the
	// recipient (display:none, text coloured like its background, moved
	// out of view, too small, clipped…), as a cascade of the document's
	// own styles computes it; such text is shown in Doc and Text marked
	// "[hidden: …]", and left out of Words.
	Hidden bool
	// HiddenText lists the hidden runs of text (the first MaxHidden), each
	// with why it is hidden.
	HiddenText []Hidden
	// Unshown lists text that some mail programs show and the sanitized
	// document does not (conditional comments for Outlook, SVG and MathML
	// text, form controls, text that styles add with content:).
	Unshown []string
	// Lines estimates how many lines Doc takes at phone width, so a frame
	// can be sized to show it whole without a script.
	Lines int
}

// Hidden is a run of text the recipient does not see, and why.
type Hidden struct {
	Text, Why string
}

// Link is one link of the HTML part.
type Link struct {
	N    int
	Text string
	Href string
}

// Bounds keep the lists short whatever the input: every link is marked in
// the document, but only the first ones are listed separately.
const (
	MaxLinks  = 200
	MaxRemote = 50
	MaxHidden = 10
)

var policy = func() *bluemonday.Policy {
	p := bluemonday.NewPolicy()
	p.AllowElements("p", "br", "div", "span", "b", "strong", "i", "em", "u", "s", "strike", "del", "ins",
		"sub", "sup", "small", "big", "mark", "blockquote", "pre", "code", "tt", "kbd", "samp", "q", "cite", "abbr",
		"h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "dl", "dt", "dd", "hr", "center", "font", "address",
		"table", "thead", "tbody", "tfoot", "tr", "td", "th", "caption", "section", "article", "header", "footer", "main")
	p.AllowAttrs("colspan", "rowspan").Matching(regexp.MustCompile(`^[0-9]{1,3}$`)).OnElements("td", "th")
	p.AddSpaceWhenStrippingTag(true)
	return p
}()

// skipped elements hold nothing a reader sees.
var skipped = map[atom.Atom]bool{atom.Script: true, atom.Style: true, atom.Head: true, atom.Title: true,
	atom.Template: true, atom.Noscript: true, atom.Iframe: true, atom.Object: true, atom.Embed: true,
	atom.Noframes: true, atom.Svg: true, atom.Math: true, atom.Select: true, atom.Textarea: true}

var blocks = map[atom.Atom]bool{atom.P: true, atom.Div: true, atom.Br: true, atom.Li: true, atom.Tr: true,
	atom.H1: true, atom.H2: true, atom.H3: true, atom.H4: true, atom.H5: true, atom.H6: true, atom.Table: true,
	atom.Blockquote: true, atom.Pre: true, atom.Hr: true, atom.Dt: true, atom.Dd: true, atom.Ul: true, atom.Ol: true,
	atom.Section: true, atom.Article: true, atom.Header: true, atom.Footer: true, atom.Center: true, atom.Address: true}

var (
	cssURL    = regexp.MustCompile(`(?i)url\(\s*['"]?([^'")\s]+)`)
	cssImport = regexp.MustCompile(`(?i)@import\s+['"]([^'"]+)`)
)

// Render builds the view of an HTML part.
func Render(src string) View {
	var v View
	root, err := html.Parse(strings.NewReader(src))
	if err != nil { // x/net/html only fails on read errors
		root = &html.Node{Type: html.DocumentNode}
	}
	w := &walker{v: &v}
	w.scan(root)
	if w.remoteSheet {
		v.Hidden = true
		v.HiddenText = append(v.HiddenText, Hidden{Why: "it loads a remote style sheet, which can hide or change any of its text; what it hides is not known here"})
	}
	if w.tooMany {
		v.Hidden = true
		v.HiddenText = append(v.HiddenText, Hidden{Why: "its style sheet has more rules than are evaluated here, so what it hides is not known"})
	}
	w.pseudoContent(root)
	w.walk(root, rootLook())
	if (w.index != nil && w.index.steps.exhausted()) || w.pseudoSteps.exhausted() {
		v.Hidden = true
		v.HiddenText = append(v.HiddenText, Hidden{Why: "its style sheet is too complex to evaluate here, so what it hides is not known"})
	}
	v.Text = tidy(w.text.String())
	v.Words = tidy(w.words.String())

	var b bytes.Buffer
	if err := html.Render(&b, root); err != nil {
		b.Reset()
	}
	v.Doc = "<!doctype html><html><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"></head><body>" +
		policy.Sanitize(b.String()) + "</body></html>"
	for _, line := range strings.Split(v.Text, "\n") {
		v.Lines += 1 + utf8.RuneCountInString(line)/38
	}
	return v
}

type walker struct {
	v            *View
	text, words  strings.Builder
	links, image int
	rules        []rule
	order        int
	tooMany      bool
	remoteSheet  bool
	index        *ruleIndex
	pseudoSteps  steps
}

// hidden records a run of text the recipient does not see.
func (w *walker) hidden(text, why string) {
	w.v.Hidden = true
	if len(w.v.HiddenText) < MaxHidden {
		w.v.HiddenText = append(w.v.HiddenText, Hidden{Text: clip(text, 120), Why: why})
	}
}

// unshown records text that some programs show and the document here does not.
func (w *walker) unshown(text, where string) {
	text = strings.Join(strings.Fields(text), " ")
	if text == "" || len(w.v.Unshown) >= MaxHidden {
		return
	}
	w.v.Unshown = append(w.v.Unshown, "“"+clip(text, 120)+"” ("+where+")")
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// pseudoContent finds text that style rules add before or after elements
// (content: "…"), which the sanitized document does not show.
func (w *walker) pseudoContent(root *html.Node) {
	var rs []*rule
	for i := range w.rules {
		r := &w.rules[i]
		if r.pseudo == "" {
			continue
		}
		for _, d := range r.decls {
			if d.prop == "content" && strings.ContainsAny(d.val, `"'`) {
				rs = append(rs, r)
				break
			}
		}
	}
	if len(rs) == 0 {
		return
	}
	var f func(*html.Node)
	f = func(n *html.Node) {
		if n.Type == html.ElementNode {
			for _, r := range rs {
				if r.matches(n, &w.pseudoSteps) {
					for _, d := range r.decls {
						if d.prop == "content" {
							w.unshown(strings.Trim(d.val, `"' `), "text added by a style rule")
						}
					}
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			f(c)
		}
	}
	f(root)
}

func (w *walker) remote(u string) {
	u = strings.TrimSpace(u)
	lu := strings.ToLower(u)
	if u == "" || strings.HasPrefix(lu, "data:") || strings.HasPrefix(lu, "cid:") || strings.HasPrefix(lu, "#") {
		return
	}
	if len(w.v.Remote) < MaxRemote && !contains(w.v.Remote, u) {
		w.v.Remote = append(w.v.Remote, u)
	}
}

func (w *walker) write(s string) {
	w.text.WriteString(s)
	w.words.WriteString(s)
}

// scan finds what styling hides or loads, anywhere in the document.
func (w *walker) scan(n *html.Node) {
	if n.Type == html.ElementNode {
		for _, a := range n.Attr {
			switch a.Key {
			case "style":
				for _, m := range cssURL.FindAllStringSubmatch(a.Val, -1) {
					w.remote(m[1])
				}
			case "background":
				w.remote(a.Val)
			}
		}
		switch n.DataAtom {
		case atom.Style:
			for c := n.FirstChild; c != nil; c = c.NextSibling {
				for _, m := range cssURL.FindAllStringSubmatch(c.Data, -1) {
					w.remote(m[1])
				}
				for _, m := range cssImport.FindAllStringSubmatch(c.Data, -1) {
					w.remote(m[1])
					w.remoteSheet = true
				}
				if !w.tooMany {
					w.tooMany = parseSheet(c.Data, &w.rules, &w.order)
				}
			}
		case atom.Link:
			w.remote(attr(n, "href"))
			if strings.Contains(strings.ToLower(attr(n, "rel")), "stylesheet") {
				w.remoteSheet = true
			}
		}
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		w.scan(c)
	}
}

// walk collects the text, numbers links and replaces images by markers;
// l is how the recipient's program paints n's text.
func (w *walker) walk(n *html.Node, l look) {
	switch n.Type {
	case html.CommentNode:
		// Outlook shows what its conditional comments hold; nobody else does.
		if d := strings.TrimSpace(n.Data); strings.HasPrefix(strings.ToLower(d), "[if") {
			if i := strings.IndexByte(d, '>'); i >= 0 {
				w.unshown(fragmentText(d[i+1:]), "shown only by Outlook, in a conditional comment")
			}
		}
		return
	case html.TextNode:
		why := l.why()
		if p := n.Parent; why == "" && p != nil && p.DataAtom == atom.Details && !hasAttr(p, "open") {
			why = "a closed <details>"
		}
		if why != "" && strings.TrimSpace(n.Data) != "" {
			w.hidden(n.Data, why)
			marker := "[hidden: " + strings.Join(strings.Fields(n.Data), " ") + "]"
			w.text.WriteString(" " + marker + " ")
			n.Data = " " + marker + " "
			mark := &html.Node{Type: html.ElementNode, Data: "mark", DataAtom: atom.Mark}
			n.Parent.InsertBefore(mark, n)
			n.Parent.RemoveChild(n)
			mark.AppendChild(n)
			return
		}
		if n.Parent != nil && n.Parent.DataAtom == atom.Pre {
			w.write(n.Data)
		} else {
			f := strings.Join(strings.Fields(n.Data), " ")
			if f == "" {
				w.write(spaceIf(n.Data))
			} else {
				w.write(lead(n.Data) + f + spaceIf(n.Data))
			}
		}
		return
	case html.ElementNode:
		if skipped[n.DataAtom] {
			switch n.DataAtom {
			case atom.Svg, atom.Math, atom.Select, atom.Textarea, atom.Noscript, atom.Object:
				if l.why() == "" {
					w.unshown(innerText(n), "inside <"+n.Data+">, which some mail programs show")
				}
			}
			return
		}
		switch n.DataAtom {
		case atom.Img, atom.Image, atom.Input:
			if n.DataAtom == atom.Input && !strings.EqualFold(attr(n, "type"), "image") {
				return
			}
			w.image++
			src := attr(n, "src")
			w.remote(src)
			if ss := attr(n, "srcset"); ss != "" {
				for _, part := range strings.Split(ss, ",") {
					if f := strings.Fields(part); len(f) > 0 {
						w.remote(f[0])
					}
				}
			}
			marker := fmt.Sprintf("[image %d", w.image)
			if alt := strings.Join(strings.Fields(attr(n, "alt")), " "); alt != "" {
				marker += ": " + alt
			}
			marker += "]"
			w.text.WriteString(marker)
			n.Type, n.Data, n.DataAtom, n.Attr = html.TextNode, marker, 0, nil
			return
		}
	}
	if n.Type == html.ElementNode && blocks[n.DataAtom] {
		w.write("\n")
	}
	var kids []*html.Node
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		kids = append(kids, c)
	}
	if n.Type == html.ElementNode {
		var props map[string]string
		if len(w.rules) > 0 || hasAttr(n, "style") {
			if w.index == nil {
				w.index = newRuleIndex(w.rules)
			}
			props = cascade(w.index, n)
		}
		l = child(l, n, props)
	}
	for _, c := range kids {
		w.walk(c, l)
	}
	if n.Type == html.ElementNode {
		switch n.DataAtom {
		case atom.A, atom.Area:
			if href, ok := attrOK(n, "href"); ok {
				w.links++
				if len(w.v.Links) < MaxLinks {
					w.v.Links = append(w.v.Links, Link{N: w.links, Text: strings.Join(strings.Fields(textOf(n)), " "), Href: strings.TrimSpace(href)})
				}
				marker := fmt.Sprintf(" [%d]", w.links)
				w.text.WriteString(marker)
				n.AppendChild(&html.Node{Type: html.TextNode, Data: marker})
			}
		case atom.Td, atom.Th:
			w.write(" ")
		}
		if blocks[n.DataAtom] {
			w.write("\n")
		}
	}
}

func lead(s string) string {
	if s != "" && strings.TrimLeft(s, " \t\r\n\f") != s {
		return " "
	}
	return ""
}

func spaceIf(s string) string {
	if s != "" && strings.TrimRight(s, " \t\r\n\f") != s {
		return " "
	}
	return ""
}

func attr(n *html.Node, key string) string {
	v, _ := attrOK(n, key)
	return v
}

func attrOK(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key && a.Namespace == "" {
			return a.Val, true
		}
	}
	return "", false
}

func textOf(n *html.Node) string {
	var b strings.Builder
	var f func(*html.Node)
	f = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
			b.WriteByte(' ')
		}
		if n.Type == html.ElementNode && skipped[n.DataAtom] {
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			f(c)
		}
	}
	f(n)
	return b.String()
}

// tidy trims every line and keeps at most one empty line in a row.
func tidy(s string) string {
	var out []string
	blank := true
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			if !blank {
				out = append(out, "")
			}
			blank = true
			continue
		}
		out = append(out, l)
		blank = false
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return strings.Join(out, "\n")
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func hasAttr(n *html.Node, key string) bool {
	_, ok := attrOK(n, key)
	return ok
}

// fragmentText is the text of an HTML fragment.
func fragmentText(src string) string {
	nodes, err := html.ParseFragment(strings.NewReader(src), &html.Node{Type: html.ElementNode, Data: "body", DataAtom: atom.Body})
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, n := range nodes {
		b.WriteString(innerText(n))
	}
	return b.String()
}

// innerText is all the text inside n but scripts and style sheets.
func innerText(n *html.Node) string {
	var b strings.Builder
	var f func(*html.Node)
	f = func(n *html.Node) {
		switch {
		case n.Type == html.TextNode:
			b.WriteString(n.Data)
			b.WriteByte(' ')
		case n.Type == html.ElementNode && (n.DataAtom == atom.Script || n.DataAtom == atom.Style || n.Data == "script" ||
			n.Data == "style" || n.Data == "title" || n.Data == "desc" || n.Data == "metadata"):
			return // not painted (an SVG title is a tooltip)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			f(c)
		}
	}
	f(n)
	return b.String()
}
