package mailer

import (
	"errors"
	"fmt"

	gomail "github.com/wneessen/go-mail"
)

// Stage is the step of the SMTP conversation that failed.
type Stage string

const (
	StageMessage  Stage = "message"   // the message itself was unsendable; nothing was dialled
	StageConnect  Stage = "connect"   // dial, greeting, STARTTLS or AUTH
	StageMailFrom Stage = "mail_from" // MAIL FROM refused
	StageRcpt     Stage = "rcpt"      // RCPT TO refused for at least one recipient
	StageData     Stage = "data"      // the DATA command refused, or the body could not be written
	StageDataEnd  Stage = "data_end"  // the reply to the end of the body
	StageUnknown  Stage = "unknown"
)

// SendError is a failed send, classified by what it means for delivery.
//
// OutcomeUnknown is false when the server cannot have taken the message:
// the failure came before the end of the body was transmitted (dial, TLS,
// AUTH, MAIL FROM, RCPT, the DATA command, writing the body), or the
// server answered the end of the body with an explicit 4xx/5xx refusal.
// It is true when the whole body was transmitted and no clear answer came
// back (connection dropped, timeout): the server may have queued it, and
// retrying could send the email twice.
type SendError struct {
	Stage          Stage
	OutcomeUnknown bool
	// Code is the SMTP reply code when the server gave one (e.g. 550).
	Code int
	// Temporary is true for 4xx replies: the same send may work later.
	Temporary bool
	// Err is the underlying error. Its text may contain server replies;
	// show Message() to people instead.
	Err error
}

func (e *SendError) Error() string {
	return fmt.Sprintf("mailer: send failed at %s (outcome unknown: %t): %v", e.Stage, e.OutcomeUnknown, e.Err)
}

func (e *SendError) Unwrap() error { return e.Err }

// Message is a short explanation without server text, for an operation's
// error or a log line.
func (e *SendError) Message() string {
	code := ""
	if e.Code != 0 {
		code = fmt.Sprintf(" (SMTP %d)", e.Code)
	}
	switch e.Stage {
	case StageMessage:
		return "the email could not be built; nothing was sent"
	case StageConnect:
		return "could not connect or log in to the SMTP server; nothing was sent"
	case StageMailFrom:
		return "the SMTP server refused the sender" + code + "; nothing was sent"
	case StageRcpt:
		return "the SMTP server refused a recipient" + code + "; nothing was sent"
	case StageData:
		return "the SMTP server refused the message before it was transmitted" + code + "; nothing was sent"
	case StageDataEnd:
		if e.OutcomeUnknown {
			return "the connection failed after the whole email was transmitted; it may or may not have been delivered"
		}
		return "the SMTP server refused the email" + code + "; nothing was sent"
	}
	return "sending failed; the email may or may not have been delivered"
}

// OutcomeUnknown reports whether err leaves open that the email was
// delivered. Errors that are not a *SendError are treated as unknown.
func OutcomeUnknown(err error) bool {
	if err == nil {
		return false
	}
	var se *SendError
	if errors.As(err, &se) {
		return se.OutcomeUnknown
	}
	return true
}

// classify maps a go-mail error to a SendError. go-mail returns a
// *gomail.SendError (possibly joined with a QUIT error) once MAIL FROM was
// attempted; anything else happened while connecting.
func classify(err error) *SendError {
	var ge *gomail.SendError
	if !errors.As(err, &ge) {
		return &SendError{Stage: StageConnect, Err: err}
	}
	se := &SendError{Err: err, Code: ge.ErrorCode(), Temporary: ge.IsTemp()}
	switch ge.Reason {
	case gomail.ErrConnCheck:
		se.Stage = StageConnect
	case gomail.ErrGetSender, gomail.ErrGetRcpts, gomail.ErrNoUnencoded:
		se.Stage = StageMessage
	case gomail.ErrSMTPMailFrom:
		se.Stage = StageMailFrom
	case gomail.ErrSMTPRcptTo:
		se.Stage = StageRcpt
	case gomail.ErrSMTPData, gomail.ErrWriteContent:
		// The terminating "." is only written when the data writer is
		// closed, so a failure here leaves the server without a message.
		se.Stage = StageData
	case gomail.ErrSMTPDataClose:
		se.Stage = StageDataEnd
		// A 4xx/5xx reply to the end of data is a definite refusal;
		// anything else (EOF, reset, timeout) leaves the outcome open.
		se.OutcomeUnknown = se.Code < 400 || se.Code > 599
	default:
		se.Stage = StageUnknown
		se.OutcomeUnknown = true
	}
	return se
}
