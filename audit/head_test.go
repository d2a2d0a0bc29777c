package audit_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/receipt"
	"github.com/countersign/countersign/store"
)

// headKeys verifies signed heads against a signer's JWKS, as countersign
// audit verify --head does.
type headKeys struct{ s *receipt.Signer }

func (k headKeys) VerifyHead(jws string) ([]byte, error) {
	return receipt.VerifyJWS(bg, jws, audit.HeadType, k.s.Keys())
}

// chained is a sealed log, its store and signer, and the head the store
// signs now.
type chained struct {
	log  string
	st   *store.Redis
	sig  *receipt.Signer
	head string
}

func sealedWithHead(t *testing.T) chained {
	t.Helper()
	sts := newStores(t, 1)
	sig := signer(t)
	var out bytes.Buffer
	s := &audit.Sealer{Source: sts[0], Out: &out, Signer: sig, Log: discard(), Now: time.Now, Holder: "x"}
	events(t, sts, []string{"a", "b", "c"}, 6)
	seal(t, s)
	events(t, sts, []string{"a", "b", "c"}, 4)
	seal(t, s)
	jws, claims, err := audit.SignHead(bg, sts[0], sig, "https://cs.example", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(claims.Chains) != sts[0].Shards() {
		t.Fatalf("the head names %d chains, the store has %d", len(claims.Chains), sts[0].Shards())
	}
	return chained{log: out.String(), st: sts[0], sig: sig, head: jws}
}

// checkAgainst verifies log and then checks it against head: the break of
// either, or nil.
func checkAgainst(t *testing.T, log, head string, sig *receipt.Signer, live bool) *audit.Break {
	t.Helper()
	rep, err := audit.Verify(strings.NewReader(log), keys{sig})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Break != nil {
		return rep.Break
	}
	h, err := audit.ParseHead(head, headKeys{sig})
	if err != nil {
		t.Fatal(err)
	}
	_, brk := rep.CheckHead(h, live)
	return brk
}

// lastOf is the index of the last line of the chain with the most entries.
func lastOf(lines []string) (chain string, idx []int) {
	by := map[string][]int{}
	for i, l := range lines {
		e, _, _ := audit.ParseLine([]byte(l))
		by[e.Chain] = append(by[e.Chain], i)
	}
	for c, is := range by {
		if len(is) > len(idx) {
			chain, idx = c, is
		}
	}
	return chain, idx
}

func without(lines []string, drop ...int) string {
	var out []string
	for i, l := range lines {
		keep := true
		for _, d := range drop {
			keep = keep && i != d
		}
		if keep {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n") + "\n"
}

func TestHeadVouchesForAWholeLog(t *testing.T) {
	c := sealedWithHead(t)
	if brk := checkAgainst(t, c.log, c.head, c.sig, false); brk != nil {
		t.Fatalf("a whole log against its own head: %v", brk)
	}
}

// The last lines of a chain are cut: the file alone is still whole, the
// head says entries are missing.
func TestHeadCatchesEventsCutFromTheEnd(t *testing.T) {
	c := sealedWithHead(t)
	lines := strings.Split(strings.TrimSpace(c.log), "\n")
	_, idx := lastOf(lines)
	cut := without(lines, idx[len(idx)-1], idx[len(idx)-2])
	if rep, _ := audit.Verify(strings.NewReader(cut), keys{c.sig}); rep.Break != nil {
		t.Fatalf("the cut file alone: %v (a file alone cannot see a cut end)", rep.Break)
	}
	brk := checkAgainst(t, cut, c.head, c.sig, true)
	if brk == nil || brk.Kind != "cut" {
		t.Fatalf("break = %v, want cut", brk)
	}
}

// A whole chain missing from the file while the head names it: cut.
func TestHeadCatchesAChainCutWhole(t *testing.T) {
	c := sealedWithHead(t)
	lines := strings.Split(strings.TrimSpace(c.log), "\n")
	_, idx := lastOf(lines)
	if brk := checkAgainst(t, without(lines, idx...), c.head, c.sig, true); brk == nil || brk.Kind != "cut" {
		t.Fatalf("break = %v, want cut", brk)
	}
}

func TestVerifyCatchesEventsCutFromTheMiddle(t *testing.T) {
	c := sealedWithHead(t)
	lines := strings.Split(strings.TrimSpace(c.log), "\n")
	_, idx := lastOf(lines)
	brk := checkAgainst(t, without(lines, idx[2]), c.head, c.sig, false)
	if brk == nil || brk.Kind != "deleted" {
		t.Fatalf("break = %v, want deleted", brk)
	}
}

func TestVerifyCatchesReorderedEvents(t *testing.T) {
	c := sealedWithHead(t)
	lines := strings.Split(strings.TrimSpace(c.log), "\n")
	_, idx := lastOf(lines)
	// Two entries of one chain swap places, everything else intact.
	lines[idx[3]], lines[idx[4]] = lines[idx[4]], lines[idx[3]]
	// The later entry now comes first: the one before it is missing there.
	brk := checkAgainst(t, strings.Join(lines, "\n")+"\n", c.head, c.sig, false)
	if brk == nil || brk.Kind != "deleted" {
		t.Fatalf("break = %v, want deleted (an entry before its predecessor)", brk)
	}
}

func TestVerifyCatchesAnEditedEvent(t *testing.T) {
	c := sealedWithHead(t)
	lines := strings.Split(strings.TrimSpace(c.log), "\n")
	_, idx := lastOf(lines)
	i := idx[len(idx)-1]
	lines[i] = strings.Replace(lines[i], `"actor":"`, `"actor":"x`, 1)
	if brk := checkAgainst(t, strings.Join(lines, "\n")+"\n", c.head, c.sig, false); brk == nil || brk.Kind != "edited" {
		t.Fatalf("break = %v, want edited", brk)
	}
}

// A checkpoint whose signature is not the receipt key's.
func TestVerifyCatchesABadCheckpointSignature(t *testing.T) {
	c := sealedWithHead(t)
	lines := strings.Split(strings.TrimSpace(c.log), "\n")
	other := signer(t)
	found := false
	for i, l := range lines {
		var w audit.Line
		_ = json.Unmarshal([]byte(l), &w)
		if w.Audit.Event.Event != audit.CheckpointEvent {
			continue
		}
		// Re-signed with another key and re-hashed: only the key is wrong.
		s := audit.Signed{Chain: w.Audit.Chain, Covers: int64(w.Audit.Details["covers"].(float64)),
			Head: w.Audit.Details["head"].(string), Time: w.Audit.Details["signed_at"].(string)}
		jws, err := other.SignJWS(audit.CheckpointType, s.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		w.Audit.Details["jws"] = jws
		_ = w.Audit.Seal()
		b, _ := json.Marshal(w)
		lines[i], found = string(b), true
		break
	}
	if !found {
		t.Fatal("no checkpoint in the log")
	}
	rep, err := audit.Verify(strings.NewReader(strings.Join(lines, "\n")+"\n"), keys{c.sig})
	if err != nil || rep.Break == nil || rep.Break.Kind != "bad_signature" {
		t.Fatalf("break = %v, %v; want bad_signature", rep.Break, err)
	}
}

// A head whose payload was changed after signing does not verify.
func TestParseHeadRefusesATamperedHead(t *testing.T) {
	c := sealedWithHead(t)
	parts := strings.Split(c.head, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims audit.HeadClaims
	must(t, json.Unmarshal(payload, &claims))
	for i := range claims.Chains {
		if claims.Chains[i].Seq > 2 {
			claims.Chains[i].Seq -= 2 // as if the log ended earlier
			break
		}
	}
	b, _ := json.Marshal(claims)
	forged := parts[0] + "." + base64.RawURLEncoding.EncodeToString(b) + "." + parts[2]
	if _, err := audit.ParseHead(forged, headKeys{c.sig}); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Fatalf("a tampered head: %v", err)
	}
	// A receipt-typed or checkpoint-typed JWS is no head either.
	cp, _ := c.sig.SignJWS(audit.CheckpointType, payload)
	if _, err := audit.ParseHead(cp, headKeys{c.sig}); err == nil {
		t.Fatal("a checkpoint's JWS was taken for a head")
	}
}

// A head signed by a key the JWKS does not publish.
func TestParseHeadRefusesAnotherKey(t *testing.T) {
	c := sealedWithHead(t)
	other := signer(t)
	jws, _, err := audit.SignHead(bg, c.st, other, "https://cs.example", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := audit.ParseHead(jws, headKeys{c.sig}); err == nil {
		t.Fatal("a head signed by an unknown key was accepted")
	}
}

// A head of another log (another deployment's chains of the same names):
// the entry at the head's seq has another hash.
func TestHeadOfAnotherChainIsRefused(t *testing.T) {
	a := sealedWithHead(t)
	b := sealedWithHead(t)
	// b's head, re-signed with a's key, so that only the chain differs.
	h, err := audit.ParseHead(b.head, headKeys{b.sig})
	must(t, err)
	payload, _ := json.Marshal(h)
	jws, err := a.sig.SignJWS(audit.HeadType, payload)
	must(t, err)
	// Both logs hold as many entries per chain (the same principals and
	// counts), so the hashes at the head's seqs are what differs.
	brk := checkAgainst(t, a.log, jws, a.sig, true)
	if brk == nil || brk.Kind != "other_chain" {
		t.Fatalf("break = %v, want other_chain", brk)
	}
}

// A head taken before the file's last entries cannot vouch for its end:
// refused when it comes from a file, accepted (and counted) when it was
// fetched before the file was read.
func TestHeadOlderThanTheFileIsRefused(t *testing.T) {
	sts := newStores(t, 1)
	sig := signer(t)
	var out bytes.Buffer
	s := &audit.Sealer{Source: sts[0], Out: &out, Signer: sig, Log: discard(), Now: time.Now, Holder: "x"}
	events(t, sts, []string{"a"}, 3)
	seal(t, s)
	old, _, err := audit.SignHead(bg, sts[0], sig, "https://cs.example", time.Now())
	must(t, err)
	events(t, sts, []string{"a"}, 3)
	seal(t, s)
	if brk := checkAgainst(t, out.String(), old, sig, false); brk == nil || brk.Kind != "head_older" {
		t.Fatalf("break = %v, want head_older", brk)
	}
	rep, _ := audit.Verify(strings.NewReader(out.String()), keys{sig})
	h, _ := audit.ParseHead(old, headKeys{sig})
	hc, brk := rep.CheckHead(h, true)
	if brk != nil || hc.After != 6 {
		t.Fatalf("live: %v, %d entries after the head, want 6", brk, hc.After)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// failingWriter refuses every write, as a full disk would.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// The store's head moves only after the sealer wrote the entries it
// names: when the write fails, the head stays where the file ends, so a
// head never vouches for an entry that no log holds.
func TestHeadNeverPassesWhatWasWritten(t *testing.T) {
	sts := newStores(t, 1)
	sig := signer(t)
	events(t, sts, []string{"a"}, 2)
	s := &audit.Sealer{Source: sts[0], Out: failingWriter{}, Signer: sig, Log: discard(), Now: time.Now, Holder: "x"}
	if _, err := s.SealOnce(bg); err == nil {
		t.Fatal("sealing into a failing writer did not fail")
	}
	heads, err := sts[0].AuditHeads(bg)
	must(t, err)
	for _, h := range heads {
		if h.Seq != 0 || h.Hash != "" {
			t.Fatalf("chain %s moved to seq %d though nothing was written", h.Chain, h.Seq)
		}
	}
	var out bytes.Buffer
	s.Out = &out
	seal(t, s)
	heads, err = sts[0].AuditHeads(bg)
	must(t, err)
	rep, _ := audit.Verify(strings.NewReader(out.String()), keys{sig})
	for _, h := range heads {
		if c := rep.Chains[h.Chain]; h.Seq != c.Last {
			t.Fatalf("chain %s: head at seq %d, the log ends at %d", h.Chain, h.Seq, c.Last)
		}
	}
}

// BenchmarkSignHead is GET /v1/admin/audit/head without HTTP: every
// chain's head read from the store (one pipelined round trip of an HMGET
// per shard) and signed.
func BenchmarkSignHead(b *testing.B) {
	srv := redistest.Start(b)
	st := store.New(srv.Client(b), nil)
	b.Cleanup(func() { _ = st.Close() })
	k, _ := receipt.GenerateKey()
	sig, _ := receipt.NewSigner(k)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := audit.SignHead(bg, st, sig, "https://cs.example", time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}
