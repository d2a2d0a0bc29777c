package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/countersign/countersign/action/hosttool"
	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/client"
	"github.com/spf13/cobra"
)

func init() { register(newHookCmd) }

// newHookCmd is `countersign hook claude-code`: agent hosts' hooks (SPEC §13).
func newHookCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hook",
		Short: "Hooks for agent hosts: ask a human before the host runs a tool call",
		Long: `countersign hook answers an agent host's pre-tool-call hook: the exact tool call
becomes a host.tool_call operation that a human approves out of band, and the host
runs the tool only when it was approved. See docs/agent-hosts.md.`,
	}
	groupCommand(cmd)
	cmd.AddCommand(newHookClaudeCodeCmd(c))
	return cmd
}

// hookPoll is how long each status read waits for a change (the REST
// long-poll allows 30 s); tests shorten it.
var hookPoll = 30 * time.Second

func newHookClaudeCodeCmd(c *cli) *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "claude-code",
		Short: "A Claude Code PreToolUse hook: allow a tool call only once a human approved it",
		Long: `countersign hook claude-code is a Claude Code PreToolUse hook. It reads the hook's
JSON on stdin, prepares and sends a host.tool_call operation for that exact tool
call (tool name and input, working directory, session), waits up to --wait for
the decision, and answers on stdout:

  allow  only when the operation succeeded (a human approved it)
  deny   with the approver's reason when rejected; on expiry, timeout, an
         unreachable service or any other error (it fails closed)

It always exits 0 with that JSON, so Claude Code never treats a failure as a
non-blocking error and runs the tool anyway. It prints one status line on stderr
and never prints a link. It reads two variables:

  COUNTERSIGN_URL       where serve is, e.g. http://127.0.0.1:8080
  COUNTERSIGN_API_KEY   the agent's API key; its principal needs scope host.tool_call

Give the hook a timeout (seconds) longer than --wait in .claude/settings.json,
since Claude Code may run the tool when it kills a hook at its own timeout:

  {"hooks": {"PreToolUse": [{"matcher": "Bash|Write|Edit|mcp__.*",
    "hooks": [{"type": "command", "command": "countersign hook claude-code --wait 10m", "timeout": 660}]}]}}`,
		Example: `  COUNTERSIGN_URL=http://127.0.0.1:8080 COUNTERSIGN_API_KEY=cs_… countersign hook claude-code --wait 10m`,
		Args:    argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if wait <= 0 || wait > 24*time.Hour {
				return usagef("--wait must be between 1s and 24h, not %s", wait)
			}
			d := runClaudeCodeHook(cmd.Context(), c, wait)
			return writeHookAnswer(c.stdout, d)
		},
	}
	cmd.Flags().DurationVar(&wait, "wait", 10*time.Minute, "how long to wait for the decision before denying (the hook's timeout must be longer)")
	return cmd
}

// claudeHookInput is what Claude Code sends a PreToolUse hook on stdin.
type claudeHookInput struct {
	SessionID      string          `json:"session_id"`
	TranscriptPath string          `json:"transcript_path"`
	Cwd            string          `json:"cwd"`
	PermissionMode string          `json:"permission_mode"`
	HookEventName  string          `json:"hook_event_name"`
	ToolName       string          `json:"tool_name"`
	ToolInput      json.RawMessage `json:"tool_input"`
	ToolUseID      string          `json:"tool_use_id"`
}

// hookDecision is the answer: allow, or deny with a reason for the model
// and a message for the user.
type hookDecision struct {
	allow  bool
	reason string // shown to the model on deny
	user   string // shown to the user (systemMessage)
}

// writeHookAnswer prints Claude Code's hook output.
func writeHookAnswer(w io.Writer, d hookDecision) error {
	out := struct {
		HookSpecificOutput struct {
			HookEventName            string `json:"hookEventName"`
			PermissionDecision       string `json:"permissionDecision"`
			PermissionDecisionReason string `json:"permissionDecisionReason"`
		} `json:"hookSpecificOutput"`
		SystemMessage string `json:"systemMessage,omitempty"`
	}{SystemMessage: d.user}
	out.HookSpecificOutput.HookEventName = "PreToolUse"
	out.HookSpecificOutput.PermissionDecision = "deny"
	if d.allow {
		out.HookSpecificOutput.PermissionDecision = "allow"
	}
	out.HookSpecificOutput.PermissionDecisionReason = d.reason
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// maxHookInput bounds what is read from stdin: more than the service
// accepts in one request is refused here.
const maxHookInput = 4 << 20

func deny(reason string) hookDecision {
	return hookDecision{reason: reason, user: "countersign: denied: " + reason}
}

// runClaudeCodeHook asks for approval of the tool call on stdin and waits
// for the decision. Every path that is not "the operation succeeded" is a
// deny.
func runClaudeCodeHook(ctx context.Context, c *cli, wait time.Duration) hookDecision {
	status := func(format string, args ...any) { fmt.Fprintf(c.stderr, "countersign: "+format+"\n", args...) }
	raw, err := io.ReadAll(io.LimitReader(c.stdin, maxHookInput+1))
	if err != nil || len(raw) > maxHookInput {
		return deny("the hook could not read its input")
	}
	var in claudeHookInput
	if err := json.Unmarshal(raw, &in); err != nil {
		return deny("the hook's input is not the JSON of a Claude Code PreToolUse hook")
	}
	if in.HookEventName != "PreToolUse" || in.ToolName == "" || len(in.ToolInput) == 0 {
		return deny("countersign hook claude-code answers PreToolUse hooks with tool_name and tool_input only")
	}
	base, key := c.get("COUNTERSIGN_URL"), c.get("COUNTERSIGN_API_KEY")
	if base == "" || key == "" {
		status("COUNTERSIGN_URL and COUNTERSIGN_API_KEY must be set for the hook")
		return deny("countersign is not configured for this hook (COUNTERSIGN_URL, COUNTERSIGN_API_KEY)")
	}
	cl, err := client.New(base, key, &client.Options{UserAgent: "countersign-hook/" + buildVersion()})
	if err != nil {
		status("COUNTERSIGN_URL is not a usable URL")
		return deny("countersign is not configured for this hook (COUNTERSIGN_URL)")
	}
	input, err := json.Marshal(hosttool.Input{Host: "claude-code", Tool: in.ToolName, ToolInput: in.ToolInput,
		Cwd: in.Cwd, Session: in.SessionID})
	if err != nil {
		return deny("the tool call cannot be encoded")
	}
	call := approval.PrepareCall{Action: hosttool.Name, Input: input}
	if in.ToolUseID != "" {
		// A hook run twice for one tool call asks once.
		call.IdempotencyKey = "claude-code:" + in.ToolUseID
		if len(call.IdempotencyKey) > 128 || strings.ContainsFunc(call.IdempotencyKey, func(r rune) bool { return r <= ' ' || r > '~' }) {
			call.IdempotencyKey = ""
		}
	}
	deadline := time.Now().Add(wait)
	v, _, err := cl.Prepare(ctx, call)
	if err != nil {
		return hookError("prepare", err, status)
	}
	if v.Status == approval.StatusDraft {
		if v, err = cl.Send(ctx, v.OperationKey); err != nil {
			return hookError("send", err, status)
		}
	}
	status("%s waits for a human's approval (operation %s, %s); up to %s", in.ToolName, v.OperationKey, approverList(v), wait.Round(time.Second))
	failures := 0
	for !v.Status.Terminal() {
		left := time.Until(deadline)
		if ctx.Err() != nil {
			// Stopped (the host gave up on the hook): withdraw the request.
			return hookTimeout(cl, v.OperationKey, "The hook was stopped before a decision", status)
		}
		if left <= 0 {
			return hookTimeout(cl, v.OperationKey, "No decision within "+wait.Round(time.Second).String(), status)
		}
		next, err := cl.Get(ctx, v.OperationKey, min(left, hookPoll))
		if err != nil && ctx.Err() == nil {
			// A short outage mid-wait is retried a few times, and a rate
			// limit (parallel tool calls hold long-polls too) after the
			// time it asks; anything else denies.
			switch code := approval.ErrorCode(err); {
			case code == approval.CodeRateLimited:
				sleepCtx(ctx, min(retryAfter(err), time.Until(deadline)))
				continue
			case code != approval.CodeUnavailable || failures >= 3:
				return hookError("read the status of", err, status)
			}
			failures++
			sleepCtx(ctx, min(time.Second, time.Until(deadline)))
			continue
		}
		if err != nil {
			continue // stopped: withdrawn above
		}
		failures, v = 0, next
	}
	return hookOutcome(v, status)
}

// hookOutcome turns a terminal operation into the answer.
func hookOutcome(v approval.View, status func(string, ...any)) hookDecision {
	who := func() string {
		var names []string
		for _, a := range v.Approval.Approvals {
			names = append(names, a.Approver)
		}
		return strings.Join(names, ", ")
	}
	switch v.Status {
	case approval.StatusSucceeded:
		msg := fmt.Sprintf("approved in countersign by %s (operation %s)", who(), v.OperationKey)
		status("%s", msg)
		return hookDecision{allow: true, reason: "A human " + msg + "; run it exactly as proposed.", user: "countersign: " + msg}
	case approval.StatusRejected:
		reason := fmt.Sprintf("A human rejected this tool call in countersign (operation %s)", v.OperationKey)
		if r := v.Approval.Rejection; r != nil {
			reason = fmt.Sprintf("%s rejected this tool call in countersign (operation %s)", r.Approver, v.OperationKey)
			if r.Reason != "" {
				reason += ": " + r.Reason
			}
		}
		status("%s", reason)
		return hookDecision{reason: reason + ". Do not retry it unchanged.", user: "countersign: " + reason}
	case approval.StatusExpired:
		reason := fmt.Sprintf("Nobody approved this tool call in time; its approval window ended (operation %s)", v.OperationKey)
		status("%s", reason)
		return deny(reason)
	}
	reason := fmt.Sprintf("The tool call was not approved: operation %s ended %s", v.OperationKey, v.Status)
	if v.Error != nil {
		reason += " (" + string(v.Error.Code) + ")"
	}
	status("%s", reason)
	return deny(reason)
}

// hookTimeout cancels the operation, so nobody approves a call the host
// no longer waits for, and denies. An approval that landed meanwhile still
// counts.
func hookTimeout(cl *client.Client, key, why string, status func(string, ...any)) hookDecision {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if v, err := cl.Cancel(ctx, key); err != nil {
		if v, err := cl.Get(ctx, key, 0); err == nil && v.Status == approval.StatusSucceeded {
			return hookOutcome(v, status)
		}
	} else if v.Status == approval.StatusSucceeded {
		return hookOutcome(v, status)
	}
	reason := fmt.Sprintf("%s; the request was withdrawn (operation %s)", why, key)
	status("%s", reason)
	return deny(reason)
}

// hookError denies with what went wrong, in the service's own words for
// its coded errors (which never carry links) and in fixed words otherwise.
func hookError(what string, err error, status func(string, ...any)) hookDecision {
	var reason string
	var ce *approval.Error
	switch {
	case approval.ErrorCode(err) == approval.CodeUnavailable:
		reason = "countersign is unavailable, so the tool call cannot be approved"
	case errors.As(err, &ce):
		reason = fmt.Sprintf("countersign refused to %s the approval request (%s): %s", what, ce.Code, ce.Message)
	default:
		reason = "the approval request failed"
	}
	status("%s", reason)
	return deny(reason)
}

// approverList names who was asked: "approvers: grace, sam".
func approverList(v approval.View) string {
	if len(v.Approval.Approvers) == 0 {
		return "no approver listed"
	}
	return "approvers: " + strings.Join(v.Approval.Approvers, ", ")
}

// retryAfter is how long a rate-limited call asks to wait (at least 1 s).
func retryAfter(err error) time.Duration {
	var ce *approval.Error
	if errors.As(err, &ce) {
		if n, ok := ce.Details["retry_after_seconds"].(float64); ok && n > 1 {
			return time.Duration(n) * time.Second
		}
		if n, ok := ce.Details["retry_after_seconds"].(int); ok && n > 1 {
			return time.Duration(n) * time.Second
		}
	}
	return time.Second
}

func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
