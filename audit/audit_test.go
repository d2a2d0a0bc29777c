package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/internal/testing/redistest"
	"github.com/countersign/countersign/receipt"
	"github.com/countersign/countersign/store"
)

var bg = context.Background()

// keys verifies checkpoints against a signer's JWKS, as countersign audit
// verify does.
type keys struct{ s *receipt.Signer }

func (k keys) VerifyCheckpoint(jws string) ([]byte, error) {
	return receipt.VerifyJWS(bg, jws, audit.CheckpointType, k.s.Keys())
}

func signer(t *testing.T) *receipt.Signer {
	k, err := receipt.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	s, err := receipt.NewSigner(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// syncBuf is a writer safe for the sealer and the test.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuf) Write(p []byte) (int, error) { w.mu.Lock(); defer w.mu.Unlock(); return w.b.Write(p) }
func (w *syncBuf) String() string              { w.mu.Lock(); defer w.mu.Unlock(); return w.b.String() }

// events runs real transitions through the store, from several stores
// (replicas) at once, so that the chains hold what the scripts wrote.
func events(t *testing.T, sts []*store.Redis, principals []string, perStore int) int {
	t.Helper()
	now := time.Now().UTC()
	var wg sync.WaitGroup
	for i, st := range sts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range perStore {
				p := principals[(i+n)%len(principals)]
				op := &approval.Operation{Key: approval.NewOperationKey(), Action: "a", Principal: p, Input: json.RawMessage(`{}`),
					PayloadHash: "sha256:" + approval.RandomToken(16), CreatedAt: now, Status: approval.StatusDraft,
					ExpiresAt: now.Add(time.Hour), Route: approval.Route{Name: "r", Required: 1, ApprovalTTL: time.Hour}}
				ev := approval.Event{Time: now, Operation: op.Key, Event: "prepared", Actor: "principal:" + p, PayloadHash: op.PayloadHash}
				err := st.Create(bg, op, approval.CreateTransition{Step: approval.Step{Tx: approval.RandomToken(6), Now: now, Event: ev,
					Retention: time.Hour, DraftRetention: time.Hour}, TTL: time.Hour,
					Quotas: approval.Quotas{MaxDrafts: 1e6, MaxPending: 1e6, MaxStoredBytes: 1 << 40, RequestsPerMinute: 1e7, SendsPerMinute: 1e7}})
				if err != nil {
					t.Error(err)
					return
				}
				cev := ev
				cev.Event, cev.Actor = "canceled", "operator"
				if _, _, err := st.Cancel(bg, op.Ref(), approval.Step{Tx: approval.RandomToken(6), Now: now, Event: cev,
					Retention: time.Hour, DraftRetention: time.Hour}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	return len(sts) * perStore * 2
}

func newStores(t *testing.T, n int) []*store.Redis {
	srv := redistest.Start(t)
	var out []*store.Redis
	for range n {
		st := store.New(srv.Client(t), nil)
		t.Cleanup(func() { _ = st.Close() })
		out = append(out, st)
	}
	return out
}

func seal(t *testing.T, s *audit.Sealer) {
	t.Helper()
	for range 100 {
		n, err := s.SealOnce(bg)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
	t.Fatal("sealing did not settle")
}

// Three replicas write at once, two sealers compete for the lease: every
// event is in the log once, every chain is whole, and checkpoints verify.
func TestReplicasKeepOneChainPerShard(t *testing.T) {
	sts := newStores(t, 3)
	sig := signer(t)
	out := &syncBuf{}
	written := events(t, sts, []string{"a", "b", "c", "d", "e"}, 40)
	ctx, cancel := context.WithCancel(bg)
	var wg sync.WaitGroup
	for i, st := range sts[:2] {
		wg.Add(1)
		s := &audit.Sealer{Source: st, Out: out, Signer: sig, Log: discard(), Now: time.Now,
			Holder: "sealer-" + string(rune('a'+i)), Every: 10 * time.Millisecond}
		go func() { defer wg.Done(); s.Run(ctx) }()
	}
	written += events(t, sts, []string{"a", "f"}, 20) // more while sealing
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && strings.Count(out.String(), `"canceled"`) < written/2 {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // the checkpoints of the last batches
	cancel()
	wg.Wait()

	rep, err := audit.Verify(strings.NewReader(out.String()), keys{sig})
	if err != nil || rep.Break != nil {
		t.Fatalf("verify: %v %v", rep.Break, err)
	}
	seen := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		e, _, _ := audit.ParseLine([]byte(line))
		if e.Event.Event != audit.CheckpointEvent {
			seen[e.Operation+"/"+e.Event.Event]++
		}
	}
	if len(seen) != written {
		t.Fatalf("%d distinct events in the log, %d written", len(seen), written)
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("%s written %d times", k, n)
		}
	}
	checkpoints := 0
	for _, c := range rep.Chains {
		checkpoints += c.Checkpoints
	}
	if checkpoints == 0 {
		t.Fatal("no checkpoint was signed")
	}
}

// sealed returns a whole log of a few chains, with checkpoints.
func sealed(t *testing.T) (string, *receipt.Signer) {
	sts := newStores(t, 1)
	sig := signer(t)
	var out bytes.Buffer
	events(t, sts, []string{"a", "b"}, 10)
	s := &audit.Sealer{Source: sts[0], Out: &out, Signer: sig, Log: discard(), Now: time.Now, Holder: "x"}
	seal(t, s)
	events(t, sts, []string{"a", "b"}, 5)
	seal(t, s)
	return out.String(), sig
}

func TestVerifyFindsEachKindOfTampering(t *testing.T) {
	log, sig := sealed(t)
	lines := strings.Split(strings.TrimSpace(log), "\n")
	if rep, err := audit.Verify(strings.NewReader(log), keys{sig}); err != nil || rep.Break != nil {
		t.Fatalf("untouched log: %v %v", rep.Break, err)
	}
	// Find two consecutive entries of one chain, past its start.
	var i, j int
	chainOf := func(l string) string { e, _, _ := audit.ParseLine([]byte(l)); return e.Chain }
	for i = 1; i < len(lines); i++ {
		for j = i + 1; j < len(lines); j++ {
			if chainOf(lines[j]) == chainOf(lines[i]) {
				break
			}
		}
		if j < len(lines) && j+1 < len(lines) && strings.Contains(lines[i], `"canceled"`) {
			break
		}
	}
	with := func(f func([]string) []string) string {
		cp := append([]string(nil), lines...)
		return strings.Join(f(cp), "\n") + "\n"
	}
	tests := []struct {
		name, log, kind string
	}{
		{"edited", with(func(l []string) []string {
			l[i] = strings.Replace(l[i], `"operator"`, `"someone"`, 1)
			return l
		}), "edited"},
		{"deleted", with(func(l []string) []string { return append(l[:i:i], l[i+1:]...) }), "deleted"},
		{"reordered", with(func(l []string) []string { l[i], l[j] = l[j], l[i]; return l }), "deleted"},
		{"inserted", with(func(l []string) []string {
			// A forged entry that reuses the next seq, hashed correctly.
			var w audit.Line
			_ = json.Unmarshal([]byte(l[i]), &w)
			w.Audit.Event.Actor = "approver:mallory"
			w.Audit.Prev = "sha256:forged"
			_ = w.Audit.Seal()
			b, _ := json.Marshal(w)
			l[i] = string(b)
			return l
		}), "inserted"},
		{"repeated line", with(func(l []string) []string {
			return append(l[:i+1:i+1], append([]string{l[i]}, l[i+1:]...)...)
		}), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := audit.Verify(strings.NewReader(tt.log), keys{sig})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.kind == "" && rep.Break != nil:
				t.Fatalf("a repeated line broke the chain: %v", rep.Break)
			case tt.kind != "" && (rep.Break == nil || rep.Break.Kind != tt.kind):
				t.Fatalf("break = %v, want %s", rep.Break, tt.kind)
			}
		})
	}
}

func TestVerifyRefusesAForgedCheckpoint(t *testing.T) {
	log, _ := sealed(t)
	other := signer(t)
	// Checked against someone else's keys, the checkpoints do not verify.
	rep, err := audit.Verify(strings.NewReader(log), keys{other})
	if err != nil || rep.Break == nil || rep.Break.Kind != "bad_signature" {
		t.Fatalf("break = %v, %v", rep.Break, err)
	}
	// Without keys the chain is checked and the signatures are not.
	rep, _ = audit.Verify(strings.NewReader(log), nil)
	if rep.Break != nil || rep.Signatures {
		t.Fatalf("without keys: %v, signatures %v", rep.Break, rep.Signatures)
	}
}

func TestVerifySkipsLogLines(t *testing.T) {
	log, sig := sealed(t)
	mixed := `{"time":"x","level":"INFO","msg":"countersign serving"}` + "\nnot json\n" + log
	if rep, err := audit.Verify(strings.NewReader(mixed), keys{sig}); err != nil || rep.Break != nil || rep.Entries == 0 {
		t.Fatalf("mixed stream: %v %v", rep, err)
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
