package audit_test

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/audit"
)

// Each refusal of the chain verifier, on chains built here entry by entry,
// so that each case breaks exactly one rule and the report says which,
// where, and what it counted up to there.

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// chainOf builds n sealed entries of chain name, seq from..from+n-1, the
// first linked to prev.
func chainOf(t *testing.T, name string, from int64, n int, prev string) []audit.Entry {
	t.Helper()
	var out []audit.Entry
	for i := range n {
		e := audit.Entry{Event: approval.Event{Time: t0.Add(time.Duration(i) * time.Second), Operation: "op" + fmt.Sprint(i),
			Event: "prepared", Actor: "principal:agent"}, Chain: name, Seq: from + int64(i), Prev: prev}
		if err := e.Seal(); err != nil {
			t.Fatal(err)
		}
		prev = e.Hash
		out = append(out, e)
	}
	return out
}

// checkpointAfter is the signed checkpoint that follows last, signing
// what (by default, last's seq and hash).
func checkpointAfter(t *testing.T, sig interface {
	SignJWS(string, []byte) (string, error)
}, last audit.Entry, signed *audit.Signed) audit.Entry {
	t.Helper()
	s := audit.Signed{Chain: last.Chain, Covers: last.Seq, Head: last.Hash, Time: t0.Format(time.RFC3339Nano)}
	jws, err := sig.SignJWS(audit.CheckpointType, s.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if signed != nil { // the details say one thing, the signature another
		jws, err = sig.SignJWS(audit.CheckpointType, signed.Bytes())
		if err != nil {
			t.Fatal(err)
		}
	}
	e := audit.Entry{Event: approval.Event{Time: t0, Event: audit.CheckpointEvent, Actor: "system",
		Details: map[string]any{"covers": s.Covers, "head": s.Head, "signed_at": s.Time, "jws": jws}},
		Chain: last.Chain, Seq: last.Seq + 1, Prev: last.Hash}
	if err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	return e
}

func lineOf(t *testing.T, e audit.Entry) string {
	t.Helper()
	b, err := json.Marshal(audit.Line{Audit: e})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func logOf(t *testing.T, es ...audit.Entry) string {
	var b strings.Builder
	for _, e := range es {
		b.WriteString(lineOf(t, e) + "\n")
	}
	return b.String()
}

func verify(t *testing.T, log string, k audit.KeySource) *audit.Report {
	t.Helper()
	rep, err := audit.Verify(strings.NewReader(log), k)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func wantBreak(t *testing.T, rep *audit.Report, kind string, line int, chain string, seq int64, detail string) {
	t.Helper()
	b := rep.Break
	if b == nil {
		t.Fatalf("no break, want %s at line %d", kind, line)
	}
	if b.Kind != kind || b.Line != line || b.Chain != chain || b.Seq != seq || !strings.Contains(b.Detail, detail) {
		t.Fatalf("break %+v, want %s at line %d (chain %s seq %d, %q)", *b, kind, line, chain, seq, detail)
	}
}

func TestVerifyEachRefusalOfTheChain(t *testing.T) {
	sig := signer(t)
	a := chainOf(t, "a", 1, 4, "")
	b := chainOf(t, "b", 1, 2, "")
	cp := checkpointAfter(t, sig, a[3], nil)
	after := chainOf(t, "a", 6, 2, cp.Hash)

	t.Run("whole", func(t *testing.T) {
		log := `{"level":"INFO","msg":"a log line"}` + "\n" + logOf(t, a[0], b[0], a[1], a[2], b[1], a[3], cp, after[0], after[1])
		rep := verify(t, log, keys{sig})
		if rep.Break != nil || !rep.Signatures || rep.Lines != 10 || rep.Entries != 9 {
			t.Fatalf("report %+v, break %v", rep, rep.Break)
		}
		if got, want := rep.Chains["a"], (audit.Chain{First: 1, Last: 7, Checkpoints: 1, Unsigned: 2}); got != want {
			t.Fatalf("chain a %+v, want %+v", got, want)
		}
		if got, want := rep.Chains["b"], (audit.Chain{First: 1, Last: 2, Unsigned: 2}); got != want {
			t.Fatalf("chain b %+v, want %+v", got, want)
		}
		if got := strings.Join(rep.Names(), ","); got != "a,b" {
			t.Fatalf("names %s", got)
		}
		// Without keys the links are checked and no signature is counted.
		rep = verify(t, log, nil)
		if rep.Break != nil || rep.Signatures || rep.Chains["a"].Checkpoints != 0 || rep.Chains["a"].Unsigned != 2 {
			t.Fatalf("without keys: %+v %v", rep.Chains["a"], rep.Break)
		}
	})
	t.Run("a rotated file starts part way", func(t *testing.T) {
		rep := verify(t, logOf(t, a[2], a[3], cp), keys{sig})
		if rep.Break != nil || rep.Chains["a"] != (audit.Chain{First: 3, Last: 5, Checkpoints: 1}) {
			t.Fatalf("%+v %v", rep.Chains["a"], rep.Break)
		}
	})
	t.Run("a line written twice", func(t *testing.T) {
		if rep := verify(t, logOf(t, a[0], a[1], a[1], a[2]), nil); rep.Break != nil || rep.Chains["a"].Last != 3 || rep.Chains["a"].Unsigned != 3 {
			t.Fatalf("%+v %v", rep.Chains["a"], rep.Break)
		}
	})
	t.Run("unreadable", func(t *testing.T) {
		noChain := a[1]
		noChain.Chain = ""
		zero := a[1]
		zero.Seq = 0
		for name, bad := range map[string]string{
			"no chain": lineOf(t, noChain), "seq 0": lineOf(t, zero), "not an entry": `{"audit":"x"}`,
		} {
			rep := verify(t, "log line\n"+logOf(t, a[0])+bad+"\n"+logOf(t, a[2]), nil)
			if rep.Break == nil || rep.Break.Kind != "unreadable" || rep.Break.Line != 3 || rep.Entries != 2 {
				t.Fatalf("%s: %+v", name, rep.Break)
			}
		}
	})
	t.Run("edited", func(t *testing.T) {
		edited := strings.Replace(lineOf(t, a[1]), `"principal:agent"`, `"principal:other"`, 1)
		rep := verify(t, logOf(t, a[0])+edited+"\n"+logOf(t, a[2]), nil)
		wantBreak(t, rep, "edited", 2, "a", 2, "does not match its hash")
		hashless := strings.Replace(lineOf(t, a[1]), a[1].Hash, "", 1)
		wantBreak(t, verify(t, logOf(t, a[0])+hashless+"\n", nil), "edited", 2, "a", 2, "")
	})
	t.Run("a first entry that links elsewhere", func(t *testing.T) {
		forged := chainOf(t, "a", 1, 1, "sha256:elsewhere")[0]
		wantBreak(t, verify(t, logOf(t, b[0], forged), nil), "inserted", 2, "a", 1, "first entry")
	})
	t.Run("inserted", func(t *testing.T) {
		forged := chainOf(t, "a", 3, 1, "sha256:forged")[0]
		wantBreak(t, verify(t, logOf(t, a[0], a[1], forged, a[3]), nil), "inserted", 3, "a", 3, "seq 2")
	})
	t.Run("deleted", func(t *testing.T) {
		wantBreak(t, verify(t, logOf(t, a[0], b[0], a[3]), nil), "deleted", 3, "a", 4, "entries 2 to 3 are missing")
		// One missing is a gap too (seq+2).
		wantBreak(t, verify(t, logOf(t, a[0], a[2]), nil), "deleted", 2, "a", 3, "entries 2 to 2")
	})
	t.Run("reordered", func(t *testing.T) {
		wantBreak(t, verify(t, logOf(t, a[0], a[1], a[2], a[1]), nil), "reordered", 4, "a", 2, "after seq 3")
		// Another entry with the seq of the one before: a fork.
		fork := chainOf(t, "a", 2, 1, a[0].Hash)[0]
		fork.Actor = "approver:mallory"
		_ = fork.Seal()
		wantBreak(t, verify(t, logOf(t, a[0], a[1], fork), nil), "reordered", 3, "a", 2, "after seq 2")
	})
	t.Run("the stop is the first break", func(t *testing.T) {
		rep := verify(t, logOf(t, a[0], a[1], b[0], a[3], b[1]), nil)
		wantBreak(t, rep, "deleted", 4, "a", 4, "")
		if rep.Chains["a"].Last != 2 || rep.Chains["b"].Last != 1 {
			t.Fatalf("counted past the break: %+v", rep.Chains)
		}
	})
}

func TestVerifyEachRefusalOfACheckpoint(t *testing.T) {
	sig := signer(t)
	a := chainOf(t, "a", 1, 3, "")
	t.Run("signed by another key", func(t *testing.T) {
		cp := checkpointAfter(t, signer(t), a[2], nil)
		wantBreak(t, verify(t, logOf(t, a[0], a[1], a[2], cp), keys{sig}), "bad_signature", 4, "a", 4, "signature")
		// Without keys the signature is not checked.
		if rep := verify(t, logOf(t, a[0], a[1], a[2], cp), nil); rep.Break != nil {
			t.Fatal(rep.Break)
		}
	})
	t.Run("signs another head than its details say", func(t *testing.T) {
		cp := checkpointAfter(t, sig, a[2], &audit.Signed{Chain: "a", Covers: 2, Head: a[1].Hash, Time: t0.Format(time.RFC3339Nano)})
		wantBreak(t, verify(t, logOf(t, a[0], a[1], a[2], cp), keys{sig}), "bad_signature", 4, "a", 4, "covers something else")
	})
	t.Run("its head is not the hash of the entry it covers", func(t *testing.T) {
		cp := checkpointAfter(t, sig, a[2], nil)
		cp.Details["head"] = a[1].Hash
		_ = cp.Seal()
		// Caught from the chain itself, with or without keys.
		for _, k := range []audit.KeySource{nil, keys{sig}} {
			wantBreak(t, verify(t, logOf(t, a[0], a[1], a[2], cp), k), "bad_signature", 4, "a", 4, "signs seq 3")
		}
	})
	t.Run("covers an entry before the file", func(t *testing.T) {
		cp := checkpointAfter(t, sig, a[2], nil)
		// The covered entry is not in the file: the signature alone is checked.
		if rep := verify(t, logOf(t, cp), keys{sig}); rep.Break != nil || rep.Chains["a"].Checkpoints != 1 {
			t.Fatalf("%+v %v", rep.Chains["a"], rep.Break)
		}
		cp.Details["covers"] = 9
		_ = cp.Seal()
		wantBreak(t, verify(t, logOf(t, cp), keys{sig}), "bad_signature", 1, "a", 4, "covers something else")
	})
}

func TestVerifyEachRefusalAcrossFiles(t *testing.T) {
	a := chainOf(t, "a", 1, 5, "")
	b := chainOf(t, "b", 1, 3, "")
	files := func(logs map[string]string) map[string]io.Reader {
		out := map[string]io.Reader{}
		for n, l := range logs {
			out[n] = strings.NewReader(l)
		}
		return out
	}
	// Each replica wrote while it held the lease: chains run on in another
	// file, and a file's own order is not the chain's.
	rep, err := audit.VerifyFiles(files(map[string]string{
		"r2.log": logOf(t, b[2], a[3], a[4]),
		"r1.log": logOf(t, a[2], b[0], a[0], b[1], a[1]),
	}), nil)
	if err != nil || rep.Break != nil {
		t.Fatalf("split chains: %v %v", rep.Break, err)
	}
	if rep.Chains["a"] != (audit.Chain{First: 1, Last: 5, Unsigned: 5}) || rep.Chains["b"] != (audit.Chain{First: 1, Last: 3, Unsigned: 3}) {
		t.Fatalf("chains %+v", rep.Chains)
	}
	// A gap across files names the file and line of the entry after it.
	rep, err = audit.VerifyFiles(files(map[string]string{
		"r1.log": logOf(t, a[0], a[1]),
		"r2.log": logOf(t, b[0], a[4]),
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantBreak(t, rep, "deleted", 2, "a", 5, "entries 3 to 4")
	if rep.Break.File != "r2.log" || !strings.HasPrefix(rep.Break.Error(), "r2.log:2: chain a, seq 5: deleted") {
		t.Fatalf("break in %q: %s", rep.Break.File, rep.Break.Error())
	}
	// An edited line stops the read of its file.
	rep, _ = audit.VerifyFiles(files(map[string]string{
		"r1.log": logOf(t, a[0]),
		"r2.log": strings.Replace(logOf(t, a[1]), `"op1"`, `"op9"`, 1),
	}), nil)
	if rep.Break == nil || rep.Break.Kind != "edited" || rep.Break.File != "r2.log" || rep.Break.Line != 1 {
		t.Fatalf("edited: %+v", rep.Break)
	}
	// One file's break reads as a line, without a file name.
	one := verify(t, logOf(t, a[0], a[2]), nil)
	if got := one.Break.Error(); got != "line 2: chain a, seq 3: deleted (entries 2 to 2 are missing)" {
		t.Fatalf("error %q", got)
	}
}
