package main

import (
	"fmt"

	"github.com/countersign/countersign/config"
)

func (m *Main) devBanner() {
	storeNote := "an embedded in-memory Redis: ALL DATA IS LOST WHEN THIS PROCESS EXITS"
	if m.mini == nil {
		storeNote = "the Redis at COUNTERSIGN_REDIS_URL"
	}
	fmt.Fprintf(m.Stderr, `
==========================================================================
 countersign DEVELOPMENT MODE (no COUNTERSIGN_CONFIG)
   store:     %s
   API:       %s/v1/operations
   agent:     dev-agent, API key: %s
   operator:  dev-operator, operator key: %s
              (COUNTERSIGN_URL=%s COUNTERSIGN_OPERATOR_KEY=<that key> countersign ops list)
   approver:  "you" - approval links are printed here, never sent to the agent
   email:     email.send delivers to %s
   receipts:  signed with %s, published at %s/.well-known/jwks.json
   audit:     %s

   FOR THIS TERMINAL ONLY, never give these two links to an agent:
   waiting:   what waits for "you", each with its approval link
              %s
   sign-in:   DEVELOPMENT ONLY: signs you in to %s/inbox and /console
              as "you" and dev-operator; works once, then the next is printed here
              %s
==========================================================================

`, storeNote, m.PublicURL, m.DevAPIKey, m.DevOperatorKey, m.PublicURL, m.devMailNote(), m.receiptNote(), m.PublicURL, m.auditNote(),
		m.devWaitingLink, m.PublicURL, m.devSignInLink)
}

func (m *Main) receiptNote() string {
	if m.get("COUNTERSIGN_RECEIPT_KEYS", "") != "" {
		return "key " + m.ReceiptKeyID + " from COUNTERSIGN_RECEIPT_KEYS"
	}
	return "a key generated at start (kid " + m.ReceiptKeyID + "; it dies with this process)"
}

func (m *Main) devMailNote() string {
	if m.get("COUNTERSIGN_SMTP_URL", "") != "" {
		return "the SMTP server at COUNTERSIGN_SMTP_URL"
	}
	return m.PublicURL + "/dev/mail (nothing leaves this machine)"
}

// Development mode's one approver and one operator: the person at the
// terminal, who signs in to the inbox and console as both.
const (
	devApprover     = "you"
	devApproverName = "You (development)"
	devOperator     = "dev-operator"
)

// devConfig is the policy of development mode: one agent allowed every
// action, one operator, one approver "you" reached through the console.
func devConfig() *config.File {
	return &config.File{
		Principals: []config.PrincipalSpec{{ID: "dev-agent", Scopes: []string{"*"}}},
		Operators:  []config.OperatorSpec{{ID: devOperator}},
		Approvers:  []config.ApproverSpec{{ID: devApprover, Name: devApproverName}},
		Routes: []config.RouteSpec{{Name: "development", Approvers: config.Who{IDs: []string{devApprover}},
			Required: 1, Notify: []string{"console"}}},
	}
}

func (m *Main) auditNote() string {
	if m.AuditPath == "" {
		return "JSON lines on this terminal (COUNTERSIGN_AUDIT_FILE)"
	}
	return "written to " + m.AuditPath + " (COUNTERSIGN_AUDIT_FILE sets where)"
}
