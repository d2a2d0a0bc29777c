package approval

import (
	"errors"
	"fmt"
)

// Code is a stable error code of the contract (SPEC §6). Clients branch on
// it; the message is for humans and may change.
type Code string

const (
	CodeInvalidInput         Code = "invalid_input"
	CodeUnknownAction        Code = "unknown_action"
	CodeUnauthenticated      Code = "unauthenticated"
	CodeInsufficientScope    Code = "insufficient_scope"
	CodeNotFound             Code = "not_found"
	CodeIdempotencyKeyReused Code = "idempotency_key_reused"
	CodeInvalidState         Code = "invalid_state"
	CodePayloadTooLarge      Code = "payload_too_large"
	CodePolicyDenied         Code = "policy_denied"
	CodeNoRoute              Code = "no_route"
	CodeWritesDisabled       Code = "writes_disabled"
	CodeRateLimited          Code = "rate_limited"
	CodeQuotaExceeded        Code = "quota_exceeded"
	CodeUnavailable          Code = "unavailable"
	CodeInternal             Code = "internal"

	// Codes of an operation's own error (status failed).
	CodeStaleState         Code = "stale_state"
	CodeExecutionFailed    Code = "execution_failed"
	CodePreconditionFailed Code = "precondition_failed"
)

// Error is the one coded error type of countersign. Adapters translate it
// to an HTTP status or an MCP tool error; any other error is shown as
// "internal" and only logged.
type Error struct {
	Code    Code           `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Errorf builds a coded error.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WithDetails returns e with details set (it mutates and returns e for chaining).
func (e *Error) WithDetails(d map[string]any) *Error {
	e.Details = d
	return e
}

// ErrorCode returns the code of err, or internal for foreign errors.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if err == nil {
		return ""
	}
	return CodeInternal
}

// FieldError names one invalid input field and why.
type FieldError struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

// FieldErrors collects validation failures; Err turns them into one
// invalid_input error listing every field (details.fields).
type FieldErrors []FieldError

func (fe *FieldErrors) Add(field, format string, args ...any) {
	*fe = append(*fe, FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
}

func (fe FieldErrors) Err() error {
	if len(fe) == 0 {
		return nil
	}
	msg := fe[0].Field + ": " + fe[0].Reason
	if len(fe) > 1 {
		msg += fmt.Sprintf(" (and %d more)", len(fe)-1)
	}
	return &Error{Code: CodeInvalidInput, Message: msg, Details: map[string]any{"fields": []FieldError(fe)}}
}

// PolicyDenied is a policy_denied error naming the rule that refused.
func PolicyDenied(rule, format string, args ...any) *Error {
	return &Error{Code: CodePolicyDenied, Message: fmt.Sprintf(format, args...), Details: map[string]any{"rule": rule}}
}
