// Package slackwire is the contract between the approval messages that
// channel/slack posts and the clicks that channel/slack/slackapp receives: the buttons'
// action ids and the JSON each button's value carries. One definition, so
// the two sides cannot drift apart.
package slackwire

const (
	ActionApprove = "approve"
	ActionReject  = "reject"
)

// ButtonValue is the value of both buttons: the operation and the payload
// hash the human was shown. A click whose hash does not match the
// operation's is refused.
type ButtonValue struct {
	Operation   string `json:"op"`
	PayloadHash string `json:"hash"`
}

// ActionReview replaces Approve on a message that cannot show its
// operation whole: it opens the whole operation to the clicking approver
// only (a modal, or a personal approval link sent ephemerally).
const ActionReview = "review"

// ActionRevoke is the button of an allowance in force: an approver of the
// allowance ends it (it only ever takes a capability away).
const ActionRevoke = "revoke"

// ActionEdit, on a route with allow_edit, opens the editable fields to the
// clicking approver alone; submitting makes a new version.
const ActionEdit = "edit"
