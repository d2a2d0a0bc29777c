package config_test

import (
	"testing"

	"github.com/countersign/countersign/approval"
	"github.com/countersign/countersign/config"
)

// The example in docs/ is what people copy: it must stay valid, and route
// the way the README says.
func TestExamplePolicyFile(t *testing.T) {
	f, err := config.Load("../docs/countersign.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := f.Policy()
	agent := p.Principal("support-agent")
	cases := []struct {
		action string
		attrs  map[string]string
		route  string
	}{
		{"email.send", map[string]string{"external_recipients": "2"}, "external email"},
		{"email.send", map[string]string{"external_recipients": "0"}, "internal email"},
		{"http.request", map[string]string{"target": "billing", "body.amount": "1200"}, "large invoices"},
		{"http.request", map[string]string{"target": "billing", "body.amount": "90"}, "everything else"},
	}
	for _, tc := range cases {
		r, err := p.Resolve(tc.action, agent, tc.attrs)
		if err != nil || r.Name != tc.route {
			t.Errorf("%s %v: route %q (%v), want %q", tc.action, tc.attrs, r.Name, err, tc.route)
		}
		for _, a := range r.Approvers {
			if a == "sam" {
				t.Errorf("%s: sam approves an agent acting for him", tc.route)
			}
		}
	}
	var _ *approval.Policy = p
}
