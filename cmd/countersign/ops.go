package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/store"
)

// ops runs operator commands against the store named by
// COUNTERSIGN_REDIS_URL, with the policy of COUNTERSIGN_CONFIG.
func ops(ctx context.Context, args []string, env func(string) (string, bool), stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("ops: list, show, cancel or reconcile")
	}
	url, _ := env("COUNTERSIGN_REDIS_URL")
	if url == "" {
		return fmt.Errorf("set COUNTERSIGN_REDIS_URL to the service's Redis")
	}
	rdb, err := store.Open(url)
	if err != nil {
		return err
	}
	defer rdb.Close()
	st := store.New(rdb, nil)
	defer st.Close()
	file := devConfig()
	if path, _ := env("COUNTERSIGN_CONFIG"); path != "" {
		if file, err = config.Load(path); err != nil {
			return err
		}
	}
	svc, err := approval.NewService(approval.Config{Store: st, Policy: file.Policy(), Links: approval.RandomKeyring(),
		PublicURL: "http://operator.invalid", Retention: time.Duration(file.Settings.Retention)})
	if err != nil {
		return err
	}
	operator := "operator"
	if u, ok := env("USER"); ok && u != "" {
		operator = u
	}

	fs := flag.NewFlagSet("ops "+args[0], flag.ContinueOnError)
	status := fs.String("status", "", "only operations in this status")
	principal := fs.String("principal", "", "only this principal's operations")
	outcome := fs.String("outcome", "", "succeeded or failed (reconcile)")
	note := fs.String("note", "", "what you checked (reconcile; kept in the audit)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	key := fs.Arg(0)
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	switch args[0] {
	case "list":
		list, err := st.All(ctx, *principal, 1000)
		if err != nil {
			return err
		}
		now := time.Now()
		fmt.Fprintf(stdout, "%-30s %-18s %-18s %-16s %s\n", "OPERATION", "STATUS", "ACTION", "PRINCIPAL", "CREATED")
		for _, op := range list {
			st := op.EffectiveStatus(now)
			if *status != "" && string(st) != *status {
				continue
			}
			fmt.Fprintf(stdout, "%-30s %-18s %-18s %-16s %s\n", op.Key, st, op.Action, op.Principal, op.CreatedAt.Format(time.RFC3339))
		}
		return nil
	case "show":
		op, err := svc.Get(ctx, nil, key)
		if err != nil {
			return err
		}
		evs, err := st.Events(ctx, key)
		if err != nil {
			return err
		}
		return enc.Encode(map[string]any{"operation": op, "events": evs})
	case "cancel":
		op, err := svc.Cancel(ctx, nil, key)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s is %s\n", op.Key, op.Status)
		return nil
	case "reconcile":
		if *note == "" {
			return fmt.Errorf("reconcile: say what you checked with --note")
		}
		op, err := svc.Settle(ctx, key, approval.Status(*outcome), operator, *note)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s is %s (recorded in the audit as settled by %s)\n", op.Key, op.Status, operator)
		return nil
	}
	return fmt.Errorf("ops: unknown subcommand %q", args[0])
}
