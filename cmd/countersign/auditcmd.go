package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/receipt"
	"github.com/spf13/cobra"
)

func init() { register(newAuditCmd) }

func newAuditCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{Use: "audit", Short: "Check the tamper-evident audit log"}
	groupCommand(cmd)
	var jwks, head string
	verify := &cobra.Command{
		Use:   "verify FILE [FILE…] [--head URL_OR_FILE]",
		Short: "Check the hash chains and signed checkpoints of audit log files",
		Long: `countersign audit verify checks the hash chains of an audit log
(COUNTERSIGN_AUDIT_FILE, or the service's stderr; other lines are skipped) and,
with --jwks, the signatures of its checkpoints. It reports the first edited,
deleted, inserted or reordered entry, or that every chain is whole: exit 0 when
whole, 1 when broken.

With several replicas, each writes the chains while it holds the sealer's lease:
name every replica's file to check the chains across them (the order of lines
within a file is then not checked; their seq is).

A file alone proves only its own prefix: events cut from its end leave a shorter
chain that is still whole, and nothing after its last signed checkpoint is
signed. --head checks the files against the service's signed current head (the
last seq and hash of every chain, signed with the receipt key): every chain must
reach the head's seq with the head's hash there, or events were cut ("cut") or
the head is of another log ("other_chain"). --head takes the URL of
GET /v1/admin/audit/head (with COUNTERSIGN_OPERATOR_KEY; fetched before the
files are read, so entries written after it are expected and reported), or a
file holding a head saved earlier (its JSON or the bare JWS; a file that goes on
past such a head is refused as "head_older"). The head's signature is checked
with --jwks (default for a head URL: the same service's JWKS).`,
		Example: `  countersign audit verify /var/log/countersign/audit.jsonl --jwks https://countersign.example/.well-known/jwks.json
  countersign audit verify replica-a.jsonl replica-b.jsonl --jwks jwks.json
  countersign audit verify audit.jsonl --head head.json --jwks jwks.json`,
		Args: argsUsage(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, files []string) error {
			return auditVerify(c.ctx, files, jwks, head, c.get("COUNTERSIGN_OPERATOR_KEY"), c.stdout)
		},
	}
	verify.Flags().StringVar(&jwks, "jwks", "", "countersign's JWKS (URL or file), to check checkpoint and head signatures")
	verify.Flags().StringVar(&head, "head", "", "the signed current head: URL of GET /v1/admin/audit/head (with COUNTERSIGN_OPERATOR_KEY) or a file holding one")
	cmd.AddCommand(verify)
	return cmd
}

// auditVerify checks audit log files and prints the verdict.
func auditVerify(ctx context.Context, files []string, jwks, headSrc, operatorKey string, stdout io.Writer) error {
	remote := isURL(headSrc)
	if jwks == "" && remote {
		u, err := url.Parse(headSrc)
		if err != nil {
			return fmt.Errorf("--head %s: %w", headSrc, err)
		}
		jwks = u.Scheme + "://" + u.Host + "/.well-known/jwks.json"
	}
	if headSrc != "" && jwks == "" {
		return errors.New("--head needs --jwks (countersign's JWKS, URL or file) to check the head's signature")
	}
	var keys audit.KeySource // nil: checkpoint signatures are not checked
	var headKeys checkpointKeys
	if jwks != "" {
		src, err := verifyKeys(jwks)
		if err != nil {
			return err
		}
		headKeys = checkpointKeys{ctx: ctx, keys: src}
		keys = headKeys
	}
	// The head first, then the files: what a live log holds after the head
	// was written after it.
	var head *audit.HeadClaims
	if headSrc != "" {
		jws, err := readHead(ctx, headSrc, operatorKey)
		if err != nil {
			return err
		}
		if head, err = audit.ParseHead(jws, headKeys); err != nil {
			fmt.Fprintf(stdout, "BROKEN: --head %s: %v\n", headSrc, err)
			return errors.New("the signed head is refused")
		}
	}
	readers := map[string]io.Reader{}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		readers[name] = f
	}
	var rep *audit.Report
	var err error
	if len(files) == 1 {
		rep, err = audit.Verify(readers[files[0]], keys)
	} else {
		rep, err = audit.VerifyFiles(readers, keys)
	}
	if err != nil {
		return err
	}
	for _, name := range rep.Names() {
		c := rep.Chains[name]
		fmt.Fprintf(stdout, "chain %s: entries %d to %d, %d signed checkpoints, %d entries after the last one\n",
			name, c.First, c.Last, c.Checkpoints, c.Unsigned)
	}
	if !rep.Signatures {
		fmt.Fprintln(stdout, "checkpoint signatures not checked (no --jwks)")
	}
	if rep.Break != nil {
		fmt.Fprintf(stdout, "BROKEN: %v\n", rep.Break)
		return errors.New("the audit log is broken")
	}
	if head == nil {
		fmt.Fprintln(stdout, "no --head: the files prove their own prefix up to their last signed checkpoint, not that nothing was cut from their end")
		fmt.Fprintf(stdout, "whole: %d audit entries in %d chains, %d lines read\n", rep.Entries, len(rep.Chains), rep.Lines)
		return nil
	}
	hc, brk := rep.CheckHead(head, remote)
	if brk != nil {
		fmt.Fprintf(stdout, "BROKEN: %v\n", brk)
		return errors.New("the audit log does not reach the signed head")
	}
	fmt.Fprintf(stdout, "head: signed by %s at %s, %d chains; the files reach it", head.Issuer,
		time.Unix(head.IssuedAt, 0).UTC().Format(time.RFC3339), len(head.Chains))
	if hc.After > 0 {
		fmt.Fprintf(stdout, ", and hold %d entries written after it (not covered by it)", hc.After)
	}
	fmt.Fprintln(stdout)
	fmt.Fprintf(stdout, "whole: %d audit entries in %d chains, %d lines read\n", rep.Entries, len(rep.Chains), rep.Lines)
	return nil
}

// readHead reads a signed head from the admin API (GET
// /v1/admin/audit/head with the operator key) or from a file holding its
// JSON or the bare JWS.
func readHead(ctx context.Context, src, operatorKey string) (string, error) {
	var body []byte
	if isURL(src) {
		if operatorKey == "" {
			return "", errors.New("--head URL needs COUNTERSIGN_OPERATOR_KEY (an operator key of the service)")
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
		if err != nil {
			return "", fmt.Errorf("--head %s: %w", src, err)
		}
		req.Header.Set("Authorization", "Bearer "+operatorKey)
		resp, err := (&http.Client{Timeout: 15 * time.Second}).Do(req)
		if err != nil {
			return "", fmt.Errorf("--head %s: %w", src, err)
		}
		defer resp.Body.Close()
		body, err = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return "", fmt.Errorf("--head %s: %w", src, err)
		}
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("--head %s: HTTP %d (check COUNTERSIGN_OPERATOR_KEY)", src, resp.StatusCode)
		}
	} else {
		var err error
		if body, err = readBounded(src, 1<<20); err != nil {
			return "", fmt.Errorf("--head: %w", err)
		}
	}
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '{' {
		var v struct {
			Head string `json:"head"`
		}
		if err := json.Unmarshal(body, &v); err != nil || v.Head == "" {
			return "", fmt.Errorf("--head %s: not a signed head (JSON without \"head\")", src)
		}
		return v.Head, nil
	}
	return string(body), nil
}

func isURL(s string) bool {
	return strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "http://")
}

// checkpointKeys verifies checkpoint JWS against countersign's JWKS.
type checkpointKeys struct {
	ctx  context.Context
	keys receipt.KeySource
}

func (k checkpointKeys) VerifyCheckpoint(jws string) ([]byte, error) {
	return receipt.VerifyJWS(k.ctx, jws, audit.CheckpointType, k.keys)
}

// VerifyHead verifies a signed head against the same keys.
func (k checkpointKeys) VerifyHead(jws string) ([]byte, error) {
	return receipt.VerifyJWS(k.ctx, jws, audit.HeadType, k.keys)
}
