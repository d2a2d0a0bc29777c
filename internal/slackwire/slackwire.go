// Package slackwire is the contract between the approval messages that
// notify/slack posts and the clicks that slackapp receives: the buttons'
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
