package jcs_test

import (
	"errors"
	"testing"

	"github.com/countersign/countersign/approval/jcs"
)

// A number is kept when its value survives a double and RFC 8785, however
// its spelling changes; refused when the value would change.
func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		in, out string
		err     error
	}{
		{"1", "1", nil},
		{"1.0", "1", nil},
		{"1e3", "1000", nil},
		{"1E+3", "1000", nil},
		{"-0", "0", nil}, // the same number: RFC 8785 writes it 0
		{"-0.0e5", "0", nil},
		{"0e999999999999", "0", nil},
		{"12.50", "12.5", nil},
		{"0.1", "0.1", nil},
		{"0.30000000000000004", "0.30000000000000004", nil},
		{"1e21", "1e+21", nil},
		{"5e-324", "5e-324", nil},
		{"1.7976931348623157e308", "1.7976931348623157e+308", nil},
		{"9007199254740992", "9007199254740992", nil},
		{"100000000000000000000", "100000000000000000000", nil},
		{"9007199254740993", "", jcs.ErrNumberPrecision},
		{"-9007199254740993", "", jcs.ErrNumberPrecision},
		{"123456789012345678901", "", jcs.ErrNumberPrecision},
		{"0.1000000000000000000001", "", jcs.ErrNumberPrecision},
		{"1.00000000000000001", "", jcs.ErrNumberPrecision},
		{"1e-400", "", jcs.ErrNumberPrecision}, // a double holds it only as 0
		{"3e-324", "", jcs.ErrNumberPrecision}, // rounds to 5e-324
		{"1e400", "", jcs.ErrNumberRange},
		{"-1e400", "", jcs.ErrNumberRange},
		{"1e99999999999999999999", "", jcs.ErrNumberRange},
	} {
		got, err := jcs.RoundTrip(tc.in)
		if got != tc.out || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("RoundTrip(%s) = %q, %v; want %q, %v", tc.in, got, err, tc.out, tc.err)
		}
	}
	if _, err := jcs.RoundTrip("01"); err == nil {
		t.Error("RoundTrip(01) accepted a malformed number")
	}
}

// Whatever RoundTrip keeps, Transform writes as it says.
func FuzzRoundTrip(f *testing.F) {
	for _, s := range []string{"1", "1.0", "9007199254740993", "1e400", "1e-400", "-0", "0.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, err := jcs.RoundTrip(s)
		c, terr := jcs.Transform([]byte(s))
		if err != nil {
			return
		}
		if terr != nil || string(c) != out {
			t.Fatalf("RoundTrip(%q) = %q, Transform = %q, %v", s, out, c, terr)
		}
	})
}
