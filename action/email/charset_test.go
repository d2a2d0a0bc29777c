package email

import (
	"bytes"
	"fmt"
	"testing"

	"golang.org/x/text/encoding/htmlindex"
)

// The charsets an attachment may declare are the iso-8859-* and
// windows-125* labels that htmlindex (the WHATWG Encoding Standard) knows,
// each decoding every byte exactly as htmlindex's encoding does.
func TestLegacyCharsetsMatchHTMLIndex(t *testing.T) {
	var labels []string
	for n := 0; n <= 20; n++ {
		labels = append(labels, fmt.Sprintf("iso-8859-%d", n))
	}
	for n := 1240; n <= 1269; n++ {
		labels = append(labels, fmt.Sprintf("windows-%d", n))
	}
	labels = append(labels, "ISO-8859-1", " Windows-1252 ", "iso-8859-8-i", "iso8859-1", "latin1", "windows-874", "koi8-r", "shift_jis", "utf-7")
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	known := 0
	for _, l := range labels {
		want, err := htmlindex.Get(l)
		got := legacyCharset(l)
		inRange := (len(l) <= len("iso-8859-15") && bytes.HasPrefix([]byte(l), []byte("iso-8859-"))) ||
			(len(l) == len("windows-1252") && bytes.HasPrefix([]byte(l), []byte("windows-125")))
		switch {
		case inRange && err == nil && got == nil:
			t.Errorf("%q: htmlindex knows it, legacyCharset does not", l)
			continue
		case got != nil && err != nil:
			t.Errorf("%q: legacyCharset knows it, htmlindex does not", l)
			continue
		case got == nil:
			continue
		}
		known++
		w, err1 := want.NewDecoder().Bytes(all)
		g, err2 := got.NewDecoder().Bytes(all)
		if err1 != nil || err2 != nil || !bytes.Equal(w, g) {
			t.Errorf("%q: decodes as %q (%v), htmlindex as %q (%v)", l, g, err2, w, err1)
		}
	}
	if known != len(legacyCharsets)+2 {
		t.Errorf("%d labels decoded, want %d", known, len(legacyCharsets)+2)
	}
}
