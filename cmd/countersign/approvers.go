package main

import (
	"fmt"
	"strings"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/config"
	"github.com/spf13/cobra"
)

func init() { register(newApproversCmd) }

// newApproversCmd is `countersign approvers enroll ID`: over the admin
// API of a running serve, like ops.
func newApproversCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "approvers",
		Short: "Approver commands over the admin API of a running serve (passkey enrolment)",
		Long: `countersign approvers works on approvers through the admin API of a running
countersign serve, with COUNTERSIGN_URL and COUNTERSIGN_OPERATOR_KEY like countersign ops.`,
	}
	groupCommand(cmd)
	enroll := &cobra.Command{
		Use:   "enroll ID",
		Short: "Send an approver a single-use link to register a passkey",
		Long: `countersign approvers enroll sends the approver ID a single-use enrolment link
through their channels (email, and the console channel where their routes use it).
On that page they register a passkey, which routes with step_up: passkey then
require for every decision (SPEC §11). The link is never shown to you: it goes
to the approver only, works once, and expires after 24 hours. Running it again
sends a new link; each registers one more passkey.`,
		Example: `  countersign approvers enroll you`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("name one approver id from the policy file, e.g. %s grace", cmd.CommandPath())
			}
			if !config.ValidID(args[0]) {
				return usagef("%q is not an approver id (lowercase letters, digits, '_', '.', '-')", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := c.admin()
			if err != nil {
				return err
			}
			res, err := a.Enroll(cmd.Context(), args[0])
			if err != nil {
				return opsError(err, a.BaseURL())
			}
			fmt.Fprint(c.stdout, enrolSummary(&res))
			return nil
		},
	}
	cmd.AddCommand(enroll)
	return cmd
}

// enrolSummary says where the enrolment link went and how many passkeys
// the approver has. The approver's id may be a word ("you", the
// development approver), so it is quoted and named as an approver.
func enrolSummary(res *approval.EnrolResult) string {
	var b strings.Builder
	who := fmt.Sprintf("approver %q", res.Approver)
	for _, s := range res.Sent {
		if s.Channel == "console" {
			fmt.Fprintf(&b, "enrolment link for %s printed on the service's console (its standard error)\n", who)
			continue
		}
		fmt.Fprintf(&b, "enrolment link for %s sent by %s to %s\n", who, s.Channel, s.To)
	}
	has := "no passkey yet"
	switch {
	case res.Passkeys == 1:
		has = "1 passkey"
	case res.Passkeys > 1:
		has = fmt.Sprintf("%d passkeys", res.Passkeys)
	}
	fmt.Fprintf(&b, "the link works once, until %s; %s has %s\n", res.ExpiresAt.Format("2006-01-02 15:04 MST"), who, has)
	return b.String()
}
