package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Report is what Verify found.
type Report struct {
	Lines   int              // lines read
	Entries int              // audit entries among them
	Chains  map[string]Chain // by chain name
	// Break is the first break found; nil when every chain is whole.
	Break *Break
	// Signatures says whether checkpoint signatures were checked (a key
	// source was given).
	Signatures bool

	states map[string]*chainState // what CheckHead compares
}

// Chain summarises one chain of the file.
type Chain struct {
	First, Last int64 // seq of its first and last entry in the file
	Checkpoints int   // signed checkpoints verified
	Unsigned    int64 // entries after the last checkpoint (not yet covered by a signature)
}

// Break is where a chain stops holding.
type Break struct {
	File  string // the file, when several were checked
	Line  int    // 1-based line of the file
	Chain string //
	Seq   int64  // seq of the entry on that line
	// Kind: edited (content does not match its hash), deleted (entries are
	// missing before this one), inserted (it does not follow the entry
	// before it), reordered (it comes after a later entry), bad_signature,
	// unreadable.
	Kind   string
	Detail string
}

func (b *Break) Error() string {
	where := fmt.Sprintf("line %d", b.Line)
	if b.File != "" {
		where = b.File + ":" + fmt.Sprint(b.Line)
	}
	return fmt.Sprintf("%s: chain %s, seq %d: %s (%s)", where, b.Chain, b.Seq, b.Kind, b.Detail)
}

type chainState struct {
	Chain
	last   Entry
	hashes map[int64]string
	// where the chain's last entry was read
	lastFile string
	lastLine int
}

// Verify reads an audit log (other lines, such as logs sharing the stream,
// are skipped) and checks every chain in it, in the order of the file:
// each entry's hash, its seq and its link to the entry before, and every
// checkpoint's signature when keys is not nil. It stops at the first
// break. A chain may start part way (a rotated file); an exact repeat of
// the entry before (written twice around a crash) is not a break.
func Verify(r io.Reader, keys KeySource) (*Report, error) {
	rep := &Report{Chains: map[string]Chain{}, Signatures: keys != nil}
	entries, err := read(r, "", rep)
	if err != nil || rep.Break != nil {
		return rep, err
	}
	check(entries, keys, rep)
	return rep, nil
}

// VerifyFiles checks the logs of several replicas together: each replica
// writes the chains while it holds the sealer's lease, so a chain may run
// on in another file. Entries are taken in seq order per chain (a file's
// own order is not checked); every other check is Verify's.
func VerifyFiles(files map[string]io.Reader, keys KeySource) (*Report, error) {
	rep := &Report{Chains: map[string]Chain{}, Signatures: keys != nil}
	var all []located
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		entries, err := read(files[n], n, rep)
		if err != nil || rep.Break != nil {
			return rep, err
		}
		all = append(all, entries...)
	}
	slices.SortStableFunc(all, func(a, b located) int {
		if a.e.Chain != b.e.Chain {
			return strings.Compare(a.e.Chain, b.e.Chain)
		}
		return int(a.e.Seq - b.e.Seq)
	})
	check(all, keys, rep)
	return rep, nil
}

// located is an entry and where it was read.
type located struct {
	e    Entry
	file string
	line int
}

// read parses every audit line and checks each entry's own hash.
func read(r io.Reader, file string, rep *Report) ([]located, error) {
	var out []located
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		rep.Lines++
		raw := sc.Bytes()
		e, ok, err := ParseLine(raw)
		if !ok {
			continue
		}
		rep.Entries++
		if err != nil || e.Chain == "" || e.Seq < 1 {
			rep.Break = &Break{File: file, Line: line, Chain: e.Chain, Seq: e.Seq, Kind: "unreadable", Detail: "not an audit entry with a chain and seq"}
			return nil, nil
		}
		var wrapper struct {
			Audit json.RawMessage `json:"audit"`
		}
		_ = json.Unmarshal(raw, &wrapper)
		if got, err := digestOf(wrapper.Audit); err != nil || got != e.Hash {
			rep.Break = &Break{File: file, Line: line, Chain: e.Chain, Seq: e.Seq, Kind: "edited", Detail: "its content does not match its hash"}
			return nil, nil
		}
		out = append(out, located{e: e, file: file, line: line})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("audit: read: %w", err)
	}
	return out, nil
}

// check walks entries in the given order, chain by chain.
func check(entries []located, keys KeySource, rep *Report) {
	chains := map[string]*chainState{}
	rep.states = chains
	defer func() {
		for name, c := range chains {
			rep.Chains[name] = c.Chain
		}
	}()
	for _, l := range entries {
		e := l.e
		brk := func(kind, format string, args ...any) {
			rep.Break = &Break{File: l.file, Line: l.line, Chain: e.Chain, Seq: e.Seq, Kind: kind, Detail: fmt.Sprintf(format, args...)}
		}
		c := chains[e.Chain]
		switch {
		case c == nil && e.Seq == 1 && e.Prev != "":
			brk("inserted", "the first entry of a chain links to another")
			return
		case c == nil:
			c = &chainState{Chain: Chain{First: e.Seq}, hashes: map[int64]string{}}
			chains[e.Chain] = c
		case e.Seq == c.last.Seq && e.Hash == c.last.Hash:
			continue // the same entry written twice
		case e.Seq == c.last.Seq+1 && e.Prev != c.last.Hash:
			brk("inserted", "it does not follow the entry before it (seq %d)", c.last.Seq)
			return
		case e.Seq > c.last.Seq+1:
			brk("deleted", "entries %d to %d are missing", c.last.Seq+1, e.Seq-1)
			return
		case e.Seq <= c.last.Seq:
			brk("reordered", "it comes after seq %d", c.last.Seq)
			return
		}
		c.hashes[e.Seq] = e.Hash
		c.last, c.Last = e, e.Seq
		c.lastFile, c.lastLine = l.file, l.line
		c.Unsigned++
		if e.Event.Event == CheckpointEvent {
			if err := checkCheckpoint(e, c, keys); err != nil {
				brk("bad_signature", "%v", err)
				return
			}
			if keys != nil {
				c.Checkpoints++
			}
			c.Unsigned = 0
		}
	}
}

func checkCheckpoint(e Entry, c *chainState, keys KeySource) error {
	d := e.Details
	str := func(k string) string { s, _ := d[k].(string); return s }
	covers, _ := d["covers"].(float64)
	s := Signed{Chain: e.Chain, Covers: int64(covers), Head: str("head"), Time: str("signed_at")}
	if h, ok := c.hashes[s.Covers]; ok && h != s.Head {
		return fmt.Errorf("it signs seq %d as %s, but that entry's hash is %s", s.Covers, short(s.Head), short(h))
	}
	if keys == nil {
		return nil
	}
	payload, err := keys.VerifyCheckpoint(str("jws"))
	if err != nil {
		return fmt.Errorf("signature: %v", err)
	}
	if !bytes.Equal(payload, s.Bytes()) {
		return fmt.Errorf("the signature covers something else than the checkpoint says")
	}
	return nil
}

func short(h string) string {
	if len(h) > 19 {
		return h[:19]
	}
	return h
}

// Names lists the chains of a report, sorted.
func (r *Report) Names() []string {
	var out []string
	for n := range r.Chains {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
