package httpreq

import (
	"context"
	"fmt"
	"net/http"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/approval/jsonx"
)

// read is the state read: GET on the request's own path.
type read struct {
	doc  any
	etag string
	gone bool
}

// readState GETs the resource. A 404 or 410 is reported as gone; any
// other failure is an error whose text is safe to show.
func (a *Action) readState(ctx context.Context, t *target, r *Request) (*read, *readError) {
	get := &Request{Target: r.Target, Method: http.MethodGet, Path: r.Path, Query: r.Query, segs: r.segs}
	res := a.do(ctx, t, http.MethodGet, t.url(get), nil, http.Header{"Accept": {"application/json"}}, maxStateBytes)
	if res.err != nil {
		rule := "state_read_failed"
		if isPrivate(res.err) {
			rule = "private_address"
		}
		return nil, &readError{rule: rule, msg: describe(res.err)}
	}
	resp := res.resp
	switch {
	case resp.status == http.StatusNotFound || resp.status == http.StatusGone:
		return &read{gone: true}, nil
	case resp.status >= 300 && resp.status < 400:
		return nil, &readError{rule: "redirect", status: resp.status,
			msg: fmt.Sprintf("the target answered the state read with a redirect (%s); countersign never follows redirects", statusText(resp.status))}
	case resp.status < 200 || resp.status >= 300:
		return nil, &readError{rule: "state_read_failed", status: resp.status,
			msg: fmt.Sprintf("the target answered the state read with %s", statusText(resp.status))}
	case resp.truncated:
		return nil, &readError{rule: "state_too_large", status: resp.status,
			msg: fmt.Sprintf("the resource is larger than %d bytes", maxStateBytes)}
	}
	if approval.CheckJSONDepth(resp.body, "") != nil {
		return nil, &readError{rule: "state_too_deep", status: resp.status,
			msg: fmt.Sprintf("the resource nests deeper than %d levels, so its state cannot be bound", approval.MaxJSONDepth)}
	}
	doc, err := decodeJSON(t.redactor.bytes(resp.body))
	if _, isObj := doc.(map[string]any); err != nil || !isObj {
		return nil, &readError{rule: "state_not_json", status: resp.status,
			msg: "the resource at this path is not a JSON object, so its state cannot be bound"}
	}
	return &read{doc: doc, etag: strongETag(resp.header)}, nil
}

type readError struct {
	rule   string
	status int
	msg    string
}

// prepareError maps a failed state read at prepare to a coded error:
// private addresses and redirects are policy_denied, a 4xx answer is
// invalid_input, and a target that cannot be reached or fails (5xx) is
// unavailable (nothing was stored; try again later).
func (e *readError) prepareError() error {
	details := map[string]any{"rule": e.rule}
	if e.status != 0 {
		details["status"] = e.status
	}
	switch {
	case e.rule == "private_address" || e.rule == "redirect":
		return &approval.Error{Code: approval.CodePolicyDenied, Message: e.msg, Details: details}
	case e.status >= 400 && e.status < 500, e.rule == "state_not_json", e.rule == "state_too_large", e.rule == "state_too_deep":
		details["fields"] = []approval.FieldError{{Field: "path", Reason: e.msg}}
		return &approval.Error{Code: approval.CodeInvalidInput, Message: "path: " + e.msg, Details: details}
	}
	return &approval.Error{Code: approval.CodeUnavailable, Message: e.msg + "; nothing was stored, try again later", Details: details}
}

// Prepare implements approval.Action: it validates, reads the resource,
// binds the operation to its state and renders the diff. It never writes.
//
// Returns invalid_input (details.fields, and details.rule for refused
// paths), insufficient_scope, policy_denied (details.rule:
// target_not_allowed, method_not_allowed, path_not_allowed,
// max_body_bytes, private_address, redirect), or unavailable when the
// target cannot be read.
func (a *Action) Prepare(ctx context.Context, req approval.PrepareRequest) (*approval.Prepared, error) {
	r, t, err := a.resolve(req.Input, req.Principal)
	if err != nil {
		return nil, err
	}
	if r.bulk() {
		return a.prepareBulk(ctx, req, r, t)
	}
	p := &approval.Prepared{Input: r, Scope: Scope(t.Name), Attrs: r.Attrs()}
	var pl plan
	if t.bound(r.Method) {
		rd, rerr := a.readState(ctx, t, r)
		if rerr != nil {
			return nil, rerr.prepareError()
		}
		if rd.gone {
			return nil, &approval.Error{Code: approval.CodeInvalidInput,
				Message: fmt.Sprintf("path: target %s has no resource at %s (the state read found nothing); check the path", t.Name, r.Path),
				Details: map[string]any{"rule": "resource_not_found", "fields": []approval.FieldError{{Field: "path", Reason: "no resource at this path"}}}}
		}
		var body any
		if len(r.Body) > 0 {
			body, _ = decodeJSON(r.Body)
		}
		pl = planWrite(r.Method, t.StateFields, body, rd.doc)
		snap := take(rd.doc, pl.fields)
		p.State = &approval.StateBinding{Hash: snap.hash(), Snapshot: snap.raw(), ETag: rd.etag}
	}
	p.Preview = a.preview(t, r, pl, p.State)
	return p, nil
}

// preview renders the request for humans and the agent.
func (a *Action) preview(t *target, r *Request, pl plan, st *approval.StateBinding) approval.Preview {
	u := t.url(r)
	pv := approval.Preview{
		Title: fmt.Sprintf("%s %s on %s", r.Method, r.Path, t.Name),
		Fields: []approval.Field{
			{Name: "target", Label: "Target", Value: t.Name},
			{Name: "method", Label: "Method", Value: r.Method},
			{Name: "url", Label: "URL", Value: u},
		},
		Diff: pl.diff,
	}
	if len(r.Body) > 0 {
		// Indented when that at most doubles it: a wide, deep body would
		// grow by its depth in spaces on every line.
		label, text := "Body (JSON)", r.Body
		if ind, ok := jsonx.IndentBounded(r.Body, 2*len(r.Body)+4<<10); ok {
			text = ind
		} else {
			label = "Body (JSON, compact: indented it would be more than twice as long)"
		}
		pv.Fields = append(pv.Fields, approval.Field{Name: "body", Label: label, Value: string(text), Long: true})
	}
	switch {
	case r.Method == http.MethodDelete:
		pv.Summary = fmt.Sprintf("Deletes %s on %s.", r.Path, t.Name)
	case r.Method == http.MethodPost:
		pv.Summary = fmt.Sprintf("Sends a POST to %s on %s.", r.Path, t.Name)
	default:
		pv.Summary = fmt.Sprintf("Changes %d field(s) of %s on %s.", len(pl.diff), r.Path, t.Name)
	}
	if r.Method == http.MethodDelete || r.Method == http.MethodPost {
		pv.Warnings = append(pv.Warnings, "irreversible")
	}
	switch {
	case st == nil:
		pv.Warnings = append(pv.Warnings, "not_state_bound")
		pv.Summary += " It is not checked against the record's current state before it runs."
	case st.ETag == "":
		pv.Warnings = append(pv.Warnings, "no_etag")
		pv.Summary += " It runs only if the record has not changed since it was read (checked again right before it runs); the target does not say which version it holds, so a change in the very last instant cannot be caught."
		pv.Fields = append(pv.Fields, approval.Field{Name: "precondition", Label: "Sent only if unchanged",
			Value:     "re-read and compared right before the write; sent without If-Match, because the target gave no ETag when the record was read",
			Technical: true})
	default:
		pv.Summary += " It runs only if the record has not changed since it was read (checked again right before it runs, and by the target itself)."
		pv.Fields = append(pv.Fields, approval.Field{Name: "precondition", Label: "Sent only if unchanged",
			Value:     "If-Match: " + st.ETag + " (the version tag, ETag, the target gave when the record was read; the target refuses the write if the record has changed since)",
			Technical: true})
	}
	if pl.truncated {
		pv.Warnings = append(pv.Warnings, "diff_truncated")
	}
	return pv
}

func (e *readError) Error() string { return e.msg }
