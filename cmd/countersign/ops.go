package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/client"
	"github.com/spf13/cobra"
)

func init() { register(newOpsCmd) }

// newOpsCmd is `countersign ops list|show|cancel|reconcile`: operator
// commands over the admin API of a running serve (COUNTERSIGN_URL,
// COUNTERSIGN_OPERATOR_KEY). They never touch Redis: the service does
// the work and audits it like any other event.
func newOpsCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ops",
		Short: "Operator commands over the admin API of a running serve",
		Long: `countersign ops lists, shows, cancels and settles operations of every principal
through the admin API of a running countersign serve, so it works against any
deployment, development mode included. It reads two variables:

  COUNTERSIGN_URL            where serve is, e.g. http://127.0.0.1:8080
  COUNTERSIGN_OPERATOR_KEY   an operator key (policy file operators:, countersign keygen
                             --operator); in development mode serve prints dev-operator's

Every cancel and reconcile is recorded in the service's audit as operator:<id>.`,
		Example: `  COUNTERSIGN_URL=http://127.0.0.1:8080 COUNTERSIGN_OPERATOR_KEY=cso_… countersign ops list --stuck`,
	}
	groupCommand(cmd)
	cmd.AddCommand(newOpsListCmd(c), newOpsShowCmd(c), newOpsCancelCmd(c), newOpsReconcileCmd(c))
	return cmd
}

// admin builds the admin client from the environment, with errors that
// say what to set.
func (c *cli) admin() (*client.Admin, error) {
	base := c.get("COUNTERSIGN_URL")
	key := c.get("COUNTERSIGN_OPERATOR_KEY")
	if base == "" {
		return nil, errors.New("COUNTERSIGN_URL is not set: point it at the running countersign serve, e.g. COUNTERSIGN_URL=http://127.0.0.1:8080")
	}
	if key == "" {
		return nil, errors.New("COUNTERSIGN_OPERATOR_KEY is not set: use an operator key of the policy file's operators: " +
			"(countersign keygen --operator makes one); in development mode serve prints dev-operator's key at start")
	}
	return client.NewAdmin(base, key, &client.Options{UserAgent: "countersign-ops/" + buildVersion()})
}

// opsError adds the fix to the errors an operator can do something about.
func opsError(err error, base string) error {
	switch approval.ErrorCode(err) {
	case approval.CodeUnauthenticated:
		return fmt.Errorf("%w\n(check COUNTERSIGN_OPERATOR_KEY: it must be an operator key of the service at %s, not an agent's API key)", err, base)
	case approval.CodeUnavailable:
		return fmt.Errorf("%w\n(is countersign serve running at COUNTERSIGN_URL=%s?)", err, base)
	}
	return err
}

// enumFlag is a string flag that accepts only listed values, so that a
// typo is a usage error (exit 2) rather than an empty answer.
type enumFlag struct {
	value   string
	allowed []string
}

func (e *enumFlag) String() string { return e.value }
func (e *enumFlag) Type() string   { return "string" }
func (e *enumFlag) Set(s string) error {
	for _, a := range e.allowed {
		if s == a {
			e.value = s
			return nil
		}
	}
	return fmt.Errorf("must be one of %s", strings.Join(e.allowed, ", "))
}

func statusNames() []string {
	out := make([]string, len(approval.Statuses))
	for i, s := range approval.Statuses {
		out[i] = string(s)
	}
	return out
}

func completeFrom(values []string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	}
}

// keyArg checks the one KEY argument of show, cancel and reconcile.
func keyArg(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return usagef("name one operation key (op_ followed by 26 characters), e.g. %s op_…", cmd.CommandPath())
	}
	if !approval.ValidOperationKey(args[0]) {
		return usagef("%q is not an operation key: keys look like op_ followed by 26 characters (countersign ops list shows them)", args[0])
	}
	return nil
}

func newOpsListCmd(c *cli) *cobra.Command {
	status := &enumFlag{allowed: statusNames()}
	var principal string
	var stuck bool
	var olderThan time.Duration
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List operations of every principal (or one), or the stuck ones",
		Long: `countersign ops list prints operations of every principal, newest first.

--stuck lists the operations executing for longer than --older-than (default 5m),
oldest first: the process running them most likely died mid-execution, the outcome
is unknown, and countersign never retries them on its own. Check the target, then
settle each with countersign ops reconcile.`,
		Example: `  countersign ops list --status pending_approval --principal support-agent
  countersign ops list --stuck --older-than 10m`,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("older-than") && !stuck {
				return usagef("--older-than applies to --stuck: add --stuck")
			}
			if olderThan < 0 {
				return usagef("--older-than must not be negative")
			}
			if stuck && status.value != "" && status.value != string(approval.StatusExecuting) {
				return usagef("stuck operations are executing: leave --status out with --stuck")
			}
			a, err := c.admin()
			if err != nil {
				return err
			}
			ops, err := a.List(cmd.Context(), client.AdminQuery{Status: approval.Status(status.value), Principal: principal,
				Stuck: stuck, OlderThan: olderThan})
			if err != nil {
				return opsError(err, a.BaseURL())
			}
			if len(ops) == 0 && stuck {
				fmt.Fprintf(c.stdout, "No operation has been executing for longer than %s.\n", olderThan)
				return nil
			}
			printOps(c.stdout, ops)
			return nil
		},
	}
	f := cmd.Flags()
	f.Var(status, "status", "only operations in this status ("+strings.Join(statusNames(), ", ")+")")
	f.StringVar(&principal, "principal", "", "only this principal's operations")
	f.BoolVar(&stuck, "stuck", false, "only operations executing for longer than --older-than")
	f.DurationVar(&olderThan, "older-than", approval.DefaultStuckAfter, "with --stuck: how long executing counts as stuck")
	_ = cmd.RegisterFlagCompletionFunc("status", completeFrom(statusNames()))
	return cmd
}

func printOps(w io.Writer, ops []approval.AdminView) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "OPERATION\tSTATUS\tACTION\tPRINCIPAL\tCREATED\tUPDATED")
	for _, op := range ops {
		st := string(op.Status)
		if op.Stuck {
			st += " (stuck)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", op.OperationKey, st, op.Action, op.Principal,
			op.CreatedAt.UTC().Format(time.RFC3339), op.UpdatedAt.UTC().Format(time.RFC3339))
	}
	_ = tw.Flush()
}

func newOpsShowCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:     "show KEY",
		Short:   "Print an operation of any principal and its audit trail (JSON)",
		Example: `  countersign ops show op_…`,
		Args:    keyArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := c.admin()
			if err != nil {
				return err
			}
			op, evs, err := a.Show(cmd.Context(), args[0])
			if err != nil {
				return opsError(err, a.BaseURL())
			}
			enc := json.NewEncoder(c.stdout)
			enc.SetIndent("", "  ")
			enc.SetEscapeHTML(false)
			return enc.Encode(map[string]any{"operation": op, "events": evs})
		},
	}
}

func newOpsCancelCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:     "cancel KEY",
		Short:   "Cancel a draft or pending operation of any principal",
		Example: `  countersign ops cancel op_…`,
		Args:    keyArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := c.admin()
			if err != nil {
				return err
			}
			op, err := a.Cancel(cmd.Context(), args[0])
			if err != nil {
				return opsError(err, a.BaseURL())
			}
			fmt.Fprintf(c.stdout, "%s is %s (recorded in the audit)\n", op.OperationKey, op.Status)
			return nil
		},
	}
}

func newOpsReconcileCmd(c *cli) *cobra.Command {
	outcome := &enumFlag{allowed: []string{string(approval.StatusSucceeded), string(approval.StatusFailed), string(approval.OutcomeUnknown)}}
	var note string
	cmd := &cobra.Command{
		Use:   "reconcile KEY --outcome succeeded|failed|unknown --note TEXT",
		Short: "Settle an operation left executing, after checking the target",
		Long: `countersign ops reconcile records the outcome of an operation left executing by a
process that died or stopped after claiming it. countersign never retries such an operation on
its own (at most once beats maybe twice): check the target first. Actions pass the
operation key downstream (Message-ID, Idempotency-Key), so look for it there.

An executor holds its claim with a lease it renews while it runs (settings.execution_lease,
15 s by default). While the lease is live (ops show: lease_live) its process may still be
writing, so the operation can be settled only as --outcome unknown; succeeded and failed are
refused until the lease has run out. From the moment of any settlement the executor is
fenced: it re-checks its claim before each effect and sends nothing more. An outcome it
still reports (a write that was already on its way) is kept as the operation's late outcome
(audit event late_outcome, result.late_outcome on ops show) without changing the status.
The outcome and your note are kept in the audit.`,
		Example: `  countersign ops reconcile op_… --outcome failed --note "no message with this Message-ID in the mailbox"
  countersign ops reconcile op_… --outcome unknown --note "executor host frozen; target unreachable"`,
		Args: keyArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if outcome.value == "" {
				return usagef("say what happened with --outcome succeeded, failed or unknown")
			}
			if strings.TrimSpace(note) == "" {
				return usagef("say what you checked with --note \"…\"; it is kept in the audit")
			}
			a, err := c.admin()
			if err != nil {
				return err
			}
			op, err := a.Reconcile(cmd.Context(), args[0], approval.Status(outcome.value), note)
			if err != nil {
				return opsError(err, a.BaseURL())
			}
			st := string(op.Status)
			if outcome.value == string(approval.OutcomeUnknown) {
				st += " with its outcome unknown"
			}
			fmt.Fprintf(c.stdout, "%s is %s (recorded in the audit with your note)\n", op.OperationKey, st)
			return nil
		},
	}
	cmd.Flags().Var(outcome, "outcome", "what the target shows happened: succeeded or failed (once the executor's lease ran out), or unknown")
	cmd.Flags().StringVar(&note, "note", "", "what you checked (kept in the audit)")
	_ = cmd.RegisterFlagCompletionFunc("outcome", completeFrom(outcome.allowed))
	return cmd
}
