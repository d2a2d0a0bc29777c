package main

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/countersign/countersign/receipt"
)

// parseReceiptKeys reads COUNTERSIGN_RECEIPT_KEYS: kid:base64(32-byte
// Ed25519 seed)[,…]; the first signs, all are published. Errors name the
// entry and the kid, never a seed.
func parseReceiptKeys(spec string) (*receipt.Signer, error) {
	var keys []receipt.SigningKey
	for i, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("COUNTERSIGN_RECEIPT_KEYS: entry %d is empty", i+1)
		}
		kid, b64, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("COUNTERSIGN_RECEIPT_KEYS: entry %d is not kid:base64seed", i+1)
		}
		if !receipt.ValidKeyID(kid) {
			return nil, fmt.Errorf("COUNTERSIGN_RECEIPT_KEYS: entry %d: the kid must be 1-64 letters, digits, '.', '_' or '-'", i+1)
		}
		seed, err := decodeSeed(b64)
		if err != nil {
			return nil, fmt.Errorf("COUNTERSIGN_RECEIPT_KEYS: key %q: %v", kid, err)
		}
		k, err := receipt.KeyFromSeed(kid, seed)
		if err != nil {
			return nil, fmt.Errorf("COUNTERSIGN_RECEIPT_KEYS: key %q: the seed must be 32 bytes, not %d", kid, len(seed))
		}
		keys = append(keys, k)
	}
	s, err := receipt.NewSigner(keys...)
	if err != nil {
		return nil, fmt.Errorf("COUNTERSIGN_RECEIPT_KEYS: %v", err)
	}
	return s, nil
}

// decodeSeed accepts standard or URL-safe base64, padded or not.
func decodeSeed(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, fmt.Errorf("the seed is not base64")
}

// receiptSigner builds the receipt signer from the environment. Without
// COUNTERSIGN_RECEIPT_KEYS it generates a key; generated says so, for the
// banner (development) or a warning (otherwise).
func (m *Main) receiptSigner() (s *receipt.Signer, generated bool, err error) {
	if spec := m.get("COUNTERSIGN_RECEIPT_KEYS", ""); spec != "" {
		s, err := parseReceiptKeys(spec)
		return s, false, err
	}
	k, err := receipt.GenerateKey()
	if err != nil {
		return nil, false, err
	}
	s, err = receipt.NewSigner(k)
	return s, true, err
}
