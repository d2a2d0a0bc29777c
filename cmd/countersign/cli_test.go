package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// runCLI runs one command line in-process through the binary's entry
// point, with only the given environment, and returns its exit code and
// output.
func runCLI(t testing.TB, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(""), &out, &errb, mapEnv(env))
	return code, out.String(), errb.String()
}

func mapEnv(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

// checkConfigArgs runs `countersign check-config args…`.
func checkConfigArgs(args []string, env func(string) (string, bool), out io.Writer) error {
	var stderr bytes.Buffer
	if code := run(context.Background(), append([]string{"check-config"}, args...), strings.NewReader(""), out, &stderr, env); code != 0 {
		return fmt.Errorf("exit %d: %s", code, stderr.String())
	}
	return nil
}

// allCommands lists every command path of the tree ("countersign ops list", …).
func allCommands(t *testing.T) [][]string {
	t.Helper()
	var out [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		out = append(out, path)
		for _, sub := range c.Commands() {
			walk(sub, append(append([]string{}, path...), sub.Name()))
		}
	}
	root := newRoot(&cli{ctx: context.Background(), env: mapEnv(nil), stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard})
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	walk(root, nil)
	return out
}

// Every command and subcommand answers --help with exit 0 and starts
// nothing; nothing reads the environment to print help.
func TestEveryCommandAnswersHelp(t *testing.T) {
	cmds := allCommands(t)
	if len(cmds) < 12 {
		t.Fatalf("only %d commands: %v", len(cmds), cmds)
	}
	for _, path := range cmds {
		for _, form := range [][]string{append(append([]string{}, path...), "--help"), append([]string{"help"}, path...)} {
			name := strings.Join(form, " ")
			t.Run(name, func(t *testing.T) {
				env := map[string]string{"COUNTERSIGN_LISTEN": "127.0.0.1:0"}
				code, out, stderr := runCLI(t, env, form...)
				if code != 0 || !strings.Contains(out, "Usage:") || stderr != "" {
					t.Errorf("exit %d\nstdout: %s\nstderr: %s", code, out, stderr)
				}
			})
		}
	}
}

func TestCommandLinesThatAreWrongExit2(t *testing.T) {
	env := map[string]string{"COUNTERSIGN_LISTEN": "127.0.0.1:0", "COUNTERSIGN_URL": "http://127.0.0.1:1", "COUNTERSIGN_OPERATOR_KEY": "k"}
	for _, c := range []struct {
		args []string
		want string // in stderr
	}{
		{nil, "Usage:"},
		{[]string{"srve"}, "did you mean serve?"},
		{[]string{"serve", "--port", "9000"}, "unknown flag: --port"},
		{[]string{"serve", "extra"}, `unknown command "extra"`},
		{[]string{"mcp", "--verbose"}, "unknown flag"},
		{[]string{"ops"}, "Usage:"},
		{[]string{"ops", "lsit"}, "did you mean list?"},
		{[]string{"ops", "list", "--status", "bogus"}, "must be one of draft, pending_approval"},
		{[]string{"ops", "list", "--older-than", "10m"}, "add --stuck"},
		{[]string{"ops", "list", "--stuck", "--older-than", "soon"}, "invalid argument"},
		{[]string{"ops", "show"}, "name one operation key"},
		{[]string{"ops", "show", "op_short"}, "is not an operation key"},
		{[]string{"ops", "cancel", "op_aaaaaaaaaaaaaaaaaaaaaaaaaa", "op_bbbbbbbbbbbbbbbbbbbbbbbbbb"}, "name one operation key"},
		{[]string{"ops", "reconcile", "op_aaaaaaaaaaaaaaaaaaaaaaaaaa", "--outcome", "maybe", "--note", "x"}, "must be one of succeeded, failed"},
		{[]string{"ops", "reconcile", "op_aaaaaaaaaaaaaaaaaaaaaaaaaa", "--note", "x"}, "--outcome succeeded, failed or unknown"},
		{[]string{"ops", "reconcile", "op_aaaaaaaaaaaaaaaaaaaaaaaaaa", "--outcome", "failed"}, "--note"},
		{[]string{"keygen", "--id", "Support Agent"}, "lowercase letters"},
		{[]string{"keygen", "extra"}, "unknown command"},
		{[]string{"check-config"}, "name a policy file"},
		{[]string{"check-config", "a.yaml", "b.yaml"}, "accepts at most 1 arg"},
		{[]string{"check-config", "../../docs/countersign.example.yaml", "--principal", "support-agent"}, "add --action"},
		{[]string{"check-config", "../../docs/countersign.example.yaml", "--action", "email.send"}, "--action needs --principal"},
		{[]string{"check-config", "../../docs/countersign.example.yaml", "--action", "email.send", "--principal", "nobody"}, "its principals: support-agent"},
		{[]string{"check-config", "../../docs/countersign.example.yaml", "--attr", "nokey"}, "want key=value"},
		{[]string{"completion", "tcsh"}, `unknown command "tcsh"`},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, out, stderr := runCLI(t, env, c.args...)
			if code != 2 || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, stderr %q (stdout %q); want exit 2 and %q", code, stderr, out, c.want)
			}
		})
	}
}

func TestFlagsBeforeOrAfterArguments(t *testing.T) {
	file := "../../docs/countersign.example.yaml"
	flags := []string{"--action", "http.request", "--principal", "support-agent", "--attr", "target=billing", "--attr", "body.amount=5000"}
	c1, before, e1 := runCLI(t, nil, append(append([]string{"check-config"}, flags...), file)...)
	c2, after, e2 := runCLI(t, nil, append([]string{"check-config", file}, flags...)...)
	c3, mixed, e3 := runCLI(t, nil, append(append(append([]string{"check-config"}, flags[:4]...), file), flags[4:]...)...)
	if c1 != 0 || c2 != 0 || c3 != 0 {
		t.Fatalf("exits %d %d %d: %s %s %s", c1, c2, c3, e1, e2, e3)
	}
	if before != after || before != mixed || !strings.Contains(before, `→ route "large invoices"`) {
		t.Errorf("the position of the flags changed the answer:\n%s\n---\n%s\n---\n%s", before, after, mixed)
	}
}

func TestVersionAndCompletion(t *testing.T) {
	code, out, _ := runCLI(t, nil, "--version")
	if code != 0 || !strings.HasPrefix(out, "countersign ") || !strings.Contains(out, "commit") {
		t.Errorf("--version: exit %d %q", code, out)
	}
	if got := versionString(); !strings.Contains(out, got) {
		t.Errorf("--version %q lacks %q", out, got)
	}
	for shell, marker := range map[string]string{"bash": "complete -o default", "zsh": "#compdef countersign", "fish": "complete -c countersign"} {
		code, out, stderr := runCLI(t, nil, "completion", shell)
		if code != 0 || !strings.Contains(out, marker) {
			t.Errorf("completion %s: exit %d %s %.200s", shell, code, stderr, out)
		}
	}
	// Enumerated flags complete their values.
	code, out, _ = runCLI(t, nil, "__complete", "ops", "list", "--status", "")
	if code != 0 || !strings.Contains(out, "pending_approval") || !strings.Contains(out, "canceled") {
		t.Errorf("completing --status: exit %d %s", code, out)
	}
	code, out, _ = runCLI(t, nil, "__complete", "ops", "reconcile", "op_aaaaaaaaaaaaaaaaaaaaaaaaaa", "--outcome", "")
	if code != 0 || !strings.Contains(out, "succeeded") || !strings.Contains(out, "failed") {
		t.Errorf("completing --outcome: exit %d %s", code, out)
	}
}

func TestKeygen(t *testing.T) {
	code, out, _ := runCLI(t, nil, "keygen", "--id", "support-agent")
	if code != 0 || !strings.Contains(out, "  cs_") || !strings.Contains(out, "principals:\n    - id: support-agent") {
		t.Errorf("keygen: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, nil, "keygen", "--operator")
	key := regexpFind(`(cso_\S+)`, out)
	if code != 0 || key == "" || !strings.Contains(out, `operators:`+"\n"+`    - {id: oncall, api_key_sha256: "`+apiKeyHash(key)+`"}`) {
		t.Errorf("keygen --operator: exit %d\n%s", code, out)
	}
}

func regexpFind(expr, s string) string {
	m := regexp.MustCompile(expr).FindStringSubmatch(s)
	if m == nil {
		return ""
	}
	return m[1]
}
