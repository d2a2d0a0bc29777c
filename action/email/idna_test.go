package email

import "testing"

func TestPunycode(t *testing.T) {
	tests := []struct{ in, want string }{
		{"bücher", "bcher-kva"},
		{"münchen", "mnchen-3ya"},
		{"中国", "fiqs8s"},
		{"пример", "e1afmkfd"},
		{"例え", "r8jz45g"},
		// RFC 3492 section 7.1, (A) Arabic (Egyptian).
		{"\u0644\u064A\u0647\u0645\u0627\u0628\u062A\u0643\u0644\u0645\u0648\u0634\u0639\u0631\u0628\u064A\u061F", "egbpdaj6bu4bxfgehfvwxn"},
		// RFC 3492 section 7.1, (L) 3<nen>B<gumi><kinpachi><sensei>.
		{"3\u5E74b\u7D44\u91D1\u516B\u5148\u751F", "3b-ww4c5e180e575a65lsy2b"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got, want := punycode(tt.in), tt.want; got != want {
				t.Errorf("punycode(%q) = %q, want %q", tt.in, got, want)
			}
		})
	}
}

func TestNormalizeDomain(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"example.com", "example.com", true},
		{"Example.COM", "example.com", true},
		{"example.com.", "example.com", true},
		{"BÜCHER.example", "xn--bcher-kva.example", true},
		{"XN--BCHER-KVA.example", "xn--bcher-kva.example", true},
		{"bu\u0308cher.example", "xn--bcher-kva.example", true}, // decomposed ü, NFC
		{"пример.испытание", "xn--e1afmkfd.xn--80akhbyknj4f", true},
		{"a。example", "a.example", true},
		{"localhost", "", false},
		{"", "", false},
		{"a..example", "", false},
		{"-a.example", "", false},
		{"a-.example", "", false},
		{"a_b.example", "", false},
		{"10.0.0.1", "", false},
		{"[10.0.0.1]", "", false},
		{"exa mple.com", "", false},
		{"☃.example", "", false},
		{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := normalizeDomain(tt.in)
			if ok := err == nil; ok != tt.ok {
				t.Fatalf("normalizeDomain(%q) = %q, %v; want ok=%v", tt.in, got, err, tt.ok)
			}
			if got != tt.want {
				t.Errorf("normalizeDomain(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
