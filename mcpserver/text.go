package mcpserver

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
)

// The texts below tell the model plainly what happened and what to do
// next. They are built only from the agent's view of the operation, which
// never holds a capability.

func prepareText(v approval.View, created bool) string {
	var b strings.Builder
	if created {
		fmt.Fprintf(&b, "Prepared draft %s (%s)%s.", v.OperationKey, v.Action, titleOf(v))
	} else {
		fmt.Fprintf(&b, "This idempotency_key already prepared %s (%s)%s; returned it unchanged, no new operation was created.",
			v.OperationKey, v.Action, titleOf(v))
	}
	previewLines(&b, v)
	b.WriteString("\n")
	b.WriteString(guidance(v))
	return b.String()
}

func undoText(v approval.View, created bool, of string) string {
	var b strings.Builder
	if created {
		fmt.Fprintf(&b, "Prepared %s, a new operation that undoes %s%s. It needs its own human approval.", v.OperationKey, of, titleOf(v))
	} else {
		fmt.Fprintf(&b, "The undo of %s is already operation %s (%s); returned it unchanged.", of, v.OperationKey, v.Status)
	}
	previewLines(&b, v)
	b.WriteString("\n")
	b.WriteString(guidance(v))
	return b.String()
}

func sendText(v approval.View) string {
	if v.Status == approval.StatusPending {
		return fmt.Sprintf("Sent %s for human approval.\n%s", v.OperationKey, guidance(v))
	}
	return fmt.Sprintf("%s was sent earlier; nothing was sent again. It is %s now.\n%s", v.OperationKey, v.Status, guidance(v))
}

func statusText(v approval.View, wait int) string {
	head := fmt.Sprintf("%s (%s%s): status %s.", v.OperationKey, v.Action, titleOf(v), v.Status)
	if wait > 0 && !v.Status.Terminal() {
		head += fmt.Sprintf(" (Returned after a change or after waiting up to %d s.)", wait)
	}
	return head + "\n" + guidance(v)
}

func cancelText(v approval.View) string {
	return fmt.Sprintf("%s: status %s.\n%s", v.OperationKey, v.Status, guidance(v))
}

func listText(views []approval.View, status string) string {
	var b strings.Builder
	in := ""
	if status != "" {
		in = " in status " + status
	}
	if len(views) == 0 {
		return "You have no operations" + in + "."
	}
	fmt.Fprintf(&b, "%d operation(s)%s, newest first:", len(views), in)
	const max = 50
	for i, v := range views {
		if i == max {
			fmt.Fprintf(&b, "\n… and %d more (see the structured content).", len(views)-max)
			break
		}
		fmt.Fprintf(&b, "\n- %s %s %s%s", v.OperationKey, v.Action, v.Status, titleOf(v))
	}
	b.WriteString("\nCall get_operation_status with an operation_key for details and what to do next.")
	return b.String()
}

func titleOf(v approval.View) string {
	if v.Preview.Title == "" {
		return ""
	}
	return ": " + oneLine(v.Preview.Title, 120)
}

func previewLines(b *strings.Builder, v approval.View) {
	if s := oneLine(v.Preview.Summary, 300); s != "" {
		b.WriteString("\nPreview the approver sees: " + s)
	}
	if len(v.Preview.Warnings) > 0 {
		b.WriteString("\nWarnings: " + strings.Join(v.Preview.Warnings, ", "))
	}
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		s = string(r[:max]) + "…"
	}
	return s
}

// guidance says, for the operation's status, what it means and what to do.
func guidance(v approval.View) string {
	key := v.OperationKey
	switch v.Status {
	case approval.StatusDraft:
		return fmt.Sprintf("Not sent: nothing has happened and no human has been asked yet. Next, call send_operation with operation_key %s "+
			"to ask a human to approve it (before the draft expires at %s), or cancel_operation to drop it. You will never receive an approval token or link.",
			key, v.ExpiresAt.UTC().Format(time.RFC3339))
	case approval.StatusPending:
		need := v.Approval.Required - len(v.Approval.Approvals)
		if need < 1 {
			need = 1
		}
		return fmt.Sprintf("Not done yet: waiting for %d human approval(s)%s. A human approves out of band; you will not receive a token or link "+
			"and cannot approve it yourself. Tell the user it is waiting for approval, then call get_operation_status with operation_key %s "+
			"and wait_seconds 30 to follow it (the approval window ends at %s).",
			need, notifiedVia(v), key, v.ExpiresAt.UTC().Format(time.RFC3339))
	case approval.StatusApproved:
		return fmt.Sprintf("Approved by a human. countersign executes it itself, exactly as prepared; call get_operation_status with operation_key %s "+
			"and wait_seconds 30 to get the result.", key)
	case approval.StatusExecuting:
		return fmt.Sprintf("Approved and running now. Call get_operation_status with operation_key %s and wait_seconds 30 to get the result.", key)
	case approval.StatusSucceeded:
		return "Done: it ran once, exactly as approved. The outcome is in result."
	case approval.StatusFailed:
		msg := v.NextStep
		if v.Error != nil {
			msg = fmt.Sprintf("Failed with %s: %s. %s", v.Error.Code, oneLine(v.Error.Message, 300), v.NextStep)
		}
		return msg
	}
	// rejected, expired, canceled: the service's own words say it all.
	return v.NextStep
}

// notifiedVia names the channels that have reached approvers so far.
func notifiedVia(v approval.View) string {
	seen := map[string]bool{}
	var chans []string
	for _, n := range v.Approval.Notified {
		if !seen[n.Channel] {
			seen[n.Channel] = true
			chans = append(chans, n.Channel)
		}
	}
	if len(chans) == 0 {
		return " (the approvers are being notified)"
	}
	sort.Strings(chans)
	return " (notified via " + strings.Join(chans, " and ") + ")"
}

// errorText is the tool error for the model: the code and message, the
// invalid fields, and what to do about it.
func errorText(e *approval.Error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Error %s: %s", e.Code, e.Message)
	var lines []string
	if fields, ok := e.Details["fields"].([]approval.FieldError); ok {
		for _, f := range fields {
			lines = append(lines, f.Field+": "+f.Reason)
		}
	} else if fields, ok := e.Details["fields"].([]any); ok { // decoded from REST
		for _, f := range fields {
			if m, ok := f.(map[string]any); ok {
				lines = append(lines, fmt.Sprintf("%v: %v", m["field"], m["reason"]))
			}
		}
	}
	if len(lines) > 1 || (len(lines) == 1 && !strings.Contains(e.Message, lines[0])) {
		for _, l := range lines {
			b.WriteString("\n- " + l)
		}
	}
	if hint := errorHints[e.Code]; hint != "" {
		b.WriteString("\n" + hint)
	}
	return b.String()
}

var errorHints = map[approval.Code]string{
	approval.CodeInvalidInput:         "Fix the arguments named above and call the tool again. Nothing was stored.",
	approval.CodeUnknownAction:        "This countersign service does not offer that action; tell the user. Nothing was stored.",
	approval.CodeUnauthenticated:      "The API key is missing or unknown; the user must configure a valid one. Nothing was done.",
	approval.CodeInsufficientScope:    "Your API key is not allowed to prepare this; do not retry, tell the user. Nothing was stored.",
	approval.CodeNotFound:             "You have no operation with that key. Use an operation_key from an earlier result, or list_operations.",
	approval.CodeIdempotencyKeyReused: "That idempotency_key was already used for a different request (details.operation_key). Use a new key for a new request. Nothing was stored.",
	approval.CodeInvalidState:         "The operation cannot do that in its current state; call get_operation_status to see where it is.",
	approval.CodePayloadTooLarge:      "The request is too large; make it smaller. Nothing was stored.",
	approval.CodePolicyDenied:         "A rule of this service refused it (details.rule). Change the request to fit the rule, or tell the user. Nothing was stored.",
	approval.CodeNoRoute:              "No approver is configured for this operation; tell the user. Nothing was stored.",
	approval.CodeWritesDisabled:       "Writes are switched off on this service; nothing was sent or consumed. Tell the user and try again later.",
	approval.CodeRateLimited:          "Too many calls; wait details.retry_after_seconds, then try again.",
	approval.CodeQuotaExceeded:        "A quota of yours is full (details.quota): cancel drafts you no longer need, or wait for pending operations to be decided, then try again.",
	approval.CodeUnavailable:          "countersign or its store is unavailable; try again shortly.",
	approval.CodeInternal:             "Something went wrong inside countersign; try once more, then tell the user.",
	approval.CodeStaleState:           "The target changed since this was prepared; nothing was written. Prepare it again so the human sees the current state.",
}

// allowanceText says where an allowance request stands.
func allowanceText(v approval.View) string {
	return "Allowance requested (" + v.OperationKey + "): it is waiting for a human to approve it. " +
		"Until it is approved and active, send your operations as usual; they go to humans. " + strings.TrimSpace(v.NextStep)
}
