package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/config"
	"github.com/spf13/cobra"
)

func init() { register(newKeygenCmd) }

// newAPIKey returns a fresh principal API key and the hex SHA-256 to configure.
func newAPIKey() (key, hash string) {
	key = "cs_" + approval.RandomToken(32)
	return key, apiKeyHash(key)
}

// newOperatorKey returns a fresh operator key and its hash. The prefix
// tells a reader which kind of key it is; the service never relies on it.
func newOperatorKey() (key, hash string) {
	key = "cso_" + approval.RandomToken(32)
	return key, apiKeyHash(key)
}

func apiKeyHash(key string) string {
	return strings.TrimPrefix(approval.SHA256Hex([]byte(key)), "sha256:")
}

func newKeygenCmd(c *cli) *cobra.Command {
	var id string
	var operator, env bool
	cmd := &cobra.Command{
		Use:   "keygen",
		Short: "Print a new API key (or operator key) and the hash to put in the policy file",
		Long: `countersign keygen prints a new random key, once, and the policy-file snippet with
its SHA-256: the service stores and compares only the hash.

Without --operator the key is a principal's (an agent's) API key, for the REST API,
/mcp and countersign mcp. With --operator it is an operator key, for the admin API
and countersign ops (COUNTERSIGN_OPERATOR_KEY). Each kind works on its own API only.

With --env it prints instead the service's own keys as lines of an .env file
(docker compose reads one): COUNTERSIGN_LINK_KEYS, which sign approval links (links
then survive restarts, and every replica accepts every other's), and
COUNTERSIGN_RECEIPT_KEYS, which sign receipts and audit checkpoints. Keep the file
secret: whoever holds the link key can forge approval links.`,
		Example: `  countersign keygen --id support-agent
  countersign keygen --operator --id oncall
  countersign keygen --env > .env`,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if env {
				if operator || cmd.Flags().Changed("id") {
					return usagef("--env prints the service's keys; it takes neither --operator nor --id")
				}
				return printEnvKeys(c.stdout, time.Now())
			}
			if !cmd.Flags().Changed("id") && operator {
				id = "oncall"
			}
			if !config.ValidID(id) {
				return usagef("--id %q: use lowercase letters, digits, '_', '.', '-' (at most 64), e.g. --id support-agent", id)
			}
			if operator {
				key, hash := newOperatorKey()
				fmt.Fprintf(c.stdout, "Operator key (for countersign ops as COUNTERSIGN_OPERATOR_KEY; it is shown only once):\n  %s\n\n", key)
				fmt.Fprintf(c.stdout, "Add to the policy file:\n  operators:\n    - {id: %s, api_key_sha256: \"%s\"}\n", id, hash)
				return nil
			}
			key, hash := newAPIKey()
			fmt.Fprintf(c.stdout, "API key (give it to the agent; it is shown only once):\n  %s\n\n", key)
			fmt.Fprintf(c.stdout, "Add to the policy file:\n  principals:\n    - id: %s\n      api_key_sha256: \"%s\"\n      scopes: [email.send]\n", id, hash)
			return nil
		},
	}
	cmd.Flags().StringVar(&id, "id", "my-agent", "id for the policy-file snippet (default oncall with --operator)")
	cmd.Flags().BoolVar(&operator, "operator", false, "an operator key (admin API, countersign ops) instead of an agent's API key")
	cmd.Flags().BoolVar(&env, "env", false, "print COUNTERSIGN_LINK_KEYS and COUNTERSIGN_RECEIPT_KEYS lines for an .env file")
	return cmd
}

// printEnvKeys writes fresh link and receipt keys as .env lines, their
// key ids dated so that a rotation can tell them apart.
func printEnvKeys(w io.Writer, now time.Time) error {
	link, seed := make([]byte, 32), make([]byte, 32)
	if _, err := rand.Read(link); err != nil {
		return err
	}
	if _, err := rand.Read(seed); err != nil {
		return err
	}
	day := now.UTC().Format("20060102")
	_, err := fmt.Fprintf(w, `# countersign's own keys (countersign keygen --env, %s). Keep this file secret.
# Link keys sign approval links; receipt keys sign receipts and audit checkpoints.
# To rotate, prepend a new key (kid:key,) and drop the old one later (README).
COUNTERSIGN_LINK_KEYS=l%s:%s
COUNTERSIGN_RECEIPT_KEYS=r%s:%s
`, now.UTC().Format(time.RFC3339), day, base64.StdEncoding.EncodeToString(link), day, base64.StdEncoding.EncodeToString(seed))
	return err
}
