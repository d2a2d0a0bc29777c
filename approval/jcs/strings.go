package jcs

import (
	"errors"
	"unicode/utf16"
	"unicode/utf8"
)

// Strings: read with their escapes decoded (and checked as the reference
// checks them), written with only what RFC 8785 escapes.

// plain marks the bytes that a string holds as they are: printable ASCII
// other than the quote and the backslash.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str reads a string after its opening quote and returns its decoded
// content (a slice of the input when it has no escapes) and whether it
// was written without any escape, so that its canonical form is itself.
func (t *transformer) str() ([]byte, bool, error) {
	start := t.i
	in := t.in
	for t.i < len(in) {
		c := in[t.i]
		if plain[c] {
			t.i++
			continue
		}
		switch {
		case c == '"':
			s := in[start:t.i]
			t.i++
			return s, true, nil
		case c == '\\':
			s, err := t.escaped(start)
			return s, false, err
		case c < 0x20:
			return nil, false, errors.New("jcs: control character in a string")
		default:
			r, size := utf8.DecodeRune(in[t.i:])
			if r == utf8.RuneError && size <= 1 {
				return nil, false, errors.New("jcs: invalid UTF-8 in a string")
			}
			t.i += size
		}
	}
	return nil, false, errors.New("jcs: unterminated string")
}

// appendStr writes a string read by str.
func appendStr(out, s []byte, raw bool) []byte {
	if raw {
		out = append(out, '"')
		out = append(out, s...)
		return append(out, '"')
	}
	return appendString(out, s)
}

// escaped decodes the rest of a string that has escapes, from start.
func (t *transformer) escaped(start int) ([]byte, error) {
	s := append([]byte(nil), t.in[start:t.i]...)
	for t.i < len(t.in) {
		c := t.in[t.i]
		switch {
		case c == '"':
			t.i++
			return s, nil
		case c < 0x20:
			return nil, errors.New("jcs: control character in a string")
		case c == '\\':
			if t.i+1 >= len(t.in) {
				return nil, errors.New("jcs: unterminated string")
			}
			e := t.in[t.i+1]
			t.i += 2
			switch e {
			case '"', '\\', '/':
				s = append(s, e)
			case 'b':
				s = append(s, '\b')
			case 'f':
				s = append(s, '\f')
			case 'n':
				s = append(s, '\n')
			case 'r':
				s = append(s, '\r')
			case 't':
				s = append(s, '\t')
			case 'u':
				r, err := t.hex4()
				if err != nil {
					return nil, err
				}
				if utf16.IsSurrogate(r) {
					if r > 0xDBFF {
						return nil, errors.New("jcs: lone low surrogate")
					}
					if t.i+1 >= len(t.in) || t.in[t.i] != '\\' || t.in[t.i+1] != 'u' {
						return nil, errors.New("jcs: missing low surrogate")
					}
					t.i += 2
					lo, err := t.hex4()
					if err != nil {
						return nil, err
					}
					if lo < 0xDC00 || lo > 0xDFFF {
						return nil, errors.New("jcs: invalid low surrogate")
					}
					r = utf16.DecodeRune(r, lo)
				}
				s = utf8.AppendRune(s, r)
			default:
				return nil, errors.New("jcs: unknown escape")
			}
		case c < 0x80:
			s = append(s, c)
			t.i++
		default:
			r, size := utf8.DecodeRune(t.in[t.i:])
			if r == utf8.RuneError && size <= 1 {
				return nil, errors.New("jcs: invalid UTF-8 in a string")
			}
			s = append(s, t.in[t.i:t.i+size]...)
			t.i += size
		}
	}
	return nil, errors.New("jcs: unterminated string")
}

func (t *transformer) hex4() (rune, error) {
	if t.i+4 > len(t.in) {
		return 0, errors.New("jcs: short \\u escape")
	}
	r, ok := Hex4(t.in[t.i : t.i+4])
	if !ok {
		return 0, errors.New("jcs: bad \\u escape")
	}
	t.i += 4
	return r, nil
}

// Hex4 reads the four hex digits of a JSON \u escape (b holds exactly
// them); jsonx's scanner reads escapes the same way.
func Hex4(b []byte) (rune, bool) {
	var r rune
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

const hexDigits = "0123456789abcdef"

// appendString writes s (valid UTF-8) as RFC 8785 does: only the quote,
// the backslash and control characters are escaped, the usual ones by
// their short form.
func appendString(out, s []byte) []byte {
	out = append(out, '"')
	last := 0
	for i, c := range s {
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		out = append(out, s[last:i]...)
		last = i + 1
		switch c {
		case '"', '\\':
			out = append(out, '\\', c)
		case '\b':
			out = append(out, '\\', 'b')
		case '\f':
			out = append(out, '\\', 'f')
		case '\n':
			out = append(out, '\\', 'n')
		case '\r':
			out = append(out, '\\', 'r')
		case '\t':
			out = append(out, '\\', 't')
		default:
			out = append(out, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
	}
	out = append(out, s[last:]...)
	return append(out, '"')
}

// AppendString appends the canonical form of the string s.
func AppendString(out []byte, s string) []byte { return appendString(out, []byte(s)) }
