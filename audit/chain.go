// Package audit is countersign's tamper-evident audit log (SPEC §9, guarantee
// 12): every event of every operation, in one hash chain per store shard.
//
// The order of a chain is fixed where events are written: each transition
// script appends its event to its shard's audit stream in Redis, in the
// same step as the transition, so replicas writing at once keep one order.
// A sealer (one replica at a time) then numbers the events (seq), links
// each to the one before (prev) and hashes it (SHA-256 over its canonical
// JSON without "hash"), writes them as JSON lines, and signs a checkpoint
// at least every 1,000 events or 10 minutes. An edited, deleted, inserted
// or reordered line then breaks the chain, and Verify says where.
package audit

import (
	"encoding/json"
	"fmt"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/approval/jcs"
)

// Entry is one line of the audit log: an event and its place in its chain.
type Entry struct {
	approval.Event
	Chain string `json:"chain"`
	Seq   int64  `json:"seq"`
	Prev  string `json:"prev"`
	Hash  string `json:"hash,omitempty"`
}

// Line is how an entry is written: wrapped, so that audit lines can share a
// stream (stderr) with logs.
type Line struct {
	Audit Entry `json:"audit"`
}

// Seal sets e's hash from its content and place.
func (e *Entry) Seal() error {
	h, err := e.digest()
	if err != nil {
		return err
	}
	e.Hash = h
	return nil
}

// sealLine seals e and appends its line to dst: exactly what
// json.Marshal(Line{Audit: e}) writes (Hash is the entry's last field),
// built from the encoding that was hashed instead of encoding it again.
func (e *Entry) sealLine(dst []byte) ([]byte, error) {
	e.Hash = ""
	raw, err := json.Marshal(e)
	if err != nil {
		return dst, fmt.Errorf("audit: encode: %w", err)
	}
	c, err := jcs.Transform(raw)
	if err != nil {
		return dst, fmt.Errorf("audit: canonical form: %w", err)
	}
	e.Hash = approval.SHA256Hex(c)
	dst = append(append(dst, `{"audit":`...), raw[:len(raw)-1]...)
	return append(append(append(dst, `,"hash":"`...), e.Hash...), `"}}`...), nil
}

// digest is SHA-256 over the canonical JSON of the entry without its hash.
// It is digestOf of the entry as written, without the decode and re-encode
// that digestOf needs for a line it did not write: the encoding has unique
// member names and, with Hash empty, no "hash".
func (e Entry) digest() (string, error) {
	e.Hash = ""
	raw, err := json.Marshal(e)
	if err != nil {
		return "", fmt.Errorf("audit: encode: %w", err)
	}
	c, err := jcs.Transform(raw)
	if err != nil {
		return "", fmt.Errorf("audit: canonical form: %w", err)
	}
	return approval.SHA256Hex(c), nil
}

// digestOf hashes a written entry exactly as written (its "hash" left
// out), so that verifying never depends on decoding and re-encoding it.
func digestOf(raw []byte) (string, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return "", fmt.Errorf("audit: not an object: %w", err)
	}
	delete(obj, "hash")
	b, err := json.Marshal(obj)
	if err != nil {
		return "", err
	}
	c, err := jcs.Transform(b)
	if err != nil {
		return "", fmt.Errorf("audit: canonical form: %w", err)
	}
	return approval.SHA256Hex(c), nil
}

// Checkpoint events sign the head of a chain: the hash of the entry with
// seq Covers. Their details hold what is signed and the signature.
const CheckpointEvent = "checkpoint"

// Signed is what a checkpoint signs.
type Signed struct {
	Chain  string `json:"chain"`
	Covers int64  `json:"covers"`
	Head   string `json:"head"`
	Time   string `json:"time"`
}

// Bytes is the canonical form that is signed.
func (s Signed) Bytes() []byte {
	b, _ := approval.Canonical(s)
	return b
}

// CheckpointType is the JWS typ of a checkpoint's signature.
const CheckpointType = "countersign-checkpoint+jwt"

// Signer signs checkpoints as compact JWS with the receipt key (its public
// half is in the JWKS; receipt.Signer).
type Signer interface {
	SignJWS(typ string, payload []byte) (string, error)
}

// KeySource checks a checkpoint's JWS against the published keys and
// returns what it signs.
type KeySource interface {
	VerifyCheckpoint(jws string) ([]byte, error)
}

// ParseLine reads one line; ok is false for lines that are not audit lines
// (logs sharing the stream).
func ParseLine(b []byte) (Entry, bool, error) {
	var probe map[string]json.RawMessage
	if json.Unmarshal(b, &probe) != nil || probe["audit"] == nil {
		return Entry{}, false, nil
	}
	var l Line
	if err := json.Unmarshal(b, &l); err != nil {
		return Entry{}, true, err
	}
	return l.Audit, true, nil
}
