package main

import (
	"fmt"

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
			for _, s := range res.Sent {
				fmt.Fprintf(c.stdout, "enrolment link for %s sent via %s to %s\n", res.Approver, s.Channel, s.To)
			}
			fmt.Fprintf(c.stdout, "it works once, until %s; %s has %d passkey(s) now\n",
				res.ExpiresAt.Format("2006-01-02 15:04 MST"), res.Approver, res.Passkeys)
			return nil
		},
	}
	cmd.AddCommand(enroll)
	return cmd
}
