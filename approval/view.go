package approval

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// View is the operation as agents see it (REST and MCP): everything they
// need to follow it, and never a capability.
type View struct {
	OperationKey string          `json:"operation_key"`
	Action       string          `json:"action"`
	Status       Status          `json:"status"`
	CreatedAt    time.Time       `json:"created_at"`
	ExpiresAt    time.Time       `json:"expires_at"`
	PayloadHash  string          `json:"payload_hash"`
	StateHash    string          `json:"state_hash,omitempty"`
	Input        json.RawMessage `json:"input"`
	Preview      Preview         `json:"preview"`
	Approval     ApprovalView    `json:"approval"`
	Result       json.RawMessage `json:"result"`
	Error        *OpError        `json:"error"`
	Undoes       string          `json:"undoes,omitempty"`
	UndoneBy     string          `json:"undone_by,omitempty"`
	Supersedes   string          `json:"supersedes,omitempty"`
	SupersededBy string          `json:"superseded_by,omitempty"`
	// Allowance is the allowance that approved it, if one did.
	Allowance         string `json:"allowance,omitempty"`
	NextStep          string `json:"next_step"`
	RetryAfterSeconds *int   `json:"retry_after_seconds"`
	Version           int64  `json:"version"`
}

// ApprovalView is who must decide and who did.
type ApprovalView struct {
	Required  int            `json:"required"`
	Approvers []string       `json:"approvers"`
	Approvals []ApprovalItem `json:"approvals"`
	Rejection *ApprovalItem  `json:"rejection"`
	Notified  []Notified     `json:"notified"`
	// Reminded are the reminders sent to those who had not decided;
	// Escalated, who was added when nobody decided in time.
	Reminded  []Reminder `json:"reminded"`
	Escalated *Escalated `json:"escalated"`
}

// ApprovalItem is one decision as the agent sees it.
type ApprovalItem struct {
	Approver string    `json:"approver"`
	Via      string    `json:"via"`
	At       time.Time `json:"at"`
	Reason   string    `json:"reason,omitempty"`
}

// Notified is one notification that reached its channel.
type Notified struct {
	Channel string    `json:"channel"`
	To      string    `json:"to"`
	At      time.Time `json:"at"`
}

// AgentView renders op for its principal as of now.
func AgentView(op *Operation, now time.Time) View {
	st := op.EffectiveStatus(now)
	v := View{
		OperationKey: op.Key, Action: op.Action, Status: st, CreatedAt: op.CreatedAt, ExpiresAt: op.ExpiresAt,
		PayloadHash: op.PayloadHash, Input: op.Input, Preview: op.Preview, Result: op.Result, Error: op.Error,
		Undoes: op.Undoes, UndoneBy: op.UndoneBy, Supersedes: op.Supersedes, SupersededBy: op.SupersededBy, Allowance: op.Allowance, Version: op.Version,
		Approval: ApprovalView{Required: op.Route.Required, Approvers: op.Approvers(),
			Approvals: []ApprovalItem{}, Notified: []Notified{}, Reminded: []Reminder{}, Escalated: op.Escalated},
	}
	if op.State != nil {
		v.StateHash = op.State.Hash
	}
	v.Approval.Reminded = append(v.Approval.Reminded, op.Reminded...)
	if v.Preview.Fields == nil { // a draft that ended unsent keeps no input
		v.Preview.Fields = []Field{}
	}
	v.Preview.Warnings, v.Preview.WarningCodes = humanWarnings(op)
	for _, d := range op.Approvals {
		v.Approval.Approvals = append(v.Approval.Approvals, ApprovalItem{Approver: d.Approver, Via: d.Via, At: d.At})
	}
	if r := op.Rejection; r != nil {
		v.Approval.Rejection = &ApprovalItem{Approver: r.Approver, Via: r.Via, At: r.At, Reason: r.Reason}
	}
	for _, d := range op.Deliveries {
		v.Approval.Notified = append(v.Approval.Notified, Notified{Channel: d.Channel, To: d.To, At: d.At})
	}
	if op.LateOutcome != nil {
		v.Result = withLateOutcome(op.Result, op.LateOutcome)
	}
	v.NextStep, v.RetryAfterSeconds = nextStep(op, st)
	if Stuck(op, now, DefaultStuckAfter) {
		v.NextStep, v.RetryAfterSeconds = stuckStep(op, now), seconds(60)
	}
	return v
}

func seconds(n int) *int { return &n }

// nextStep tells the agent plainly what happened and what to do now.
func nextStep(op *Operation, st Status) (string, *int) {
	switch st {
	case StatusDraft:
		return fmt.Sprintf("Not sent. Nothing happens until a human approves it. Send it for approval with send_operation "+
			"(POST /v1/operations/%s/send) before %s, or cancel it.", op.Key, op.ExpiresAt.Format(time.RFC3339)), nil
	case StatusPending:
		n := op.Route.Required - len(op.Approvals)
		return fmt.Sprintf("Not done yet. Waiting for %d human approval(s) out of band (%s). You will not receive a token or link "+
			"and cannot approve it yourself. Follow it with get_operation_status and wait_seconds (GET /v1/operations/%s?wait=30).",
			n, channelsOf(op), op.Key), seconds(5)
	case StatusApproved:
		return "Approved by a human. countersign runs it itself shortly; poll for the result.", seconds(1)
	case StatusExecuting:
		return "Approved and running now; poll for the result.", seconds(1)
	case StatusSucceeded:
		if op.LateOutcome != nil {
			return lateStep(op), nil
		}
		return "Done: it ran once, exactly as approved. The outcome is in result.", nil
	case StatusFailed:
		if op.LateOutcome != nil {
			return lateStep(op), nil
		}
		if Partial(op) {
			d := op.Error.Details
			msg := fmt.Sprintf("Partly done: a bulk stopped at item %v (see error and result.items). It wrote %v of %v items; the ones after "+
				"item %v were not attempted. ", d["item"], d["written"], d["total"], d["item"])
			if u := op.Error.OutcomeUnknown; u != nil && *u {
				msg += fmt.Sprintf("Item %v may or may not have been applied: do not retry it blindly. ", d["item"])
			}
			return msg + fmt.Sprintf("Tell the user. To take back the written items, prepare_undo (POST /v1/operations/%s/undo) drafts their undo "+
				"for a human to approve; to finish, prepare the items that were not written again.", op.Key), nil
		}
		if op.Error != nil {
			switch op.Error.Code {
			case CodeStaleState, CodePreconditionFailed:
				return "Not done: the target changed after it was prepared, so nothing was written. Prepare it again " +
					"so the human sees the current state.", nil
			case CodeExecutionFailed:
				if op.Error.OutcomeUnknown != nil && *op.Error.OutcomeUnknown {
					return "It failed in a way that leaves the outcome unknown: it may have happened. Do not retry on your own; " +
						"tell the user and let an operator check.", nil
				}
				if op.Error.Details["settled_by"] == "operator" {
					return "Not done, as far as an operator could see: its executor stopped answering, and once its lease had run out " +
						"an operator checked the target, found nothing and settled it as failed (see error). The executor can no longer " +
						"send it; anything it still reports is shown in result.late_outcome. Tell the user; if it is still needed, " +
						"confirm at the target that it did not happen before preparing it again.", nil
				}
				if code, ok := httpStatus(op.Error.Details); ok {
					return refusedStep(code, op.Error.Details), retryAfter(op.Error.Details)
				}
				return "Not done: it failed before anything was sent (see error). You may prepare it again.", nil
			}
		}
		return "Not done: it failed (see error).", nil
	case StatusRejected:
		msg := "Rejected by a human. Do not send the same operation again."
		if op.Rejection != nil && op.Rejection.Reason != "" {
			msg = "Rejected by a human. Their reason: \"" + op.Rejection.Reason + "\" Do not send the same operation again; change it as asked or check with the user."
		}
		return msg, nil
	case StatusExpired:
		if op.SentAt == nil {
			return "Expired as a draft: it was never sent. Prepare it again if it is still needed.", nil
		}
		return "Expired: it was not approved and run within the approval window. Nothing was done. Prepare and send it again if it is still needed.", nil
	case StatusCanceled:
		return "Canceled. Nothing was done.", nil
	case StatusSuperseded:
		return supersededStep(op), nil
	}
	return "", nil
}

// stuckStep is the next step of an operation executing for too long: the
// process that ran it most likely died mid-write, so nobody knows whether
// it happened, and countersign will not run it again on its own.
func stuckStep(op *Operation, now time.Time) string {
	return fmt.Sprintf("Stuck: it has been executing for %s, so the process running it most likely stopped. "+
		"The outcome is unknown: it may or may not have happened. countersign will not retry it; a human operator "+
		"must check the target and settle it (countersign ops reconcile %s). Do not prepare it again on your own; "+
		"tell the user, and poll for the settled outcome.", now.Sub(op.UpdatedAt).Round(time.Second), op.Key)
}

func channelsOf(op *Operation) string {
	seen := map[string]bool{}
	var out []string
	for _, n := range op.Route.Notify {
		c, _, _ := strings.Cut(n, ":")
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return "no channel configured"
	}
	return "via " + strings.Join(out, " and ")
}

// withLateOutcome is the result an agent sees once an executor's outcome
// arrived after an operator's settlement: the settled result (an object,
// or none) with late_outcome beside it.
func withLateOutcome(result json.RawMessage, late *LateOutcome) json.RawMessage {
	m := map[string]json.RawMessage{}
	if len(result) > 0 && json.Unmarshal(result, &m) != nil {
		m = map[string]json.RawMessage{"settled_result": result}
	}
	b, err := json.Marshal(late)
	if err != nil {
		return result
	}
	m["late_outcome"] = b
	out, err := json.Marshal(m)
	if err != nil {
		return result
	}
	return out
}

// lateStep tells the agent what an operator's settlement and the
// executor's late outcome together mean.
func lateStep(op *Operation) string {
	lo := op.LateOutcome
	settled := string(op.Status)
	if op.Error != nil && op.Error.Details["outcome"] == "unknown" {
		settled = "outcome unknown"
	}
	head := fmt.Sprintf("An operator settled it as %s while its executor was stopped; the executor resumed afterwards and reported "+
		"its own outcome, shown in result.late_outcome. ", settled)
	switch {
	case lo.Status == StatusSucceeded:
		return head + "It did happen, once: do not prepare it again. Tell the user."
	case lo.Error != nil && lo.Error.OutcomeUnknown != nil && *lo.Error.OutcomeUnknown:
		return head + "Its late attempt may have reached the target: do not prepare it again on your own; tell the user and let an operator check."
	case lo.Error != nil && lo.Error.Details["phase"] == "fence":
		return head + "It found the operation settled and sent nothing then. " + settledTail(op)
	case lo.Error != nil:
		if code, ok := httpStatus(lo.Error.Details); ok {
			return head + fmt.Sprintf("Its late write reached the target, which refused it (HTTP %d): nothing was applied. ", code) + settledTail(op)
		}
	}
	return head + "Do not prepare it again on your own; tell the user."
}

func settledTail(op *Operation) string {
	if op.Status == StatusSucceeded {
		return "The operator found it done: do not prepare it again."
	}
	return "Tell the user; if it is still needed, confirm at the target that it did not happen before preparing it again."
}

// httpStatus reads the HTTP status a target answered with from an error's
// details.
func httpStatus(d map[string]any) (int, bool) {
	switch v := d["http_status"].(type) {
	case int:
		return v, true
	case float64:
		return int(v), true
	}
	return 0, false
}

// refusedStep is the next step of a write the target received and
// refused: it was sent, and nothing was applied.
func refusedStep(code int, d map[string]any) string {
	msg := fmt.Sprintf("Not done: the request reached the target, which refused it with HTTP %d (see error); nothing was applied. ", code)
	if ra := retryAfter(d); ra != nil {
		msg += fmt.Sprintf("The target asked to wait %d s. ", *ra)
	}
	switch {
	case code == 429 || code == 503:
		if n, ok := d["attempts"].(float64); ok && n > 1 {
			msg += fmt.Sprintf("countersign sent it %d times with the same Idempotency-Key, as the target's policy allows, and each was refused. ", int(n))
		} else if n, ok := d["attempts"].(int); ok && n > 1 {
			msg += fmt.Sprintf("countersign sent it %d times with the same Idempotency-Key, as the target's policy allows, and each was refused. ", n)
		}
		return msg + "Tell the user; if it is still needed, prepare it again later, as a new operation that needs approval again."
	case code >= 500:
		return msg + "Tell the user; if it is still needed, prepare it again once the target works, as a new operation that needs approval again."
	}
	return msg + "Tell the user; prepare it again only with the input changed as the target's answer asks."
}

func retryAfter(d map[string]any) *int {
	switch v := d["retry_after"].(type) {
	case int:
		return seconds(v)
	case float64:
		return seconds(int(v))
	}
	return nil
}

// humanWarnings are the warnings every human channel shows of op's
// preview (the action's, then the renderer's: hidden characters, hidden
// HTML text, look-alike links…), each with its stable code, so that the
// agent is told what the approver is warned about.
func humanWarnings(op *Operation) ([]string, []string) {
	if len(op.Preview.Warnings) == 0 && len(op.Preview.Fields) == 0 && op.Preview.Title == "" {
		return nil, nil
	}
	key := fmt.Sprintf("%s\x00%s\x00%d\x00%d\x00%d", op.Key, op.PayloadHash, len(op.Preview.Warnings), len(op.Preview.Fields), len(op.Preview.Diff))
	if w, ok := warningCache.get(key); ok {
		return slices.Clone(w.msgs), slices.Clone(w.codes)
	}
	var m Message
	r := newRenderer()
	r.preview(&m, op.Preview)
	r.finish(&m)
	warningCache.put(key, shownWarnings{m.Warnings, m.WarningCodes})
	return slices.Clone(m.Warnings), slices.Clone(m.WarningCodes)
}

type shownWarnings struct{ msgs, codes []string }

// warningCache keeps the warnings of the operations read lately (two
// generations of renderedGen): an agent polls its operation's status many
// times, and rendering an HTML part again each time is wasted work.
var warningCache = &genCache[shownWarnings]{}

type genCache[T any] struct {
	mu        sync.Mutex
	cur, prev map[string]T
}

func (c *genCache[T]) get(key string) (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.cur[key]
	if !ok {
		v, ok = c.prev[key]
	}
	return v, ok
}

func (c *genCache[T]) put(key string, v T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil || len(c.cur) >= renderedGen {
		c.prev, c.cur = c.cur, make(map[string]T, 256)
	}
	c.cur[key] = v
}
