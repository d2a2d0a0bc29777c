package approval

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/countersign/countersign/approval/safetext"
)

// Edit as a new version (SPEC §10). Where a route has allow_edit, an
// approver may change the editable fields (an email's subject and text, a
// Slack message's text) instead of rejecting and waiting for the agent.
// The edit creates a new operation — new key, new payload hash, preview,
// and a diff against the original — that goes to the same approvers; the
// original ends superseded, linked to it. Guarantee 2 holds: no agent
// input is taken after prepare, and what runs is what the approvers of
// that version saw.

// Editor is implemented by actions with fields an approver may edit.
type Editor interface {
	// Editable lists the fields of op an approver may change, with their
	// values as shown.
	Editable(op *Operation) []EditableField
	// EditInput returns the raw input of a new version of op with the
	// given fields (by name) changed; it goes through the action's Prepare
	// like any input. Returns invalid_input for a field that is not
	// editable.
	EditInput(op *Operation, changes map[string]string) (json.RawMessage, error)
}

// EditableField is one field an approver may change.
type EditableField struct {
	Name  string
	Label string
	Value string
	Long  bool
}

// MaxEditBytes bounds what an approver's edit may hold in all.
const MaxEditBytes = 256 << 10

// EditableFields returns the fields of op that may be edited now, or nil
// when its route or action allows none. Labels may carry agent text (an
// http.request body field is labelled by its JSON key): they come escaped
// like every other string shown to a person (guarantee 11), one line each.
// Values stay as they are: they are what the approver edits and submits.
func (s *Service) EditableFields(op *Operation) []EditableField {
	ed, ok := optional[Editor](s.actions[op.Action])
	if !ok || !op.Route.AllowEdit || op.Status != StatusPending {
		return nil
	}
	fields := ed.Editable(op)
	for i := range fields {
		fields[i].Label = safetext.Line(fields[i].Label)
	}
	return fields
}

// EditByLink is an approver's edit from the approval page (a POST with the
// page's CSRF token): the link's approver edits, the new version is sent
// to the approvers, and the view shows the original, superseded.
func (s *Service) EditByLink(ctx context.Context, token string, changes map[string]string) (*LinkView, *Operation, error) {
	v, err := s.OpenLink(ctx, token)
	if err != nil || v.Problem != LinkOK {
		return v, nil, err
	}
	next, err := s.Edit(ctx, v.Op.Key, v.Claims.Approver, v.Claims.Channel, v.Op.PayloadHash, changes)
	if err != nil {
		return v, nil, err
	}
	if cur, gerr := s.store.Get(ctx, v.Op.Ref()); gerr == nil {
		v.Op, v.Message = cur, BuildMessage(cur, s.policy, s.now())
	}
	return v, next, nil
}

// Edit makes an approver's new version of a pending operation. payloadHash
// is the hash the approver was shown. Returns invalid_input (nothing
// changed, a field that is not editable, or what the action refuses in the
// new input), invalid_state (not pending, editing not allowed), a
// *Refusal (not an approver, or decided already), and the codes of
// Prepare for the new input.
func (s *Service) Edit(ctx context.Context, key, editor, via, payloadHash string, changes map[string]string) (*Operation, error) {
	op, err := s.load(ctx, Ref{Key: key})
	if err != nil {
		return nil, err
	}
	switch {
	case op.Status != StatusPending:
		return nil, stateError(op, "edit")
	case !op.Route.AllowEdit:
		return nil, Errorf(CodeInvalidState, "the route of %s does not allow edits", key)
	case !op.HasApprover(editor):
		return nil, &Refusal{Reason: "you are not an approver of this operation"}
	case op.Decided(editor):
		return nil, &Refusal{Reason: "you have decided this operation already"}
	case payloadHash != op.PayloadHash:
		return nil, &Refusal{Reason: "this is not the version you were shown"}
	}
	ed, ok := optional[Editor](s.actions[op.Action])
	if !ok {
		return nil, Errorf(CodeInvalidState, "%s has no editable fields", op.Action)
	}
	size := 0
	for k, v := range changes {
		size += len(k) + len(v)
	}
	if size > MaxEditBytes {
		return nil, Errorf(CodeInvalidInput, "the edit is larger than %d bytes", MaxEditBytes)
	}
	before := map[string]EditableField{}
	for _, f := range ed.Editable(op) {
		before[f.Name] = f
	}
	changed := map[string]string{}
	for name, v := range changes {
		f, ok := before[name]
		if !ok {
			return nil, FieldErrors{{Field: name, Reason: "is not an editable field"}}.Err()
		}
		if v != f.Value {
			changed[name] = v
		}
	}
	if len(changed) == 0 {
		return nil, Errorf(CodeInvalidInput, "nothing was changed")
	}
	raw, err := ed.EditInput(op, changed)
	if err != nil {
		return nil, err
	}
	p := s.policy.Principal(op.Principal)
	if p == nil {
		return nil, Errorf(CodeInvalidState, "the principal of %s is no longer configured", key)
	}
	next, prepared, err := s.draft(ctx, p, PrepareCall{Action: op.Action, Input: raw}, op.Undoes)
	if err != nil {
		return nil, err
	}
	if next.PayloadHash == op.PayloadHash {
		return nil, Errorf(CodeInvalidInput, "the edit changes nothing that would run")
	}
	names := slices.Sorted(maps.Keys(changed))
	// The new version shows what the edit changed.
	for _, name := range names {
		b, _ := json.Marshal(before[name].Value)
		a, _ := json.Marshal(changed[name])
		next.Preview.Diff = append(next.Preview.Diff, Change{Field: name, Before: b, After: a})
	}
	next.Supersedes = op.Key
	now := s.now().UTC()
	next.Status, next.SentAt, next.ExpiresAt = StatusPending, &now, now.Add(next.Route.ApprovalTTL)

	old := s.event(op, "superseded", "approver:"+editor, via)
	old.Status = StatusSuperseded
	old.Details = map[string]any{"superseded_by": next.Key, "changed": names}
	prepared.Actor, prepared.Channel = "approver:"+editor, via
	prepared.Details = map[string]any{"supersedes": op.Key, "changed": names, "route": next.Route.Name}
	sent := s.event(next, "sent", "approver:"+editor, via)
	sent.Status = StatusPending
	sent.Details = map[string]any{"approvers": next.Approvers(), "required": next.Route.Required, "expires_at": next.ExpiresAt}
	t := SupersedeTransition{Step: s.step(old), Next: next, Prepared: prepared, Sent: sent,
		Jobs: s.planJobs(next, next.Route.Approvers, true), TTL: next.Route.ApprovalTTL + s.retention, Changed: names, Editor: editor}
	for i, d := range next.Route.Remind {
		t.Timers = append(t.Timers, Timer{Reason: "remind:" + itoa(i+1), At: now.Add(d)})
	}
	if e := next.Route.Escalate; e != nil {
		t.Timers = append(t.Timers, Timer{Reason: "escalate", At: now.Add(e.After)})
	}
	// The editor's approval counts only where a click is proof enough: on
	// a step_up route the new version, like any, is decided with a passkey
	// (an edit carries no assertion).
	if next.Route.EditorApproves && next.Route.StepUp == "" && next.HasApprover(editor) {
		d := Decision{Approver: editor, Via: via, At: now, PayloadHash: next.PayloadHash}
		t.Approval = &d
		t.ApprovalEvent = s.event(next, "approval", "approver:"+editor, via)
		t.ApprovalEvent.Status = StatusPending
		t.QuorumEvent = s.event(next, "approved", "system", "")
		t.QuorumEvent.Status = StatusApproved
	}
	done, err := s.store.Supersede(ctx, op.Ref(), t)
	if err != nil {
		return nil, err
	}
	if !done {
		cur, _ := s.store.Get(ctx, op.Ref())
		if cur != nil && cur.Decided(editor) {
			return nil, &Refusal{Reason: "you have decided this operation already"}
		}
		if cur == nil {
			cur = op
		}
		return nil, stateError(cur, "edit")
	}
	for _, ev := range []Event{old, prepared, sent} {
		s.emit(ev)
	}
	if t.Approval != nil {
		s.emit(t.ApprovalEvent)
	}
	return s.store.Get(ctx, next.Ref())
}

// supersededStep tells the agent what an approver's edit did.
func supersededStep(op *Operation) string {
	what := "its content"
	if len(op.Changed) > 0 {
		what = strings.Join(op.Changed, ", ")
	}
	return "Not run: an approver edited it before approving (" + what + " changed). The new version is " +
		op.SupersededBy + ": follow it with get_operation_status (GET /v1/operations/" + op.SupersededBy +
		"); its input and preview show what will run. Nothing ran under this key."
}

// errNotEditable is returned by actions for a field they do not edit.
var errNotEditable = errors.New("not an editable field")

// EditError is the invalid_input error of an action for field.
func EditError(field string) error {
	return FieldErrors{{Field: field, Reason: errNotEditable.Error()}}.Err()
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
