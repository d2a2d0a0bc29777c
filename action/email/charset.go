package email

import (
	"strings"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
)

// legacyCharsets are the single-byte charsets an attachment may declare
// (knownCharset), each mapped as the WHATWG Encoding Standard maps its
// label, which is how mail programs and browsers decode it: iso-8859-1 is
// read as windows-1252, iso-8859-9 as windows-1254, iso-8859-11 as
// windows-874. It is htmlindex's table for these labels
// (TestLegacyCharsetsMatchHTMLIndex), without linking htmlindex, which
// carries every CJK table (about 650 kB of the binary) for charsets that
// are refused anyway.
var legacyCharsets = map[string]encoding.Encoding{
	"iso-8859-1":   charmap.Windows1252,
	"iso-8859-2":   charmap.ISO8859_2,
	"iso-8859-3":   charmap.ISO8859_3,
	"iso-8859-4":   charmap.ISO8859_4,
	"iso-8859-5":   charmap.ISO8859_5,
	"iso-8859-6":   charmap.ISO8859_6,
	"iso-8859-7":   charmap.ISO8859_7,
	"iso-8859-8":   charmap.ISO8859_8,
	"iso-8859-9":   charmap.Windows1254,
	"iso-8859-10":  charmap.ISO8859_10,
	"iso-8859-11":  charmap.Windows874,
	"iso-8859-13":  charmap.ISO8859_13,
	"iso-8859-14":  charmap.ISO8859_14,
	"iso-8859-15":  charmap.ISO8859_15,
	"iso-8859-16":  charmap.ISO8859_16,
	"windows-1250": charmap.Windows1250,
	"windows-1251": charmap.Windows1251,
	"windows-1252": charmap.Windows1252,
	"windows-1253": charmap.Windows1253,
	"windows-1254": charmap.Windows1254,
	"windows-1255": charmap.Windows1255,
	"windows-1256": charmap.Windows1256,
	"windows-1257": charmap.Windows1257,
	"windows-1258": charmap.Windows1258,
}

// legacyCharset is the encoding of a legacy (single-byte) charset label,
// case and surrounding spaces ignored, or nil.
func legacyCharset(label string) encoding.Encoding {
	return legacyCharsets[strings.ToLower(strings.TrimSpace(label))]
}
