package store

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
)

// The stored form of an operation is one hash with short field names, so
// that a pending operation costs little more than its input:
//
//	d   immutable doc (below), the principal in it       in  normalized input (compact.go)
//	pv  preview (compact.go) ph  payload hash            st  status
//	x   expires_at (ms)      u   updated_at (ms)         v   version
//	sa  sent_at (ms)         ca  claimed_at (ms)         j   jobs
//	rj  rejection            r   result                  er  error
//	ub  undone_by            tx  last transition id      ct  claim token
//	sz  bytes counted        na  approvals so far        ik  idempotency key's Redis key
//	a:<approver>  an approval        dl:<job>  a delivery
//	c:<nonce hash> an issued link    sy:<job>  what a message shows
//	n:<job>       failed attempts    jb:<job>  a job added later (reminder, escalation)
//	rm:<n>        reminder n sent (ms)  es  the escalation: when, who
//	sb            superseded by (an approver's edit)   sc  the fields it changed
//	al            the allowance that approved it    rv  when its allowance was revoked (allowance.grant)
//	ev            the events, one compact JSON per line
//	cb            status changes the principal's webhook acknowledged   cn  failed attempts at the next
//
// Nothing is stored twice: the payload hash lives only in its field, not
// in the doc, and events leave out what the operation already says. The
// principal is in the doc (operations stored before kept it in a field
// p): a field of its own costs more in Redis than its value. Events store
// their names, statuses and channels as codes (coded), jobs leave out
// the id their parts give (derivedID), and deliveries whom their job's id
// names (lastOf).

// doc is the immutable part of an operation besides its input.
type doc struct {
	Action     string                 `json:"a"` // first: sweep.lua reads it with a pattern
	Principal  string                 `json:"p,omitempty"`
	OnBehalfOf string                 `json:"b,omitempty"`
	Route      route                  `json:"r"`
	IdemKey    string                 `json:"ik,omitempty"`
	Undoes     string                 `json:"u,omitempty"`
	Created    int64                  `json:"c"`
	State      *approval.StateBinding `json:"s,omitempty"`
	Supersedes string                 `json:"sp,omitempty"`
	Attrs      map[string]string      `json:"at,omitempty"`
}

type route struct {
	Name       string   `json:"n"`
	Approvers  []string `json:"a"`
	Required   int      `json:"q"`
	Notify     []string `json:"c"`
	TTL        int64    `json:"t"` // seconds
	NoSelf     bool     `json:"f,omitempty"`
	Remind     []int64  `json:"rm,omitempty"` // seconds
	Escalate   *esc     `json:"es,omitempty"`
	Edit       int      `json:"ed,omitempty"` // 1 allowed, 2 and the editor's approval counts
	Allowances bool     `json:"al,omitempty"`
	StepUp     string   `json:"s,omitempty"`
}

type esc struct {
	After     int64    `json:"t"` // seconds
	Approvers []string `json:"a"`
}

// escalated is the es field: when, and who was added.
type escalated struct {
	At        int64    `json:"t"`
	Approvers []string `json:"a"`
}

type decision struct {
	Approver string `json:"w"`
	Via      string `json:"v"`
	At       int64  `json:"t"`
	Hash     string `json:"h"`
	Reason   string `json:"r,omitempty"`
	Tx       string `json:"tx,omitempty"`
}

// delivery is the dl:<job> field. The job and its channel are left out
// when the field's name says them (the channel is what the job id starts
// with): see encodeDelivery.
type delivery struct {
	Job     string            `json:"j,omitempty"`
	Channel string            `json:"c,omitempty"`
	To      *string           `json:"to,omitempty"` // left out when it ends the job's id
	At      int64             `json:"t"`
	Handle  map[string]string `json:"h,omitempty"`
}

type job struct {
	ID string `json:"i,omitempty"` // left out when it is derivedID

	Channel  string `json:"c"`
	Target   string `json:"t,omitempty"`
	Approver string `json:"w,omitempty"`
	Link     bool   `json:"l,omitempty"`
	Reminder int    `json:"r,omitempty"`
	Of       string `json:"o,omitempty"`
}

// derivedID is the id a job is given from its parts ("webhook:humans:grace",
// "email:grace", "slack:#approvals"): stored jobs leave it out when it is that.
func (j job) derivedID() string {
	id := j.Channel
	for _, p := range []string{j.Target, j.Approver} {
		if p != "" {
			id += ":" + p
		}
	}
	return id
}

func (j job) domain() approval.Job {
	if j.ID == "" {
		j.ID = j.derivedID()
	}
	return approval.Job{ID: j.ID, Channel: j.Channel, Target: j.Target, Approver: j.Approver, Link: j.Link, Reminder: j.Reminder, Of: j.Of}
}

func encodeJob(j approval.Job) string {
	return mustJSON(job{ID: j.ID, Channel: j.Channel, Target: j.Target, Approver: j.Approver, Link: j.Link, Reminder: j.Reminder, Of: j.Of})
}

// capability is an issued link; R marks one replaced by a newer link to
// the same approver through the same channel (a reminder's).
type capability struct {
	Approver string `json:"w"`
	Channel  string `json:"c"`
	Expires  int64  `json:"x"` // seconds
	Revoked  bool   `json:"r,omitempty"`
}

type event struct {
	Time    int64          `json:"t"`
	Name    coded          `json:"n"`
	Actor   coded          `json:"a"`
	Channel coded          `json:"c,omitempty"`
	Hash    string         `json:"h,omitempty"` // only when not the operation's
	Status  coded          `json:"s,omitempty"`
	Outcome string         `json:"o,omitempty"`
	Details map[string]any `json:"d,omitempty"`
}

// coded is a string stored as its index in codes when it has one: the
// names of events, statuses and channels repeat in every event of every
// trail ("pending_approval" takes 18 bytes, its code 1). A value that has
// no code is stored as the string it is, as every event stored before
// codes existed was.
type coded string

// codes may only ever grow at its end: stored events refer to its indexes.
var codes = []string{"",
	"draft", "pending_approval", "approved", "executing", "succeeded", "failed", "rejected", "expired", "canceled", "superseded",
	"prepared", "sent", "notified", "notify_failed", "approval", "rejection", "reminded", "escalated", "revoked", "stale",
	"reconciled", "review_link", "step_up", "step_up_refused", "system", "email", "slack", "teams", "webhook", "console",
}

var codeOf = func() map[string]int {
	m := make(map[string]int, len(codes))
	for i, c := range codes[1:] {
		m[c] = i + 1
	}
	return m
}()

func (c coded) MarshalJSON() ([]byte, error) {
	if i, ok := codeOf[string(c)]; ok {
		return strconv.AppendInt(nil, int64(i), 10), nil
	}
	return json.Marshal(string(c))
}

func (c *coded) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] != '"' {
		i, err := strconv.Atoi(string(b))
		if err != nil || i <= 0 || i >= len(codes) {
			return fmt.Errorf("unknown code %.12s", b)
		}
		*c = coded(codes[i])
		return nil
	}
	var s string
	err := json.Unmarshal(b, &s)
	*c = coded(s)
	return err
}

func ms(t time.Time) int64 { return t.UnixMilli() }
func fromMS(v string) time.Time {
	n, _ := strconv.ParseInt(v, 10, 64)
	return time.UnixMilli(n).UTC()
}
func msArg(d time.Duration) int64 { return max(d.Milliseconds(), 1) }

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic("store: encode: " + err.Error()) // only our own types are encoded
	}
	return string(b)
}

func encodeDoc(op *approval.Operation) string {
	r := op.Route
	rt := route{Name: r.Name, Approvers: r.Approvers, Required: r.Required, Notify: r.Notify,
		TTL: int64(r.ApprovalTTL / time.Second), NoSelf: r.ForbidSelfApproval, Allowances: r.Allowances, StepUp: r.StepUp}
	for _, d := range r.Remind {
		rt.Remind = append(rt.Remind, int64(d/time.Second))
	}
	if e := r.Escalate; e != nil {
		rt.Escalate = &esc{After: int64(e.After / time.Second), Approvers: e.Approvers}
	}
	switch {
	case r.AllowEdit && r.EditorApproves:
		rt.Edit = 2
	case r.AllowEdit:
		rt.Edit = 1
	}
	return mustJSON(doc{Action: op.Action, Principal: op.Principal, OnBehalfOf: op.OnBehalfOf, IdemKey: op.IdempotencyKey, Undoes: op.Undoes,
		Created: ms(op.CreatedAt), State: op.State, Route: rt, Supersedes: op.Supersedes, Attrs: op.Attrs})
}

func (r route) domain() approval.Route {
	out := approval.Route{Name: r.Name, Approvers: r.Approvers, Required: r.Required, Notify: r.Notify,
		ApprovalTTL: time.Duration(r.TTL) * time.Second, ForbidSelfApproval: r.NoSelf, Allowances: r.Allowances, StepUp: r.StepUp,
		AllowEdit: r.Edit > 0, EditorApproves: r.Edit == 2}
	for _, d := range r.Remind {
		out.Remind = append(out.Remind, time.Duration(d)*time.Second)
	}
	if e := r.Escalate; e != nil {
		out.Escalate = &approval.Escalation{After: time.Duration(e.After) * time.Second, Approvers: e.Approvers}
	}
	return out
}

// encodeDelivery is the dl:<job> field of d, without what its name says.
func encodeDelivery(d approval.Delivery) string {
	dl := delivery{Channel: d.Channel, At: ms(d.At), Handle: d.Handle}
	if dl.Channel == channelOf(d.Job) {
		dl.Channel = ""
	}
	if d.To != lastOf(d.Job) {
		dl.To = &d.To
	}
	return mustJSON(dl)
}

// lastOf is what a job id ends with, whom its messages go to
// ("webhook:humans:grace", "slack:#approvals").
func lastOf(job string) string { return job[strings.LastIndexByte(job, ':')+1:] }

// channelOf is the channel a job id starts with ("webhook:humans:grace").
func channelOf(job string) string {
	c, _, _ := strings.Cut(job, ":")
	return c
}

func encodeDecision(d approval.Decision) string {
	return mustJSON(decision{Approver: d.Approver, Via: d.Via, At: ms(d.At), Hash: d.PayloadHash, Reason: d.Reason, Tx: d.Tx})
}

func (d decision) domain() approval.Decision {
	return approval.Decision{Approver: d.Approver, Via: d.Via, At: time.UnixMilli(d.At).UTC(), PayloadHash: d.Hash,
		Reason: d.Reason, Tx: d.Tx}
}

func encodeJobs(jobs []approval.Job) string {
	out := make([]job, len(jobs))
	for i, j := range jobs {
		out[i] = job{ID: j.ID, Channel: j.Channel, Target: j.Target, Approver: j.Approver, Link: j.Link, Reminder: j.Reminder, Of: j.Of}
		if out[i].ID == out[i].derivedID() {
			out[i].ID = ""
		}
	}
	return mustJSON(out)
}

// encodeEvent stores ev without what the operation already says.
func encodeEvent(ev approval.Event, payloadHash string) string {
	e := event{Time: ms(ev.Time), Name: coded(ev.Event), Actor: coded(ev.Actor), Channel: coded(ev.Channel), Status: coded(ev.Status),
		Outcome: ev.Outcome, Details: ev.Details}
	if ev.PayloadHash != payloadHash {
		e.Hash = ev.PayloadHash
	}
	return mustJSON(e)
}

func decodeEvent(raw, key, payloadHash string) (approval.Event, error) {
	var e event
	if err := json.Unmarshal([]byte(raw), &e); err != nil {
		return approval.Event{}, err
	}
	h := e.Hash
	if h == "" {
		h = payloadHash
	}
	return approval.Event{Time: time.UnixMilli(e.Time).UTC(), Operation: key, Event: string(e.Name), Actor: string(e.Actor),
		Channel: string(e.Channel), PayloadHash: h, Status: approval.Status(e.Status), Outcome: e.Outcome, Details: e.Details}, nil
}

// DecodeError is a stored operation that cannot be read. It is reported,
// never silently dropped: an approval that vanished would change the quorum.
type DecodeError struct {
	Key   string
	Field string
	Err   error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("store: operation %s: field %s is unreadable: %s", e.Key, e.Field, decodeReason(e.Err))
}

func (e *DecodeError) Unwrap() error { return e.Err }

// decodeReason says why a stored value is unreadable without quoting any of
// it: the stored text is an agent's input, a preview or an approver's
// reason, which logs must not carry.
func decodeReason(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("invalid JSON at byte %d", syn.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("a JSON %s where %s was expected", typ.Value, typ.Type)
	case err == nil:
		return "unknown"
	}
	return "undecodable value"
}

// decodeOp reads the flat hash of one operation.
func decodeOp(key string, h map[string]string) (*approval.Operation, error) {
	bad := func(f string, err error) error { return &DecodeError{Key: key, Field: f, Err: err} }
	var d doc
	if err := json.Unmarshal([]byte(h["d"]), &d); err != nil {
		return nil, bad("d", err)
	}
	op := &approval.Operation{
		Key: key, Action: d.Action, Principal: cmp.Or(d.Principal, h["p"]), OnBehalfOf: d.OnBehalfOf, PayloadHash: h["ph"],
		State: d.State, IdempotencyKey: d.IdemKey, Undoes: d.Undoes, CreatedAt: time.UnixMilli(d.Created).UTC(),
		Route:  d.Route.domain(),
		Status: approval.Status(h["st"]), ExpiresAt: fromMS(h["x"]), UpdatedAt: fromMS(h["u"]), UndoneBy: h["ub"],
		Supersedes: d.Supersedes, SupersededBy: h["sb"], Attrs: d.Attrs, Allowance: h["al"],
	}
	if v := h["sc"]; v != "" {
		op.Changed = strings.Split(v, ",")
	}
	if v, ok := h["in"]; ok {
		in, err := unpack(v)
		if err != nil {
			return nil, bad("in", err)
		}
		op.Input = json.RawMessage(in)
	}
	if v, ok := h["pv"]; ok {
		pv, err := unpack(v)
		if err == nil {
			err = json.Unmarshal([]byte(pv), &op.Preview)
		}
		if err != nil {
			return nil, bad("pv", err)
		}
	}
	op.Version, _ = strconv.ParseInt(h["v"], 10, 64)
	op.CallbacksSent, _ = strconv.Atoi(h["cb"])
	if v := h["sa"]; v != "" {
		t := fromMS(v)
		op.SentAt = &t
	}
	if v := h["rv"]; v != "" {
		t := fromMS(v)
		op.RevokedAt = &t
	}
	if v := h["ca"]; v != "" {
		t := fromMS(v)
		op.ClaimedAt = &t
	}
	if v := h["le"]; v != "" {
		t := fromMS(v)
		op.LeaseUntil = &t
	}
	if v := h["lo"]; v != "" {
		op.LateOutcome = new(approval.LateOutcome)
		if err := json.Unmarshal([]byte(v), op.LateOutcome); err != nil {
			return nil, bad("lo", err)
		}
	}
	if v := h["j"]; v != "" {
		var js []job
		if err := json.Unmarshal([]byte(v), &js); err != nil {
			return nil, bad("j", err)
		}
		for _, j := range js {
			op.Jobs = append(op.Jobs, j.domain())
		}
	}
	if v := h["rj"]; v != "" {
		var dc decision
		if err := json.Unmarshal([]byte(v), &dc); err != nil {
			return nil, bad("rj", err)
		}
		r := dc.domain()
		op.Rejection = &r
	}
	if v := h["r"]; v != "" {
		op.Result = json.RawMessage(v)
	}
	if v := h["es"]; v != "" {
		var e escalated
		if err := json.Unmarshal([]byte(v), &e); err != nil {
			return nil, bad("es", err)
		}
		op.Escalated = &approval.Escalated{At: time.UnixMilli(e.At).UTC(), Approvers: e.Approvers}
	}
	var added []approval.Job
	if v := h["er"]; v != "" {
		op.Error = new(approval.OpError)
		if err := json.Unmarshal([]byte(v), op.Error); err != nil {
			return nil, bad("er", err)
		}
	}
	for f, v := range h {
		switch {
		case strings.HasPrefix(f, "a:"):
			var dc decision
			if err := json.Unmarshal([]byte(v), &dc); err != nil {
				return nil, bad(f, err)
			}
			op.Approvals = append(op.Approvals, dc.domain())
		case strings.HasPrefix(f, "jb:"):
			var j job
			if err := json.Unmarshal([]byte(v), &j); err != nil {
				return nil, bad(f, err)
			}
			added = append(added, j.domain())
		case strings.HasPrefix(f, "rm:"):
			n, err := strconv.Atoi(f[3:])
			if err != nil {
				return nil, bad(f, err)
			}
			op.Reminded = append(op.Reminded, approval.Reminder{N: n, At: fromMS(v)})
		case strings.HasPrefix(f, "dl:"):
			var dl delivery
			if err := json.Unmarshal([]byte(v), &dl); err != nil {
				return nil, bad(f, err)
			}
			if dl.Job == "" {
				dl.Job = f[len("dl:"):]
			}
			if dl.Channel == "" {
				dl.Channel = channelOf(dl.Job)
			}
			to := lastOf(dl.Job)
			if dl.To != nil {
				to = *dl.To
			}
			op.Deliveries = append(op.Deliveries, approval.Delivery{Job: dl.Job, Channel: dl.Channel, To: to,
				At: time.UnixMilli(dl.At).UTC(), Handle: dl.Handle})
		}
	}
	// Hash fields come in no order: sort by time, then name, so every
	// read shows the same order. Jobs added later (reminders, escalation)
	// follow the first ones.
	slices.SortFunc(added, func(a, b approval.Job) int { return strings.Compare(a.ID, b.ID) })
	op.Jobs = append(op.Jobs, added...)
	slices.SortFunc(op.Reminded, func(a, b approval.Reminder) int { return a.N - b.N })
	slices.SortFunc(op.Approvals, func(a, b approval.Decision) int {
		return cmp.Or(a.At.Compare(b.At), strings.Compare(a.Approver, b.Approver))
	})
	slices.SortFunc(op.Deliveries, func(a, b approval.Delivery) int {
		return cmp.Or(a.At.Compare(b.At), strings.Compare(a.Job, b.Job))
	})
	return op, nil
}

// flat turns a Lua HGETALL reply into a map.
func flat(v any) map[string]string {
	list, _ := v.([]any)
	h := make(map[string]string, len(list)/2)
	for i := 0; i+1 < len(list); i += 2 {
		k, _ := list[i].(string)
		val, _ := list[i+1].(string)
		h[k] = val
	}
	return h
}

// principalOf is the principal in a stored doc, or "" when it holds none
// or cannot be read.
func principalOf(raw string) string {
	var d struct {
		Principal string `json:"p"`
	}
	_ = json.Unmarshal([]byte(raw), &d)
	return d.Principal
}
