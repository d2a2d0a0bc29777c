// Package teamscard is the contract between the approval cards that
// channel/teams posts in Microsoft Teams and the clicks that channel/teams/teamsapp
// receives: the Adaptive Card built from the channel-neutral message, the
// Action.Execute verbs and the data each carries. One definition, so the
// two sides cannot drift apart (channel/slack/slackwire is Slack's).
package teamscard

import "encoding/json"

// The Action.Execute verbs of an approval card.
const (
	VerbApprove = "approve"
	// VerbReject carries the reason typed in the card's Input.Text.
	VerbReject = "reject"
	// VerbReview replaces approve on a card that cannot show its
	// operation whole: it brings the clicking approver a personal link.
	VerbReview = "review"
)

// ReasonInput is the id of the reject reason's Input.Text; Teams merges
// its value into the action's data under this name.
const ReasonInput = "reason"

// MaxReason bounds the reason an approver types (the domain cuts longer ones).
const MaxReason = 2000

// Data is the data of every Action.Execute: the operation and the payload
// hash the human was shown. A click whose hash does not match the
// operation's is refused.
type Data struct {
	Operation   string `json:"op"`
	PayloadHash string `json:"hash"`
	// Reason is the reject input's value (reject only).
	Reason string `json:"reason,omitempty"`
}

// ContentType is the attachment content type of an Adaptive Card.
const ContentType = "application/vnd.microsoft.card.adaptive"

// Attachment is a card as a Bot Framework activity carries it.
type Attachment struct {
	ContentType string `json:"contentType"`
	Content     *Card  `json:"content"`
}

// InvokeResponse is the body of the answer to an adaptiveCard/action
// invoke: a card that replaces the clicked one for the clicking user
// only (Teams' user-specific view), or a short message.
type InvokeResponse struct {
	StatusCode int    `json:"statusCode"`
	Type       string `json:"type"`
	Value      any    `json:"value"`
}

// CardResponse answers an invoke with a card only the clicking user sees.
func CardResponse(c *Card) InvokeResponse {
	return InvokeResponse{StatusCode: 200, Type: ContentType, Value: c}
}

// ErrorResponse answers an invoke that could not be understood.
func ErrorResponse(status int, message string) InvokeResponse {
	return InvokeResponse{StatusCode: status, Type: "application/vnd.microsoft.error",
		Value: map[string]string{"code": "BadRequest", "message": message}}
}

// Size is the card's size as sent.
func (c *Card) Size() int {
	raw, _ := json.Marshal(c)
	return len(raw)
}
