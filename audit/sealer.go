package audit

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/countersign/countersign/approval"
)

// Head is where a chain stands: its last sealed entry.
type Head struct {
	ID   string // the store's id of the last sealed raw entry
	Seq  int64
	Hash string
	// LastCheckpoint is when the last checkpoint was sealed; Since counts
	// the entries sealed after it.
	LastCheckpoint time.Time
	Since          int64
}

// Raw is an event as the transition scripts wrote it, not yet sealed.
type Raw struct {
	ID    string
	Event approval.Event
}

// Batch is a chain's head and the raw events after it, in order.
type Batch struct {
	Chain string
	Head  Head
	Raw   []Raw
}

// Source is the store side of the audit log (store.Redis).
type Source interface {
	// AuditLease takes or renews the sealer's lease for holder.
	AuditLease(ctx context.Context, holder string, ttl time.Duration) (bool, error)
	// AuditRelease gives the lease up, if holder holds it.
	AuditRelease(ctx context.Context, holder string) error
	// AuditPending returns, for every chain, its head and up to max raw
	// events after it.
	AuditPending(ctx context.Context, max int) ([]Batch, error)
	// AuditAdvance moves a chain's head from from to to (if it is still at
	// from) and drops the raw events up to to. False if it had moved.
	AuditAdvance(ctx context.Context, chain string, from, to Head) (bool, error)
	// AuditAppend adds an event to a chain (a checkpoint).
	AuditAppend(ctx context.Context, chain string, ev approval.Event) error
}

// Checkpoint thresholds (SPEC §9).
const (
	CheckpointEvents = 1000
	CheckpointEvery  = 10 * time.Minute
)

// Sealer turns raw events into the chained audit log.
type Sealer struct {
	Source Source
	Out    io.Writer // where sealed lines go (stderr or COUNTERSIGN_AUDIT_FILE)
	Signer Signer    // signs checkpoints; nil writes none
	Log    *slog.Logger
	Now    func() time.Time
	// Holder names this sealer in the lease; it must be unique (two
	// sealers with one name would both seal).
	Holder string
	// Every is how often it looks for new events (default 100 ms).
	Every time.Duration

	buf []byte // the lines of a batch; SealOnce is not called concurrently
}

// Run seals until ctx ends, whenever this process holds the sealer lease;
// a last round after ctx ends writes what is left.
func (s *Sealer) Run(ctx context.Context) {
	every := s.Every
	if every == 0 {
		every = 100 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		s.round(ctx)
		select {
		case <-ctx.Done():
			// Write what is left, then hand over at once.
			bg := context.WithoutCancel(ctx)
			s.round(bg)
			rctx, cancel := context.WithTimeout(bg, time.Second)
			_ = s.Source.AuditRelease(rctx, s.Holder)
			cancel()
			return
		case <-t.C:
		}
	}
}

func (s *Sealer) round(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	held, err := s.Source.AuditLease(rctx, s.Holder, 10*time.Second)
	if err != nil || !held {
		return
	}
	for {
		n, err := s.SealOnce(rctx)
		if err != nil {
			s.Log.Warn("sealing the audit log failed; it will be retried", "err", err)
			return
		}
		if n < 500 {
			return
		}
	}
}

// SealOnce seals one batch of every chain and returns how many events it
// sealed in the largest batch.
func (s *Sealer) SealOnce(ctx context.Context) (int, error) {
	batches, err := s.Source.AuditPending(ctx, 500)
	if err != nil {
		return 0, err
	}
	most := 0
	for _, b := range batches {
		head := b.Head
		buf := s.buf[:0]
		for _, r := range b.Raw {
			e := Entry{Event: r.Event, Chain: b.Chain, Seq: head.Seq + 1, Prev: head.Hash}
			if buf, err = e.sealLine(buf); err != nil {
				return most, err
			}
			buf = append(buf, '\n')
			head.ID, head.Seq, head.Hash = r.ID, e.Seq, e.Hash
			head.Since++
			if e.Event.Event == CheckpointEvent {
				head.LastCheckpoint, head.Since = e.Time, 0
			}
		}
		if len(b.Raw) > 0 {
			s.buf = buf // kept for the next batch: sealing allocates no line
			if _, err := s.Out.Write(buf); err != nil {
				return most, err
			}
			// Written first, then advanced: a crash in between writes these
			// again, which Verify accepts as an exact repeat.
			if _, err := s.Source.AuditAdvance(ctx, b.Chain, b.Head, head); err != nil {
				return most, err
			}
			most = max(most, len(b.Raw))
		}
		if err := s.checkpoint(ctx, b.Chain, head); err != nil {
			return most, err
		}
	}
	return most, nil
}

// checkpoint signs the chain's head when enough entries or time passed.
func (s *Sealer) checkpoint(ctx context.Context, chain string, head Head) error {
	if s.Signer == nil || head.Seq == 0 || head.Since == 0 {
		return nil
	}
	now := s.Now().UTC()
	due := head.Since >= CheckpointEvents || head.LastCheckpoint.IsZero() || now.Sub(head.LastCheckpoint) >= CheckpointEvery
	if !due {
		return nil
	}
	signed := Signed{Chain: chain, Covers: head.Seq, Head: head.Hash, Time: now.Format(time.RFC3339Nano)}
	jws, err := s.Signer.SignJWS(CheckpointType, signed.Bytes())
	if err != nil {
		return err
	}
	return s.Source.AuditAppend(ctx, chain, approval.Event{Time: now, Event: CheckpointEvent, Actor: "system",
		Details: map[string]any{"covers": signed.Covers, "head": signed.Head, "signed_at": signed.Time, "jws": jws}})
}
