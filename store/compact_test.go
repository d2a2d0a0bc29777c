package store

import (
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

func TestPackKeepsWhatDoesNotShrink(t *testing.T) {
	prose := strings.Repeat("Thank you for your patience while we put together the figures. ", 20)
	for _, tc := range []struct {
		name    string
		v       string
		smaller bool
	}{
		{"small", `{"text":"hi"}`, false},
		{"prose", `{"text":"` + prose + `"}`, true},
		// Random letters carry 6 bits in 8: entropy coding saves a fifth.
		{"random letters", `{"text":"` + random(2000) + `"}`, true},
		{"noise", noise(2000), false},
		{"empty", "", false},
	} {
		p := pack(tc.v)
		if got := len(p) < len(tc.v); got != tc.smaller {
			t.Errorf("%s: packed %d → %d bytes", tc.name, len(tc.v), len(p))
		}
		if tc.smaller != strings.HasPrefix(p, zstdMagic) {
			t.Errorf("%s: compressed is %v", tc.name, strings.HasPrefix(p, zstdMagic))
		}
		back, err := unpack(p)
		if err != nil || back != tc.v {
			t.Errorf("%s: unpack gave %d bytes, %v", tc.name, len(back), err)
		}
	}
}

// noise is n random bytes: nothing can shrink it.
func noise(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return string(b)
}

func random(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)[:n]
}

func TestUnpackRefusesWhatItCannotRead(t *testing.T) {
	if _, err := unpack(zstdMagic + "garbage"); err == nil {
		t.Fatal("a broken value read")
	}
	// A frame that inflates past the limit is refused, not expanded.
	enc, _ := zstd.NewWriter(nil)
	bomb := enc.EncodeAll(make([]byte, packLimit+1), nil)
	if _, err := unpack(string(bomb)); err == nil {
		t.Fatal("a value larger than the limit inflated")
	}
}

// BenchmarkPack is what keeping a 1 KiB input compressed costs: once when
// it is stored, and at every read.
func BenchmarkPack(b *testing.B) {
	in := `{"from":{"address":"agent@corp.example"},"subject":"Quarterly figures","text":"` +
		strings.Repeat("Thank you for your patience while we put together the figures. ", 14) + `","to":[{"address":"ada@client.example"}]}`
	p := pack(in)
	b.Logf("%d bytes stored as %d", len(in), len(p))
	b.Run("pack", func(b *testing.B) {
		for b.Loop() {
			pack(in)
		}
	})
	b.Run("unpack", func(b *testing.B) {
		for b.Loop() {
			if _, err := unpack(p); err != nil {
				b.Fatal(err)
			}
		}
	})
}
