package config_test

import (
	"strings"
	"testing"

	"github.com/countersign/countersign/config"
)

// A route's notify may mix every channel; each is checked on its own.
func TestNotifyMixesChannels(t *testing.T) {
	policy := func(approver, notify string) string {
		return "webhooks:\n  - {name: ops, url: https://hooks.example/x}\n" +
			"approvers:\n  - " + approver + "\n" +
			"routes:\n  - {match: {}, approvers: {ids: [grace]}, notify: " + notify + "}\n"
	}
	grace := `{id: grace, email: grace@example.com, slack_user_id: U0GRACE, teams_user_id: "29:1AbCdEf-gh_Ij"}`
	f, err := config.Parse([]byte(policy(grace,
		`["slack:#approvals", "slack:dm", "teams", "teams:19:a1B2c3-d4_e5@thread.tacv2", "email", "webhook:ops", "console"]`)))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(f.Channels(), ","), "slack,teams,email,webhook,console"; got != want {
		t.Errorf("channels %s, want %s", got, want)
	}
	p := f.Policy()
	if a := p.ApproverByTeams("29:1AbCdEf-gh_Ij"); a == nil || a.ID != "grace" {
		t.Fatalf("ApproverByTeams = %+v", a)
	}
	guid := `{id: grace, teams_user_id: 0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d}`
	f, err = config.Parse([]byte(policy(guid, `[teams]`)))
	if err != nil {
		t.Fatal(err)
	}
	// An Entra object id is the same in any case; a Teams user id is not.
	if a := f.Policy().ApproverByTeams("29:other", "0A1B2C3D-4E5F-6A7B-8C9D-0E1F2A3B4C5D"); a == nil || a.ID != "grace" {
		t.Fatalf("ApproverByTeams by object id = %+v", a)
	}
	f, err = config.Parse([]byte(policy(grace, `[teams]`)))
	if err != nil {
		t.Fatal(err)
	}
	p = f.Policy()
	if a := p.ApproverByTeams("29:1abcdef-gh_ij"); a != nil {
		t.Fatalf("a Teams user id matched in another letter case: %+v", a)
	}
	if a := p.ApproverByTeams("", ""); a != nil {
		t.Fatalf("empty ids matched %+v", a)
	}

	for _, tc := range []struct{ approver, notify, want string }{
		{grace, `["teams:general"]`, `use teams (each approver's chat) or teams:19:…@thread.tacv2`},
		{grace, `["teams:19:abc@thread.tacv2/../x"]`, `teams:19:…@thread.tacv2`},
		{grace, `["msteams"]`, `unknown channel (email, console, slack:…, teams, teams:…, webhook:…)`},
		{`{id: grace, teams_user_id: "grace@example.com"}`, `[teams]`, `teams_user_id "grace@example.com" must be a Teams user id`},
	} {
		_, err := config.Parse([]byte(policy(tc.approver, tc.notify)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: error %v, want %q", tc.approver, tc.notify, err, tc.want)
		}
	}
}
