package approval

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/countersign/countersign/approval/jcs"
)

// Canonical returns the RFC 8785 (JCS) form of v's JSON encoding. The same
// value always yields the same bytes, which is what makes a hash of it a
// stable name for "this exact request".
func Canonical(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("canonical: marshal: %w", err)
	}
	out, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("canonical: transform: %w", err)
	}
	return out, nil
}

// SHA256Hex is "sha256:" + the hex digest of b.
func SHA256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// PayloadHash is what a human approves: the hash of the canonical JSON of
// {action, normalized input, principal}. The canonical object is written
// directly (its member names are in order already), so the input is
// canonicalized once rather than encoded and parsed again inside it.
func PayloadHash(action string, input json.RawMessage, principal string) (string, error) {
	if !utf8.ValidString(action) || !utf8.ValidString(principal) {
		return payloadHashSlow(action, input, principal) // as encoding/json repairs them
	}
	in := []byte(input)
	if input == nil {
		in = []byte("null") // what encoding/json writes for a nil RawMessage
	}
	b := make([]byte, 0, len(in)+len(action)+len(principal)+40)
	b = jcs.AppendString(append(b, `{"action":`...), action)
	b, err := jcs.Append(append(b, `,"input":`...), in)
	if err != nil {
		return "", fmt.Errorf("canonical: transform: %w", err)
	}
	b = append(jcs.AppendString(append(b, `,"principal":`...), principal), '}')
	return SHA256Hex(b), nil
}

// payloadHashSlow is the definition of PayloadHash: Canonical of the object.
func payloadHashSlow(action string, input json.RawMessage, principal string) (string, error) {
	c, err := Canonical(struct {
		Action    string          `json:"action"`
		Input     json.RawMessage `json:"input"`
		Principal string          `json:"principal"`
	}{action, input, principal})
	if err != nil {
		return "", err
	}
	return SHA256Hex(c), nil
}

// StateHash is the hash of the canonical snapshot of the fields an action
// depends on.
func StateHash(snapshot any) (string, error) {
	c, err := Canonical(snapshot)
	if err != nil {
		return "", err
	}
	return SHA256Hex(c), nil
}
