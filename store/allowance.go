package store

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
)

// allowance is an active allowance as stored (the <id> field).
type allowance struct {
	Input approval.AllowanceInput `json:"in"`
	Until int64                   `json:"u"`
}

// AddAllowance activates an allowance once.
func (r *Redis) AddAllowance(ctx context.Context, a approval.Allowance) error {
	count, sum := "", ""
	if a.CountLeft != nil {
		count = strconv.Itoa(*a.CountLeft)
	}
	if a.SumLeft != nil {
		sum = strconv.FormatFloat(*a.SumLeft, 'f', -1, 64)
	}
	err := allowanceScript.Run(ctx, r.rdb, []string{allowancesKey(r.shards.of(a.Principal), a.Principal)},
		a.ID, mustJSON(allowance{Input: a.Input, Until: ms(a.Until)}), ms(a.Until), count, sum).Err()
	return unavailable("add allowance", err)
}

// Allowances lists a principal's allowances that are not revoked, in one
// round trip (the caller, on its clock, leaves out those past their end).
func (r *Redis) Allowances(ctx context.Context, principal string) ([]*approval.Allowance, error) {
	h, err := r.rdb.HGetAll(ctx, allowancesKey(r.shards.of(principal), principal)).Result()
	if err != nil {
		return nil, unavailable("allowances", err)
	}
	var out []*approval.Allowance
	for f, v := range h {
		if strings.Contains(f, ":") || h[f+":r"] != "" {
			continue
		}
		var a allowance
		if err := json.Unmarshal([]byte(v), &a); err != nil {
			err = &DecodeError{Key: f, Field: "allowance", Err: err}
			r.decodeFailed(err)
			return nil, err
		}
		al := &approval.Allowance{ID: f, Principal: principal, Input: a.Input, Until: time.UnixMilli(a.Until).UTC()}
		if c, ok := h[f+":c"]; ok {
			n, _ := strconv.Atoi(c)
			al.CountLeft = &n
		}
		if s, ok := h[f+":s"]; ok {
			x, _ := strconv.ParseFloat(s, 64)
			al.SumLeft = &x
		}
		out = append(out, al)
	}
	return out, nil
}

// RevokeAllowance ends an allowance at once.
func (r *Redis) RevokeAllowance(ctx context.Context, ref approval.Ref, t approval.Step) (bool, error) {
	al := func(tag string) []string { return []string{allowancesKey(tag, ref.Principal)} }
	res, err := reply(r.runKeys(ctx, revokeScript, ref, al, t.Tx, t.Now, encodeEvent(t.Event, t.Event.PayloadHash)))
	if err != nil {
		return false, unavailable("revoke allowance", err)
	}
	if res[0] == "missing" {
		return false, notFound(ref.Key)
	}
	return res[0] == "revoked", nil
}
