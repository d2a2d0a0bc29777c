package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// cli is what every command gets: the process's context, environment and
// streams, injected so that tests run commands in-process.
type cli struct {
	ctx    context.Context
	env    func(string) (string, bool)
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

func (c *cli) get(name string) string {
	v, _ := c.env(name)
	return strings.TrimSpace(v)
}

// commands are the constructors of the top-level commands. A command is
// one file: its constructor plus an init that registers it here, e.g.
//
//	func init() { register(newVerifyCmd) } // countersign verify
//
// Commands with subcommands (ops; later audit verify FILE, approvers
// enroll ID) build their subtree in the same constructor.
var commands []func(*cli) *cobra.Command

func register(f func(*cli) *cobra.Command) { commands = append(commands, f) }

// newRoot builds the whole command tree.
func newRoot(c *cli) *cobra.Command {
	root := &cobra.Command{
		Use:   "countersign",
		Short: "Agents propose, humans countersign",
		Long: `countersign sits between AI agents and the actions that change the world. Agents
prepare an action and see its exact preview; only a human can approve it, out of
band (Slack, an emailed signed link, the approval page). countersign then runs the
exact stored action at most once.

Configuration is read from the environment (see README.md and docs/SPEC.md).`,
		Version:       versionString(),
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	groupCommand(root)
	// A command that holds subcommands is shown by them, not as runnable.
	root.SetUsageTemplate(strings.Replace(root.UsageTemplate(),
		"{{if .Runnable}}", "{{if and .Runnable (not .HasAvailableSubCommands)}}", 1))
	root.SetVersionTemplate("countersign {{.Version}}\n")
	root.SetIn(c.stdin)
	root.SetOut(c.stdout)
	root.SetErr(c.stderr)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return usageError{err} })
	for _, f := range commands {
		root.AddCommand(f(c))
	}
	// cobra's completion command (bash, zsh, fish, powershell): an unknown
	// shell is a usage error too.
	root.InitDefaultCompletionCmd()
	for _, sub := range root.Commands() {
		if sub.Name() == "completion" {
			groupCommand(sub)
		}
	}
	return root
}

// run executes one command line and returns the exit code: 0, 1 when the
// command failed, 2 when the command line itself is wrong.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, env func(string) (string, bool)) int {
	root := newRoot(&cli{ctx: ctx, env: env, stdin: stdin, stdout: stdout, stderr: stderr})
	if args == nil {
		args = []string{} // cobra reads os.Args for nil
	}
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	if cmd == nil {
		cmd = root
	}
	var ue usageError
	if errors.As(err, &ue) {
		if !errors.Is(err, errShownHelp) {
			fmt.Fprintf(stderr, "%s: %v\nRun '%s --help' for usage.\n", cmd.CommandPath(), ue.err, cmd.CommandPath())
		}
		return 2
	}
	if errors.Is(err, errVerdictShown) {
		return 1 // the command printed its verdict: saying it again on stderr is noise
	}
	fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), err)
	return 1
}

// errVerdictShown: the command already printed why it fails; exit 1 quietly.
var errVerdictShown = errors.New("verdict shown")

// usageError is a wrong command line (unknown flag or command, missing or
// invalid argument): exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// errShownHelp: a group command run alone printed its help as the error.
var errShownHelp = errors.New("help shown")

// groupCommand makes a command that only holds subcommands refuse anything
// else: an unknown subcommand is a usage error naming the close ones, and
// the command alone prints its help (to stderr) and exits 2.
func groupCommand(cmd *cobra.Command) {
	cmd.Args = cobra.ArbitraryArgs
	cmd.SuggestionsMinimumDistance = 2
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			cmd.SetOut(cmd.ErrOrStderr())
			_ = cmd.Help()
			return usageError{errShownHelp}
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return usageError{errors.New(msg)}
	}
}

// argsUsage turns a cobra argument check into a usage error.
func argsUsage(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}
