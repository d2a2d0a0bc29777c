package approval

import (
	"crypto/rand"
	"encoding/base32"
	"regexp"
	"strings"
)

var keyEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

var keyPattern = regexp.MustCompile(`^op_[a-z2-7]{26}$`)

// NewOperationKey returns "op_" + 26 base32 characters carrying 128 random bits.
func NewOperationKey() string {
	return "op_" + RandomToken(16)
}

// ValidOperationKey reports whether s has the shape of an operation key.
// Callers check it before touching the store so that ill-formed keys are
// rejected as not_found without a round trip.
func ValidOperationKey(s string) bool { return keyPattern.MatchString(s) }

// RandomToken returns n random bytes as lowercase unpadded base32.
func RandomToken(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("approval: crypto/rand failed: " + err.Error())
	}
	return strings.ToLower(keyEncoding.EncodeToString(b))
}
