package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/receipt"
	"github.com/spf13/cobra"
)

func init() { register(newAuditCmd) }

func newAuditCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{Use: "audit", Short: "Check the tamper-evident audit log"}
	groupCommand(cmd)
	var jwks string
	verify := &cobra.Command{
		Use:   "verify FILE [FILE…]",
		Short: "Check the hash chains and signed checkpoints of audit log files",
		Long: `countersign audit verify checks the hash chains of an audit log
(COUNTERSIGN_AUDIT_FILE, or the service's stderr; other lines are skipped) and,
with --jwks, the signatures of its checkpoints. It reports the first edited,
deleted, inserted or reordered entry, or that every chain is whole: exit 0 when
whole, 1 when broken.

With several replicas, each writes the chains while it holds the sealer's lease:
name every replica's file to check the chains across them (the order of lines
within a file is then not checked; their seq is).`,
		Example: `  countersign audit verify /var/log/countersign/audit.jsonl --jwks https://countersign.example/.well-known/jwks.json
  countersign audit verify replica-a.jsonl replica-b.jsonl --jwks jwks.json`,
		Args: argsUsage(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, files []string) error {
			return auditVerify(c.ctx, files, jwks, c.stdout)
		},
	}
	verify.Flags().StringVar(&jwks, "jwks", "", "countersign's JWKS (URL or file), to check checkpoint signatures")
	cmd.AddCommand(verify)
	return cmd
}

// auditVerify checks audit log files and prints the verdict.
func auditVerify(ctx context.Context, files []string, jwks string, stdout io.Writer) error {
	var keys audit.KeySource
	if jwks != "" {
		src, err := verifyKeys(jwks)
		if err != nil {
			return err
		}
		keys = checkpointKeys{ctx: ctx, keys: src}
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
	fmt.Fprintf(stdout, "whole: %d audit entries in %d chains, %d lines read\n", rep.Entries, len(rep.Chains), rep.Lines)
	return nil
}

// checkpointKeys verifies checkpoint JWS against countersign's JWKS.
type checkpointKeys struct {
	ctx  context.Context
	keys receipt.KeySource
}

func (k checkpointKeys) VerifyCheckpoint(jws string) ([]byte, error) {
	return receipt.VerifyJWS(k.ctx, jws, audit.CheckpointType, k.keys)
}
