package jcs

import (
	"errors"
	"fmt"
	"strconv"

	gojcs "github.com/gowebpki/jcs"
)

// Literals and numbers. Numbers are written as ECMAScript writes them
// (RFC 8785 §3.2.2.3), by the reference implementation's formatter; the
// common case, an integer a double holds exactly, is written as it came.

// scalar is a literal or a number: the bytes up to a structural character
// or whitespace.
func (t *transformer) scalar() error {
	start := t.i
	for t.i < len(t.in) {
		c := t.in[t.i]
		if c == ',' || c == ']' || c == '}' || isWS(c) {
			break
		}
		if c > 0x7f {
			return errors.New("jcs: unexpected non-ASCII character")
		}
		t.i++
	}
	tok := t.in[start:t.i]
	switch string(tok) {
	case "":
		return errors.New("jcs: missing value")
	case "true", "false", "null":
		t.out = append(t.out, tok...)
		return nil
	}
	if !isNumber(tok) {
		return fmt.Errorf("jcs: invalid literal or number (%d bytes)", len(tok))
	}
	if small(tok) { // an integer that a double holds exactly: written as is
		if string(tok) == "-0" {
			t.out = append(t.out, '0')
		} else {
			t.out = append(t.out, tok...)
		}
		return nil
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	if err != nil {
		return errors.New("jcs: number out of range")
	}
	s, err := gojcs.NumberToJSON(f)
	if err != nil {
		return err
	}
	t.out = append(t.out, s...)
	return nil
}

// isNumber is RFC 8259's number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func isNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		digits()
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(b)
}

// small reports whether a valid number is an integer of at most 15
// digits, which ES6 formatting writes unchanged (but "-0" as "0").
func small(b []byte) bool {
	d := b
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	if len(d) > 15 {
		return false
	}
	for _, c := range d {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
