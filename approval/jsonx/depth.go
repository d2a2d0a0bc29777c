package jsonx

import (
	"strconv"
	"strings"
)

// MaxDepth is the deepest nesting of arrays and objects countersign accepts
// in any JSON it is sent (SPEC §3 guarantee 10). Real inputs nest a few
// levels; deep nesting only serves to make decoders, indenters and diffs
// pay more than the input's size.
const MaxDepth = 32

// DepthError says where a document first nests deeper than the limit.
type DepthError struct {
	// Path names the value that is too deep, in the dotted form of
	// details.fields ("body.items[0][0]"), relative to the document.
	Path   string
	Max    int
	Offset int // byte offset of the bracket that went too deep
}

func (e *DepthError) Error() string {
	where := e.Path
	if where == "" {
		where = "the document"
	}
	return where + ": nested deeper than " + strconv.Itoa(e.Max) + " levels"
}

// frame is one open array or object on the way down.
type frame struct {
	obj   bool
	key   [2]int // where the last key read sits in the document (objects)
	index int    // the current element (arrays)
}

// maxKeyInPath bounds how much of one key a DepthError's path repeats.
const maxKeyInPath = 64

// CheckDepth scans b once, without decoding it, and returns a *DepthError
// if arrays and objects nest deeper than max. It is O(len(b)), allocates
// only for its stack (at most max frames), and must run before anything
// decodes b into values. It does not validate b: a malformed document is
// left for the real decoder to refuse.
func CheckDepth(b []byte, max int) *DepthError {
	stack := make([]frame, 0, 8)
	expectKey := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			start := i + 1
			i++
			for i < len(b) && b[i] != '"' {
				if b[i] == '\\' {
					i++
				}
				i++
			}
			if expectKey && len(stack) > 0 && stack[len(stack)-1].obj {
				end := min(i, len(b))
				stack[len(stack)-1].key = [2]int{start, min(end, start+maxKeyInPath)}
				expectKey = false
			}
		case '[', '{':
			if len(stack) >= max {
				return &DepthError{Path: pathOf(b, stack), Max: max, Offset: i}
			}
			stack = append(stack, frame{obj: c == '{'})
			expectKey = c == '{'
		case ']', '}':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			expectKey = false
		case ',':
			if len(stack) > 0 {
				top := &stack[len(stack)-1]
				if top.obj {
					expectKey = true
				} else {
					top.index++
				}
			}
		}
	}
	return nil
}

// pathOf names the value about to open: the position in each open
// container, keys dotted and indexes in brackets.
func pathOf(b []byte, stack []frame) string {
	var sb strings.Builder
	for _, f := range stack {
		if f.obj {
			if sb.Len() > 0 {
				sb.WriteByte('.')
			}
			sb.Write(b[f.key[0]:f.key[1]])
		} else {
			sb.WriteByte('[')
			sb.WriteString(strconv.Itoa(f.index))
			sb.WriteByte(']')
		}
	}
	return sb.String()
}
