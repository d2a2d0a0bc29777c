package config_test

import (
	"strings"
	"testing"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/config"
)

const key = "0000000000000000000000000000000000000000000000000000000000000000"

const base = `
principals:
  - {id: support-agent, api_key_sha256: "` + key + `", scopes: [email.send, "http.request:calendar", "http.request:billing"], on_behalf_of: sam}
approvers:
  - {id: grace, email: grace@example.com, groups: [owners, finance]}
  - {id: sam, email: sam@example.com, groups: [staff]}
targets:
  - name: calendar
    base_url: https://calendar.internal.example/api
    headers: {Authorization: "Bearer ${CALENDAR_TOKEN}", Accept-Language: en}
    allow: [{method: PATCH, path: "/events/*"}, {method: DELETE, path: "/events/*"}]
    state: {fields: [start, end, title, time.zone]}
  - name: billing
    base_url: http://127.0.0.1:9000
    allow_private: true
    headers: {X-Api-Key: "${BILLING_KEY}"}
    allow: [{method: POST, path: /invoices}, {method: PUT, path: "/invoices/**"}]
    timeout: 5s
    max_body_bytes: 4096
`

func TestParseRoutesWithConditions(t *testing.T) {
	f, err := config.Parse([]byte(base + `
routes:
  - name: big-invoices
    match:
      action: http.request
      target: billing
      when:
        - {attr: body.amount, gt: 1000}
        - {attr: method, in: [POST, PUT]}
        - {attr: body.currency, present: true}
        - {attr: path, matches: "/invoices*"}
    approvers: {groups: [finance]}
    notify: [email]
  - name: external-email
    match: {action: email.send, when: [{attr: outside_domains, gte: 1}]}
    approvers: {groups: [owners]}
    notify: [email]
    forbid_self_approval: true
  - name: rest
    match: {attrs: {method: DELETE}, when: [{attr: body.kind, ne: draft}, {attr: x, not_in: [a, b]}, {attr: y, eq: "5"}, {attr: z, lt: 3}, {attr: w, lte: 4}, {attr: v, present: false}]}
    approvers: {ids: [grace]}
    notify: [console]
`))
	if err != nil {
		t.Fatal(err)
	}
	p := f.Policy()
	m := p.Routes[0].Match
	if m.Target != "billing" || len(m.When) != 4 {
		t.Fatalf("match = %+v", m)
	}
	if got, want := m.String(), `action=http.request target=billing body.amount > 1000 method in [POST PUT] body.currency present path matches "/invoices*"`; got != want {
		t.Fatalf("match = %s\nwant    %s", got, want)
	}
	if got, want := p.Routes[2].Match.String(), `method=DELETE body.kind != "draft" x not in [a b] y = "5" z < 3 w <= 4 v absent`; got != want {
		t.Fatalf("match = %s\nwant    %s", got, want)
	}
	pr := p.Principal("support-agent")
	r, err := p.Resolve("http.request", pr, map[string]string{"target": "billing", "method": "POST", "body.amount": "1200",
		"body.currency": "EUR", "path": "/invoices"})
	if err != nil || r.Name != "big-invoices" {
		t.Fatalf("resolve = %+v %v", r, err)
	}
	if _, err := p.Resolve("http.request", pr, map[string]string{"target": "billing", "method": "POST", "body.amount": "10"}); approval.ErrorCode(err) != approval.CodeNoRoute {
		t.Fatalf("small invoice: %v, want no_route (no other route)", err)
	}
}

func TestConfigRefusesBadConditionsAndTargets(t *testing.T) {
	route := func(match string) string {
		return base + "routes:\n  - match: " + match + "\n    approvers: {ids: [grace]}\n    notify: [console]\n"
	}
	for _, tc := range []struct {
		name, file, want string
	}{
		{"two operators", route(`{when: [{attr: a, gt: 1, lt: 5}]}`), "exactly one operator"},
		{"no operator", route(`{when: [{attr: a}]}`), "exactly one operator"},
		{"no attr", route(`{when: [{gt: 1}]}`), "needs an attr"},
		{"empty in", route(`{when: [{attr: a, in: []}]}`), "at least one value"},
		{"bad glob", route(`{when: [{attr: a, matches: "[a-"}]}`), "bad pattern"},
		{"non-numeric gt", route(`{when: [{attr: a, gt: lots}]}`), "cannot unmarshal"},
		{"unknown operator", route(`{when: [{attr: a, approx: 1}]}`), "not found"},
		{"target on another action", route(`{action: email.send, target: calendar}`), "applies to http.request"},
		{"unknown target", route(`{target: payroll}`), "not a target"},
		{"literal credential", strings.Replace(base, `"Bearer ${CALENDAR_TOKEN}"`, `"Bearer abc123"`, 1), "must be a ${ENV_VAR} reference"},
		{"literal api key", strings.Replace(base, `"${BILLING_KEY}"`, `"k-123"`, 1), "must be a ${ENV_VAR} reference"},
		{"reserved header", strings.Replace(base, `Accept-Language: en`, `If-Match: "*"`, 1), "set by countersign"},
		{"receipt header", strings.Replace(base, `Accept-Language: en`, `Countersign-Receipt: forged`, 1), "set by countersign"},
		{"credentials in URL", strings.Replace(base, "https://calendar", "https://u:p@calendar", 1), "must not carry credentials"},
		{"query in URL", strings.Replace(base, "example/api", "example/api?key=1", 1), "must not have a query"},
		{"plain http to a public target", strings.Replace(base, "https://calendar", "http://calendar", 1), "must be https"},
		{"GET allowed", strings.Replace(base, "{method: PATCH,", "{method: GET,", 1), "must be one of POST, PUT, PATCH, DELETE"},
		{"pattern without slash", strings.Replace(base, `path: "/events/*"}, {method: DELETE`, `path: "events/*"}, {method: DELETE`, 1), "must start with /"},
		{"partial wildcard", strings.Replace(base, `path: "/events/*"}, {method: DELETE`, `path: "/events/ev*"}, {method: DELETE`, 1), "whole segment"},
		{"inner **", strings.Replace(base, `"/invoices/**"`, `"/invoices/**/x"`, 1), "last segment"},
		{"dot-dot pattern", strings.Replace(base, `"/invoices/**"`, `"/invoices/../x"`, 1), `".." segment`},
		{"bad state field", strings.Replace(base, "time.zone", "time..zone", 1), "dotted path"},
		{"no allow", strings.Replace(base, `allow: [{method: POST, path: /invoices}, {method: PUT, path: "/invoices/**"}]`, `allow: []`, 1), "at least one"},
		{"timeout", strings.Replace(base, "timeout: 5s", "timeout: 10m", 1), "between 1s and 2m"},
		{"duplicate target", base + "  - {name: billing, base_url: \"https://x.example\", allow: [{method: POST, path: /x}]}\n", "duplicate"},
		{"unknown target field", strings.Replace(base, "timeout: 5s", "timeout: 5s\n    proxy: x", 1), "not found"},
		{"retry on 502", strings.Replace(base, "timeout: 5s", "timeout: 5s\n    retry: {on: [429, 502], max: 2}", 1), "502 cannot be retried"},
		{"retry max 6", strings.Replace(base, "timeout: 5s", "timeout: 5s\n    retry: {on: [429], max: 6}", 1), "retry.max must be between 1 and 5"},
		{"retry without statuses", strings.Replace(base, "timeout: 5s", "timeout: 5s\n    retry: {max: 2}", 1), "retry.on must list"},
		{"execution lease", base + "settings: {execution_lease: 1s}\n", "execution_lease 1s must be between 2s and 5m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestTargetRetryParses(t *testing.T) {
	f, err := config.Parse([]byte(strings.Replace(base, "timeout: 5s", "timeout: 5s\n    retry: {on: [429, 503], max: 3}", 1)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range f.Targets {
		if tg.Retry != nil {
			if tg.Retry.Max != 3 || len(tg.Retry.On) != 2 {
				t.Fatalf("retry %+v", tg.Retry)
			}
			return
		}
	}
	t.Fatal("no target kept its retry")
}

func TestTargetResolveHeaders(t *testing.T) {
	f, err := config.Parse([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CALENDAR_TOKEN": "tok-1"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	h, err := f.Targets[0].ResolveHeaders(lookup)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := h["Authorization"], "Bearer tok-1"; got != want {
		t.Fatalf("Authorization = %q, want %q", got, want)
	}
	if h["Accept-Language"] != "en" {
		t.Fatalf("headers = %v", h)
	}
	_, err = f.Targets[1].ResolveHeaders(lookup)
	if err == nil || !strings.Contains(err.Error(), "BILLING_KEY") || !strings.Contains(err.Error(), "X-Api-Key") {
		t.Fatalf("missing variable: %v", err)
	}
	if !f.Targets[1].Private() || f.Targets[0].Private() || !f.Targets[0].Reads() {
		t.Fatal("Private/Reads")
	}
}
