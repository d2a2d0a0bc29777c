package jsonx

import (
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/countersign/countersign/approval/jcs"
)

// scanner is walk's single pass over a JSON document: member names are
// decoded as encoding/json decodes them (escapes, surrogate pairs, and
// invalid UTF-8 or lone surrogates as U+FFFD), so two spellings of one
// name are one name, and every number is checked with jcs.RoundTrip. It
// allocates only for its name buffer and token list (reused across
// values), and for a number longer than 15 characters.
type scanner struct {
	b      []byte
	i      int
	name   []byte   // dotted name of the current value
	tokens [][2]int // each token of its pointer, as a span of name
	visit  func(name []byte, ptr func() string) error
	ptr    func() string
}

var errSyntax = errors.New("jsonx: malformed JSON")

// maxScanDepth bounds recursion when CheckDepth has not been run.
const maxScanDepth = 10000

func walk(b []byte, visit func(name []byte, ptr func() string) error) error {
	s := &scanner{b: b, visit: visit}
	s.ptr = func() string {
		toks := make([]string, len(s.tokens))
		for i, t := range s.tokens {
			toks[i] = string(s.name[t[0]:t[1]])
		}
		return Pointer(toks)
	}
	s.ws()
	if err := s.value(0); err != nil {
		return err
	}
	s.ws()
	if s.i != len(s.b) {
		return errSyntax
	}
	return nil
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// enter names the next value: the container's name (nameLen bytes, ntok
// tokens), then tok. The token's bytes are appended by add.
func (s *scanner) enter(nameLen, ntok int, add func()) error {
	s.name, s.tokens = s.name[:nameLen], s.tokens[:ntok]
	if ntok > 0 {
		s.name = append(s.name, '.')
	}
	start := len(s.name)
	add()
	s.tokens = append(s.tokens, [2]int{start, len(s.name)})
	return s.visit(s.name, s.ptr)
}

func (s *scanner) value(depth int) error {
	if s.i >= len(s.b) {
		return errSyntax
	}
	if depth > maxScanDepth {
		return errors.New("jsonx: nested too deep")
	}
	nameLen, ntok := len(s.name), len(s.tokens)
	switch c := s.b[s.i]; {
	case c == '{':
		s.i++
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == '}' {
			s.i++
			return nil
		}
		for {
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] != '"' {
				return errSyntax
			}
			var serr error
			if err := s.enter(nameLen, ntok, func() { s.name, serr = s.str(s.name, true) }); serr != nil {
				return serr
			} else if err != nil {
				return err
			}
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] != ':' {
				return errSyntax
			}
			s.i++
			s.ws()
			if more, err := s.member(depth, '}'); !more {
				return err
			}
		}
	case c == '[':
		s.i++
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == ']' {
			s.i++
			return nil
		}
		for n := 0; ; n++ {
			if err := s.enter(nameLen, ntok, func() { s.name = strconv.AppendInt(s.name, int64(n), 10) }); err != nil {
				return err
			}
			s.ws()
			if more, err := s.member(depth, ']'); !more {
				return err
			}
		}
	case c == '"':
		var err error
		_, err = s.str(nil, false)
		return err
	default:
		return s.scalar()
	}
}

// str reads the string at s.i (at its opening quote), appending what it
// decodes to to dst when keep is set (else it only validates).
func (s *scanner) str(dst []byte, keep bool) ([]byte, error) {
	s.i++ // the quote
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return dst, nil
		case c < 0x20:
			return nil, errSyntax
		case c == '\\':
			if s.i+1 >= len(s.b) {
				return nil, errSyntax
			}
			e := s.b[s.i+1]
			s.i += 2
			var r rune
			switch e {
			case '"', '\\', '/':
				r = rune(e)
			case 'b':
				r = '\b'
			case 'f':
				r = '\f'
			case 'n':
				r = '\n'
			case 'r':
				r = '\r'
			case 't':
				r = '\t'
			case 'u':
				r1, ok := s.hex4()
				if !ok {
					return nil, errSyntax
				}
				r = r1
				if utf16.IsSurrogate(r1) {
					r = utf8.RuneError
					// A high surrogate followed by an escaped low one is one rune.
					if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
						save := s.i
						s.i += 2
						r2, ok := s.hex4()
						if !ok {
							return nil, errSyntax
						}
						if d := utf16.DecodeRune(r1, r2); d != utf8.RuneError {
							r = d
						} else {
							s.i = save
						}
					}
				}
			default:
				return nil, errSyntax
			}
			if keep {
				dst = utf8.AppendRune(dst, r)
			}
		case c < utf8.RuneSelf:
			if keep {
				dst = append(dst, c)
			}
			s.i++
		default:
			r, size := utf8.DecodeRune(s.b[s.i:])
			if keep {
				if r == utf8.RuneError && size == 1 {
					dst = utf8.AppendRune(dst, utf8.RuneError)
				} else {
					dst = append(dst, s.b[s.i:s.i+size]...)
				}
			}
			s.i += size
		}
	}
	return nil, errSyntax
}

// member reads a member's value and what follows it in an object or
// array closed by end: more is true after a comma; at end it is false with
// no error.
func (s *scanner) member(depth int, end byte) (more bool, err error) {
	if err := s.value(depth + 1); err != nil {
		return false, err
	}
	s.ws()
	if s.i >= len(s.b) {
		return false, errSyntax
	}
	s.i++
	switch s.b[s.i-1] {
	case ',':
		return true, nil
	case end:
		return false, nil
	}
	return false, errSyntax
}

func (s *scanner) hex4() (rune, bool) {
	if s.i+4 > len(s.b) {
		return 0, false
	}
	r, ok := jcs.Hex4(s.b[s.i : s.i+4])
	if ok {
		s.i += 4
	}
	return r, ok
}

// scalar reads a literal or a number, checking the number.
func (s *scanner) scalar() error {
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		if c == ',' || c == ']' || c == '}' || c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			break
		}
		s.i++
	}
	tok := s.b[start:s.i]
	switch string(tok) {
	case "true", "false", "null":
		return nil
	case "":
		return errSyntax
	}
	if shortInteger(tok) {
		return nil
	}
	if _, err := jcs.RoundTrip(string(tok)); err != nil {
		if !errors.Is(err, jcs.ErrNumberRange) && !errors.Is(err, jcs.ErrNumberPrecision) {
			return errSyntax
		}
		n := string(tok)
		if len(n) > 40 {
			n = n[:40] + "…"
		}
		return &NumberError{Pointer: s.ptr(), Number: n, Err: err}
	}
	return nil
}

// shortInteger: -?(0|[1-9][0-9]*) of at most 15 digits, which a double
// holds exactly (the common case, checked without allocating).
func shortInteger(b []byte) bool {
	if len(b) > 0 && b[0] == '-' {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 15 || (b[0] == '0' && len(b) > 1) {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
