package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// A file alone proves only its own prefix: an entry cut from its end
// leaves a shorter chain that is still whole. The signed current head
// (GET /v1/admin/audit/head) says where every chain of the store stands,
// signed with the receipt key, so that a file checked against it shows
// whether anything after its last line is missing.

// HeadType is the JWS typ of a signed head.
const HeadType = "countersign-audit-head+jwt"

// ChainHead is where one chain stands: the seq and hash of its last
// sealed entry (seq 0 and no hash: nothing sealed yet).
type ChainHead struct {
	Chain string `json:"chain"`
	Seq   int64  `json:"seq"`
	Hash  string `json:"hash"`
}

// HeadClaims is what a signed head signs.
type HeadClaims struct {
	Issuer   string      `json:"iss"`
	IssuedAt int64       `json:"iat"`
	Chains   []ChainHead `json:"chains"`
}

// HeadSource reads every chain's head from the store (store.Redis).
type HeadSource interface {
	// AuditHeads returns the head of every chain, each read atomically
	// (its seq and hash from one moment); a head never names an entry
	// that has not been written to the audit log yet.
	AuditHeads(ctx context.Context) ([]ChainHead, error)
}

// HeadKeys checks a signed head's JWS against the published keys and
// returns what it signs.
type HeadKeys interface {
	VerifyHead(jws string) ([]byte, error)
}

// SignHead reads the chains' heads and signs them as issuer at now.
func SignHead(ctx context.Context, src HeadSource, signer Signer, issuer string, now time.Time) (string, HeadClaims, error) {
	heads, err := src.AuditHeads(ctx)
	if err != nil {
		return "", HeadClaims{}, err
	}
	slices.SortFunc(heads, func(a, b ChainHead) int {
		switch {
		case a.Chain < b.Chain:
			return -1
		case a.Chain > b.Chain:
			return 1
		}
		return 0
	})
	c := HeadClaims{Issuer: issuer, IssuedAt: now.Unix(), Chains: heads}
	payload, err := json.Marshal(c)
	if err != nil {
		return "", HeadClaims{}, fmt.Errorf("audit: encode head: %w", err)
	}
	jws, err := signer.SignJWS(HeadType, payload)
	if err != nil {
		return "", HeadClaims{}, fmt.Errorf("audit: sign head: %w", err)
	}
	return jws, c, nil
}

// ParseHead verifies a signed head's signature with keys and returns its
// claims. The error says why a head is refused (unknown key, bad
// signature, not a head).
func ParseHead(jws string, keys HeadKeys) (*HeadClaims, error) {
	payload, err := keys.VerifyHead(jws)
	if err != nil {
		return nil, fmt.Errorf("the signed head does not verify: %w", err)
	}
	var c HeadClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, fmt.Errorf("the signed head's claims are unreadable: %w", err)
	}
	if c.IssuedAt == 0 || len(c.Chains) == 0 {
		return nil, fmt.Errorf("the signed head has no iat or no chains")
	}
	for _, h := range c.Chains {
		if h.Chain == "" || h.Seq < 0 || (h.Seq > 0) != (h.Hash != "") {
			return nil, fmt.Errorf("the signed head names a chain without a seq and hash")
		}
	}
	return &c, nil
}

// HeadCheck is what checking a file against a head found, chain by chain.
type HeadCheck struct {
	// Covered is, per chain, the seq up to which the head vouches that
	// the file is whole; After counts the entries the file holds after
	// the head (a live log read after its head was fetched).
	Covered map[string]int64
	After   int64
}

// CheckHead checks the chains of a verified file against a signed head:
// every chain the head names must reach the head's seq in the file, with
// the head's hash there. It returns a Break (kind cut, other_chain or
// head_older) at the first chain that does not. A file that goes on after
// the head is refused (head_older: the head cannot say whether anything
// was cut from its end) unless live is true, which says that the head was
// fetched before the file was read, so that what follows it was written
// after it. Call it only on a report without a break.
func (r *Report) CheckHead(h *HeadClaims, live bool) (*HeadCheck, *Break) {
	out := &HeadCheck{Covered: map[string]int64{}}
	at := time.Unix(h.IssuedAt, 0).UTC().Format(time.RFC3339)
	named := map[string]bool{}
	for _, ch := range h.Chains {
		named[ch.Chain] = true
		st := r.states[ch.Chain]
		brk := func(kind, format string, args ...any) *Break {
			b := &Break{Chain: ch.Chain, Seq: ch.Seq, Kind: kind, Detail: fmt.Sprintf(format, args...)}
			if st != nil {
				b.File, b.Line = st.lastFile, st.lastLine
			}
			return b
		}
		switch {
		case ch.Seq == 0 && st == nil:
			continue
		case st == nil:
			return out, brk("cut", "the head (signed %s) says the chain reached seq %d; the file holds none of it", at, ch.Seq)
		case ch.Seq == 0:
			return out, brk("head_older", "the head (signed %s) says the chain is empty; the file holds it up to seq %d", at, st.Last)
		case st.Last < ch.Seq:
			return out, brk("cut", "the file ends at seq %d; the head (signed %s) says the chain reached seq %d: entries %d to %d are missing",
				st.Last, at, ch.Seq, st.Last+1, ch.Seq)
		case ch.Seq < st.First:
			return out, brk("head_older", "the head (signed %s) names seq %d, before the file's first entry (seq %d)", at, ch.Seq, st.First)
		}
		if got := st.hashes[ch.Seq]; got != ch.Hash {
			return out, brk("other_chain", "the head (signed %s) says seq %d is %s; the file's entry there is %s", at, ch.Seq, short(ch.Hash), short(got))
		}
		if st.Last > ch.Seq {
			if !live {
				return out, brk("head_older", "the head (signed %s) stops at seq %d; the file goes on to seq %d: a head older than the file cannot say whether events were cut from its end",
					at, ch.Seq, st.Last)
			}
			out.After += st.Last - ch.Seq
		}
		out.Covered[ch.Chain] = ch.Seq
	}
	for _, name := range r.Names() {
		if !named[name] {
			st := r.states[name]
			return out, &Break{File: st.lastFile, Line: st.lastLine, Chain: name, Seq: st.Last, Kind: "other_chain",
				Detail: "the head names no such chain"}
		}
	}
	return out, nil
}
