package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/countersign/countersign/approval"
)

// newAPIKey returns a fresh API key and the hex SHA-256 to configure.
func newAPIKey() (key, hash string) {
	key = "cs_" + approval.RandomToken(32)
	return key, apiKeyHash(key)
}

func apiKeyHash(key string) string {
	return strings.TrimPrefix(approval.SHA256Hex([]byte(key)), "sha256:")
}

func keygen(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	id := fs.String("id", "my-agent", "principal id for the config snippet")
	if err := fs.Parse(args); err != nil {
		return err
	}
	key, hash := newAPIKey()
	fmt.Fprintf(stdout, "API key (give it to the agent; it is shown only once):\n  %s\n\n", key)
	fmt.Fprintf(stdout, "Add to the policy file:\n  principals:\n    - id: %s\n      api_key_sha256: \"%s\"\n      scopes: [email.send]\n", *id, hash)
	return nil
}
