package approval

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/countersign/countersign/approval/jsonx"
)

// Compact results (SPEC §13): no agent-facing result repeats more than
// CompactBudget bytes of an operation's input, so a status read costs the
// model a few hundred bytes whatever was prepared. The budget is split
// between the input itself and the preview built from it (title, summary,
// field values, diff values).
const (
	CompactBudget = 4 << 10
	inputBudget   = 2 << 10
	previewBudget = CompactBudget - inputBudget
	// headRunes is how much of an omitted value its head shows.
	headRunes = 200
	// longText is the longest preview string shown whole; headBytes caps a
	// head in bytes (200 characters may be 4 bytes each).
	longText  = 300
	headBytes = 400
)

// Omitted stands, in an agent's view, for a large value of the input:
// its size and SHA-256 (for an attachment's content_base64, of the decoded
// bytes) and its first 200 characters.
type Omitted struct {
	Omitted bool   `json:"omitted"`
	Bytes   int    `json:"bytes"`
	SHA256  string `json:"sha256"`
	Head    string `json:"head"`
}

// Compact is the agent's view v with large input values omitted and the
// preview cut to fit CompactBudget. It is the one compaction of every
// agent-facing result (REST and MCP); admin and approver views are never
// compacted. Compacting a compact view changes nothing.
func Compact(v View) View {
	v.Input = compactJSON(v.Input, inputBudget)
	v.Preview = compactPreview(v.Preview)
	return v
}

// CompactList compacts a list of operations so that, all together, they
// repeat no more than CompactBudget bytes of their inputs: each keeps its
// status, preview title and next step; its input is only a digest, and
// its preview fields and diff are left out (a status read shows them).
// Past about 15 operations each title still keeps its first 60 bytes, so
// that the operations can be told apart.
func CompactList(vs []View) []View {
	out := make([]View, len(vs))
	// Each keeps its input's digest (about 110 bytes) and a share of the
	// rest for its title and summary.
	per := max(CompactBudget/max(len(vs), 1)-160, 0)
	for i, v := range vs {
		if len(v.Input) > 0 && !bytes.Equal(v.Input, []byte("null")) {
			o := omit(v.Input, false)
			o.Head = ""
			v.Input, _ = jsonx.Marshal(o)
		}
		p := v.Preview
		p.Title, p.Summary = cutTo(p.Title, max(per/2, 60)), cutTo(p.Summary, per/2)
		p.Fields, p.Diff = []Field{}, nil
		v.Preview = p
		out[i] = v
	}
	return out
}

// cutTo is s whole when it fits n bytes, else its head in at most n bytes
// with an ellipsis (never splitting a character).
func cutTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n = max(n-len("…"), 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// head is the first 200 characters of s, at most headBytes bytes.
func head(s string) string {
	i, n := 0, 0
	for i < len(s) && n < headRunes {
		_, size := utf8.DecodeRuneInString(s[i:])
		if i+size > headBytes {
			break
		}
		i += size
		n++
	}
	return strings.ToValidUTF8(s[:i], "")
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// cutText is a preview string whole when short, else its head and a note
// of its size and digest.
func cutText(s string, n int) string {
	if len(s) <= n || strings.HasSuffix(s, cutNote) {
		return s
	}
	return fmt.Sprintf("%s… [%d bytes omitted here, sha256 %s%s", head(s), len(s), digest([]byte(s)), cutNote)
}

const cutNote = "; read the status with full to see it whole]"

// The last field of a preview that was cut says how much was left out.
const (
	noteLabel  = "Not shown"
	noteFormat = "%d more fields and %d more changes; read the status with full to see them"
)

// compactPreview cuts long strings and keeps the fields and diff entries,
// in order, that fit previewBudget; a last field says how many were left out.
func compactPreview(p Preview) Preview {
	p.Title, p.Summary = cutText(p.Title, 2*longText), cutText(p.Summary, 2*longText)
	left := previewBudget - len(p.Title) - len(p.Summary) - 200 // room for the note
	var fields []Field
	// carried are what an earlier compaction left out (its note).
	dropped, droppedDiff, carried, carriedDiff := 0, 0, 0, 0
	// With a diff, the fields get half the room: the changes are what a
	// bulk preview is about.
	reserved := 0
	if len(p.Diff) > 0 {
		reserved = left / 2
		left -= reserved
	}
	for _, f := range p.Fields {
		var more, moreDiff int
		if f.Name == "omitted" && f.Label == noteLabel { // compacted before
			if _, err := fmt.Sscanf(f.Value, noteFormat, &more, &moreDiff); err == nil {
				carried, carriedDiff = more, moreDiff
				continue
			}
		}
		if dropped > 0 {
			dropped++
			continue
		}
		f.Value = cutText(f.Value, longText)
		if n := jsonLen(f) + 1; n <= left {
			left -= n
			fields = append(fields, f)
		} else {
			dropped++
		}
	}
	left += reserved
	var diff []Change
	for _, c := range p.Diff {
		if droppedDiff > 0 {
			droppedDiff++
			continue
		}
		c.Before, c.After = compactJSON(c.Before, headBytes), compactJSON(c.After, headBytes)
		if n := jsonLen(c) + 1; n <= left {
			left -= n
			diff = append(diff, c)
		} else {
			droppedDiff++
		}
	}
	dropped, droppedDiff = dropped+carried, droppedDiff+carriedDiff
	if dropped+droppedDiff > 0 {
		fields = append(fields, Field{Name: "omitted", Label: noteLabel, Value: fmt.Sprintf(noteFormat, dropped, droppedDiff)})
	}
	if fields == nil {
		fields = []Field{}
	}
	p.Fields, p.Diff = fields, diff
	return p
}

func jsonLen(v any) int {
	b, _ := jsonx.Marshal(v)
	return len(b)
}

// node is one value of a JSON document, in its order, while it is compacted.
type node struct {
	raw    json.RawMessage // a scalar's bytes; nil for a container
	keys   []string        // an object's keys, encoded
	kids   []*node
	array  bool
	parent *node
	// base64 marks a string under a key ending in _base64: it is omitted
	// with the size and digest of its decoded bytes.
	base64 bool
	size   int
}

// parse reads raw into a tree, keeping the order of members.
func parse(raw json.RawMessage, parent *node) (*node, error) {
	n := &node{parent: parent}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || (raw[0] != '{' && raw[0] != '[') {
		n.raw = raw
		return n, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	n.array = raw[0] == '['
	for dec.More() {
		if !n.array {
			t, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, _ := jsonx.Marshal(t)
			n.keys = append(n.keys, string(k))
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		kid, err := parse(v, n)
		if err != nil {
			return nil, err
		}
		if !n.array && len(v) > 0 && v[0] == '"' && strings.HasSuffix(n.keys[len(n.keys)-1], `_base64"`) {
			kid.base64 = true
		}
		n.kids = append(n.kids, kid)
	}
	return n, nil
}

// encode writes n compactly, and records each node's size.
func (n *node) encode(b *bytes.Buffer) {
	start := b.Len()
	if n.kids == nil && n.keys == nil && n.raw != nil {
		b.Write(n.raw)
		n.size = b.Len() - start
		return
	}
	open, close := byte('{'), byte('}')
	if n.array {
		open, close = '[', ']'
	}
	b.WriteByte(open)
	for i, k := range n.kids {
		if i > 0 {
			b.WriteByte(',')
		}
		if !n.array {
			b.WriteString(n.keys[i])
			b.WriteByte(':')
		}
		k.encode(b)
	}
	b.WriteByte(close)
	n.size = b.Len() - start
}

func (n *node) json() json.RawMessage {
	var b bytes.Buffer
	n.encode(&b)
	return b.Bytes()
}

func (n *node) walk(f func(*node)) {
	f(n)
	for _, k := range n.kids {
		k.walk(f)
	}
}

// omit is the stand-in of raw: a string's own bytes (or decoded bytes,
// for base64), a container's JSON.
func omit(raw json.RawMessage, b64 bool) Omitted {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			data := []byte(s)
			if b64 {
				if d, err := base64.StdEncoding.DecodeString(s); err == nil {
					data = d
				}
			}
			return Omitted{Omitted: true, Bytes: len(data), SHA256: digest(data), Head: head(s)}
		}
	}
	return Omitted{Omitted: true, Bytes: len(raw), SHA256: digest(raw), Head: head(string(raw))}
}

// isOmitted reports whether raw already is a stand-in (so compacting a
// compact view changes nothing).
func isOmitted(n *node) bool {
	return !n.array && len(n.keys) > 0 && n.keys[0] == `"omitted"` && string(n.kids[0].raw) == "true"
}

// compactJSON replaces the largest values of raw with stand-ins until it
// fits budget: first strings (message bodies, attachment content, long
// arguments), then whole arrays and objects (many medium values), and
// last, if that is not enough (a huge key, thousands of tiny members),
// the whole document.
func compactJSON(raw json.RawMessage, budget int) json.RawMessage {
	if len(raw) <= budget {
		return raw
	}
	root, err := parse(raw, nil)
	if err != nil {
		return whole(raw)
	}
	total := len(root.json())
	replace := func(n *node) {
		o, _ := jsonx.Marshal(omit(n.json(), n.base64))
		if len(o) >= n.size {
			return // a stand-in as large as the value saves nothing
		}
		total -= n.size - len(o)
		*n = node{raw: o, parent: n.parent, size: len(o)}
	}
	gone := func(n *node) bool { // under a value already replaced
		for p := n.parent; p != nil; p = p.parent {
			if p.raw != nil {
				return true
			}
		}
		return false
	}
	for _, containers := range []bool{false, true} {
		if total <= budget {
			break
		}
		root.json() // fresh sizes
		var cands []*node
		root.walk(func(n *node) {
			if n == root || (n.raw == nil) != containers || (containers && isOmitted(n)) {
				return
			}
			if !containers && (len(n.raw) == 0 || n.raw[0] != '"') {
				return
			}
			cands = append(cands, n)
		})
		slices.SortStableFunc(cands, func(a, b *node) int { return b.size - a.size })
		for _, n := range cands {
			if total <= budget {
				break
			}
			if !gone(n) {
				replace(n)
			}
		}
	}
	out := root.json()
	if len(out) > budget {
		return whole(raw)
	}
	return out
}

// whole is the stand-in of a whole document.
func whole(raw json.RawMessage) json.RawMessage {
	o, _ := jsonx.Marshal(omit(raw, false))
	return o
}
