// Package jcs is RFC 8785 (JSON Canonicalization Scheme) in one pass over
// the input, written for countersign's hot paths: every prepare hashes its
// input and every audit entry is hashed when it is sealed.
//
// Transform gives exactly the bytes of github.com/gowebpki/jcs.Transform
// (whose number formatting it uses), and refuses exactly what it refuses;
// a differential fuzz test holds the two together. It differs only in
// cost: strings without escapes are copied, not rebuilt byte by byte, and
// an object whose members are already in order is not moved at all.
package jcs

import (
	"bytes"
	"errors"
	"slices"
	"sync"
	"unicode/utf8"

	gojcs "github.com/gowebpki/jcs"
)

// deepest is where Transform hands over to the reference implementation:
// reordering an object copies it once per level of objects around it, so
// past this depth the cost is no longer a small multiple of the input.
const deepest = 64

// Transform returns the canonical form of the JSON document b.
func Transform(b []byte) ([]byte, error) {
	return Append(make([]byte, 0, len(b)), b)
}

// Append appends the canonical form of b to dst.
func Append(dst, b []byte) ([]byte, error) {
	if b == nil {
		return nil, errors.New("jcs: no JSON data")
	}
	t := transformers.Get().(*transformer)
	*t = transformer{in: b, out: dst, members: t.members[:0], scratch: t.scratch[:0]}
	defer func() { t.in, t.out = nil, nil; transformers.Put(t) }()
	start := len(dst)
	t.ws()
	err := t.value(0)
	if err == nil {
		t.ws()
		if t.i < len(t.in) {
			err = errors.New("jcs: data after the JSON value")
		}
	}
	if errors.Is(err, errTooDeep) {
		c, err := gojcs.Transform(b)
		if err != nil {
			return nil, err
		}
		return append(dst[:start], c...), nil
	}
	if err != nil {
		return nil, err
	}
	return t.out, nil
}

// transformers keep their member stacks and scratch space between calls:
// every prepare and every audit entry canonicalizes, and growing them anew
// each time was most of what it allocated.
var transformers = sync.Pool{New: func() any { return new(transformer) }}

var errTooDeep = errors.New("jcs: nested deeper than the fast path goes")

type member struct {
	key        []byte // decoded
	start, end int    // `"key":value` in out
}

type transformer struct {
	in      []byte
	i       int
	out     []byte
	members []member // a stack: each object's members above those of the objects around it
	scratch []byte
}

func isWS(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

func (t *transformer) ws() {
	for t.i < len(t.in) && isWS(t.in[t.i]) {
		t.i++
	}
}

func (t *transformer) value(depth int) error {
	if t.i >= len(t.in) {
		return errors.New("jcs: unexpected end of data")
	}
	switch c := t.in[t.i]; c {
	case '{':
		if depth >= deepest {
			return errTooDeep
		}
		t.i++
		return t.object(depth + 1)
	case '[':
		if depth >= deepest {
			return errTooDeep
		}
		t.i++
		return t.array(depth + 1)
	case '"':
		t.i++
		s, raw, err := t.str()
		if err != nil {
			return err
		}
		t.out = appendStr(t.out, s, raw)
		return nil
	default:
		return t.scalar()
	}
}

func (t *transformer) array(depth int) error {
	t.out = append(t.out, '[')
	t.ws()
	if t.i < len(t.in) && t.in[t.i] == ']' {
		t.i++
		t.out = append(t.out, ']')
		return nil
	}
	for n := 0; ; n++ {
		if n > 0 {
			t.out = append(t.out, ',')
		}
		t.ws()
		if err := t.value(depth); err != nil {
			return err
		}
		t.ws()
		if t.i >= len(t.in) {
			return errors.New("jcs: unterminated array")
		}
		switch t.in[t.i] {
		case ',':
			t.i++
		case ']':
			t.i++
			t.out = append(t.out, ']')
			return nil
		default:
			return errors.New("jcs: expected , or ] in an array")
		}
	}
}

func (t *transformer) object(depth int) error {
	open := len(t.out)
	t.out = append(t.out, '{')
	base := len(t.members)
	defer func() { t.members = t.members[:base] }()
	t.ws()
	if t.i < len(t.in) && t.in[t.i] == '}' {
		t.i++
		t.out = append(t.out, '}')
		return nil
	}
	sorted := true
	for {
		t.ws()
		if t.i >= len(t.in) || t.in[t.i] != '"' {
			return errors.New("jcs: expected a member name")
		}
		t.i++
		key, raw, err := t.str()
		if err != nil {
			return err
		}
		if len(t.members) > base {
			t.out = append(t.out, ',')
		}
		m := member{key: key, start: len(t.out)}
		t.out = appendStr(t.out, key, raw)
		t.ws()
		if t.i >= len(t.in) || t.in[t.i] != ':' {
			return errors.New("jcs: expected : after a member name")
		}
		t.i++
		t.out = append(t.out, ':')
		t.ws()
		if err := t.value(depth); err != nil {
			return err
		}
		m.end = len(t.out)
		if n := len(t.members); n > base {
			switch c := compare16(t.members[n-1].key, key); {
			case c == 0:
				return errors.New("jcs: duplicate member name")
			case c > 0:
				sorted = false
			}
		}
		t.members = append(t.members, m)
		t.ws()
		if t.i >= len(t.in) {
			return errors.New("jcs: unterminated object")
		}
		switch t.in[t.i] {
		case ',':
			t.i++
			continue
		case '}':
			t.i++
		default:
			return errors.New("jcs: expected , or } in an object")
		}
		break
	}
	if !sorted {
		ms := t.members[base:]
		slices.SortFunc(ms, func(a, b member) int { return compare16(a.key, b.key) })
		for i := 1; i < len(ms); i++ {
			if compare16(ms[i-1].key, ms[i].key) == 0 {
				return errors.New("jcs: duplicate member name")
			}
		}
		t.scratch = append(t.scratch[:0], t.out[open+1:]...)
		t.out = t.out[:open+1]
		for i, m := range ms {
			if i > 0 {
				t.out = append(t.out, ',')
			}
			t.out = append(t.out, t.scratch[m.start-open-1:m.end-open-1]...)
		}
	}
	t.out = append(t.out, '}')
	return nil
}

// compare16 orders member names by their UTF-16 code units, as RFC 8785
// sorts them. That is the byte order of UTF-8 except between a character
// past U+FFFF (a surrogate pair, D800–DFFF) and one in U+E000–U+FFFF.
func compare16(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	if n == len(a) || n == len(b) {
		return len(a) - len(b)
	}
	for n > 0 && !utf8.RuneStart(a[n]) {
		n--
	}
	ra, _ := utf8.DecodeRune(a[n:])
	rb, _ := utf8.DecodeRune(b[n:])
	if (ra >= 0x10000) != (rb >= 0x10000) {
		// One is a surrogate pair, which sorts below U+E000 and above U+D7FF.
		if ra >= 0x10000 {
			return cmpInt(0xD800, rb)
		}
		return cmpInt(ra, 0xD800)
	}
	return bytes.Compare(a[n:], b[n:])
}

func cmpInt(a, b rune) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
