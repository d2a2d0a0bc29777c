package jcs

import (
	"errors"
	"strconv"
	"strings"

	gojcs "github.com/gowebpki/jcs"
)

// Numbers that change when canonicalized (SPEC §3 guarantee 13). RFC 8785
// reads every number as an IEEE 754 double and writes it back the
// ECMAScript way. A spelling may change ("1.0" is written "1", "1e3"
// "1000", "-0" "0": the same values), but the value must not: a number
// whose value a double cannot hold (9007199254740993, 0.1000000000000000001,
// 1e-400) would be hashed, shown and routed as one value and mean another
// to a program that reads it exactly, and one beyond a double's range
// (1e400) has no canonical form at all.

// ErrNumberRange is a number beyond the range of a double.
var ErrNumberRange = errors.New("beyond the range of a double (about ±1.8e308)")

// ErrNumberPrecision is a number whose value a double cannot hold.
var ErrNumberPrecision = errors.New("changes value when read as a double (RFC 8785)")

// RoundTrip returns the canonical form (RFC 8785) of the JSON number tok,
// or ErrNumberRange or ErrNumberPrecision when the canonical form would
// stand for another value. tok must be a valid JSON number.
func RoundTrip(tok string) (string, error) {
	if !isNumber([]byte(tok)) {
		return "", errors.New("not a JSON number")
	}
	if small([]byte(tok)) { // at most 15 digits: a double holds it exactly
		if tok == "-0" {
			return "0", nil
		}
		return tok, nil
	}
	f, err := strconv.ParseFloat(tok, 64)
	if err != nil {
		return "", ErrNumberRange
	}
	out, err := gojcs.NumberToJSON(f)
	if err != nil {
		return "", ErrNumberRange
	}
	if !sameDecimal(tok, out) {
		return "", ErrNumberPrecision
	}
	return out, nil
}

// sameDecimal reports whether two valid JSON numbers denote the same
// decimal value, exactly (no rounding: it compares digits).
func sameDecimal(a, b string) bool {
	na, da, ea := decimalOf(a)
	nb, db, eb := decimalOf(b)
	if da == "" || db == "" { // zero, of either sign
		return da == db
	}
	return na == nb && da == db && ea == eb
}

// decimalOf writes a valid JSON number as sign, significant digits (no
// leading or trailing zeros; "" for zero) and exponent e, for the value
// 0.DIGITS × 10^e. An exponent beyond ±1e9 saturates: a number with
// nonzero digits so far out is beyond any double and never compares equal
// to a canonical number.
func decimalOf(s string) (neg bool, digits string, exp int) {
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	}
	mant, e, _ := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	all := intPart + frac
	exp = len(intPart)
	lead := len(all) - len(strings.TrimLeft(all, "0"))
	all = strings.TrimRight(all[lead:], "0")
	exp -= lead
	if all == "" {
		return false, "", 0
	}
	if e != "" {
		sign := 1
		switch e[0] {
		case '-':
			sign, e = -1, e[1:]
		case '+':
			e = e[1:]
		}
		e = strings.TrimLeft(e, "0")
		n := 1_000_000_000
		if len(e) < 10 {
			n, _ = strconv.Atoi("0" + e)
		}
		exp += sign * n
	}
	return neg, all, exp
}
