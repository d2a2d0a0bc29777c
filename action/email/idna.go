package email

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// ideographicDots are the full stops IDNA reads as label separators.
var ideographicDots = strings.NewReplacer("\u3002", ".", "\uff0e", ".", "\uff61", ".")

// normalizeDomain returns the lowercase ASCII form of a domain name, with
// internationalized labels in punycode ("Bücher.Example" becomes
// "xn--bcher-kva.example"). The ASCII form is what SMTP servers route on,
// what allowed_domains compares, and what the approver sees: a look-alike
// domain in Cyrillic cannot pass for a Latin one once it reads "xn--…".
//
// This is a deliberately strict subset of IDNA 2008: labels may hold
// letters, marks, digits and hyphens only, are NFC-normalized and
// lowercased, and the name needs at least two labels (no bare "localhost",
// no IP literals).
func normalizeDomain(d string) (string, error) {
	d = ideographicDots.Replace(d)
	d = strings.TrimSuffix(d, ".")
	if d == "" {
		return "", errors.New("domain is empty")
	}
	labels := strings.Split(d, ".")
	if len(labels) < 2 {
		return "", errors.New("domain must be a fully qualified name such as example.com")
	}
	for i, l := range labels {
		l = strings.ToLower(norm.NFC.String(l))
		if l == "" {
			return "", errors.New("domain has an empty label")
		}
		if !isASCII(l) {
			for _, r := range l {
				if r != '-' && !unicode.IsLetter(r) && !unicode.IsMark(r) && !unicode.IsDigit(r) {
					return "", fmt.Errorf("domain contains %q, which is not allowed in a host name", r)
				}
			}
			l = "xn--" + punycode(l)
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				return "", fmt.Errorf("domain contains %q, which is not allowed in a host name", r)
			}
		}
		if len(l) > 63 {
			return "", errors.New("domain has a label longer than 63 characters")
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return "", errors.New("domain labels may not begin or end with a hyphen")
		}
		labels[i] = l
	}
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return "", errors.New("domain must be a host name, not an IP address")
	}
	out := strings.Join(labels, ".")
	if len(out) > 253 {
		return "", errors.New("domain is longer than 253 characters")
	}
	return out, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// punycode encodes a label per RFC 3492 (without the "xn--" prefix).
func punycode(label string) string {
	const (
		base        = 36
		tmin        = 1
		tmax        = 26
		skew        = 38
		damp        = 700
		initialBias = 72
		initialN    = 128
	)
	adapt := func(delta, numPoints int, first bool) int {
		if first {
			delta /= damp
		} else {
			delta /= 2
		}
		delta += delta / numPoints
		k := 0
		for delta > ((base-tmin)*tmax)/2 {
			delta /= base - tmin
			k += base
		}
		return k + (base-tmin+1)*delta/(delta+skew)
	}
	digit := func(d int) byte {
		if d < 26 {
			return byte('a' + d)
		}
		return byte('0' + d - 26)
	}

	input := []rune(label)
	var out []byte
	for _, r := range input {
		if r < 0x80 {
			out = append(out, byte(r))
		}
	}
	b := len(out)
	h := b
	if b > 0 {
		out = append(out, '-')
	}
	n, delta, bias := initialN, 0, initialBias
	for h < len(input) {
		m := int(unicode.MaxRune) + 1
		for _, r := range input {
			if int(r) >= n && int(r) < m {
				m = int(r)
			}
		}
		delta += (m - n) * (h + 1)
		n = m
		for _, r := range input {
			if int(r) < n {
				delta++
			}
			if int(r) != n {
				continue
			}
			q := delta
			for k := base; ; k += base {
				t := min(max(k-bias, tmin), tmax)
				if q < t {
					break
				}
				out = append(out, digit(t+(q-t)%(base-t)))
				q = (q - t) / (base - t)
			}
			out = append(out, digit(q))
			bias = adapt(delta, h+1, h == b)
			delta = 0
			h++
		}
		delta++
		n++
	}
	return string(out)
}
