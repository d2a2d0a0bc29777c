package jsonx

import "bytes"

// IndentBounded indents JSON with two spaces, as json.Indent does, unless
// the result would be longer than limit: then it returns nil and false,
// having written at most limit bytes. Indenting costs a document its
// depth in spaces on every line, so a wide, deep document grows many
// times over; callers show such a document compact instead.
func IndentBounded(src []byte, limit int) ([]byte, bool) {
	out := make([]byte, 0, min(limit, 2*len(src)+64))
	depth := 0
	newline := func() bool {
		if len(out)+1+2*depth > limit {
			return false
		}
		out = append(out, '\n')
		for range depth {
			out = append(out, ' ', ' ')
		}
		return true
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '"':
			j := i + 1
			for j < len(src) && src[j] != '"' {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j+1, len(src))
			if len(out)+j-i > limit {
				return nil, false
			}
			out = append(out, src[i:j]...)
			i = j - 1
			continue
		case '{', '[':
			if k := nextNonSpace(src, i+1); k < len(src) && (src[k] == '}' || src[k] == ']') {
				out = append(out, c, src[k]) // empty: [] and {}
				i = k
			} else {
				out = append(out, c)
				depth++
				if !newline() {
					return nil, false
				}
			}
		case '}', ']':
			depth = max(depth-1, 0)
			if !newline() {
				return nil, false
			}
			out = append(out, c)
		case ',':
			out = append(out, c)
			if !newline() {
				return nil, false
			}
		case ':':
			out = append(out, ':', ' ')
		default:
			out = append(out, c)
		}
		if len(out) > limit {
			return nil, false
		}
	}
	return out, true
}

func nextNonSpace(b []byte, i int) int {
	for i < len(b) && bytes.IndexByte([]byte(" \t\n\r"), b[i]) >= 0 {
		i++
	}
	return i
}
