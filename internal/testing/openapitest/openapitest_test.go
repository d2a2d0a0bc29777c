package openapitest

import (
	"net/http/httptest"
	"strings"
	"testing"
)

const view = `{"operation_key":"op_aaaaaaaaaaaaaaaaaaaaaaaaaa","action":"email.send","status":"draft",
"created_at":"2026-12-01T09:00:00Z","expires_at":"2026-12-01T09:15:00Z",
"payload_hash":"sha256:0000000000000000000000000000000000000000000000000000000000000000",
"input":{"to":["a@b.example"]},"preview":{"title":"t","summary":"s","fields":[]},
"approval":{"required":1,"approvers":["grace"],"approvals":[],"rejection":null,"notified":[],"reminded":[],"escalated":null},
"result":null,"error":null,"next_step":"Not sent.","retry_after_seconds":null,"version":1}`

// The validator must be able to fail: each mutation of a valid answer is
// refused, so a passing suite means the answers match the description.
func TestValidatorRefusesWhatIsNotDescribed(t *testing.T) {
	v, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	get := httptest.NewRequest("GET", "http://127.0.0.1:1/v1/operations/op_aaaaaaaaaaaaaaaaaaaaaaaaaa", nil)
	json := map[string][]string{"Content-Type": {"application/json"}}
	if err := v.Check(get, 200, json, []byte(view)); err != nil {
		t.Fatalf("a valid answer was refused: %v", err)
	}
	cases := []struct {
		name   string
		status int
		body   string
	}{
		{"an undescribed field", 200, strings.Replace(view, `"version":1`, `"version":1,"link":"https://x/a/1"`, 1)},
		{"a missing field", 200, strings.Replace(view, `"next_step":"Not sent.",`, ``, 1)},
		{"an unknown status", 200, strings.Replace(view, `"draft"`, `"waiting"`, 1)},
		{"a wrong type", 200, strings.Replace(view, `"version":1`, `"version":"1"`, 1)},
		{"an undescribed status code", 418, `{"error":{"code":"internal","message":"x"}}`},
		{"an error with an unknown code", 404, `{"error":{"code":"gone_fishing","message":"x"}}`},
		{"an error without message", 404, `{"error":{"code":"not_found"}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := v.Check(get, c.status, json, []byte(c.body)); err == nil {
				t.Errorf("accepted %d %s", c.status, c.body)
			}
		})
	}
	// An endpoint the description lacks must answer the contract's 404.
	odd := httptest.NewRequest("GET", "http://127.0.0.1:1/v1/approve", nil)
	if err := v.Check(odd, 200, json, []byte(`{}`)); err == nil {
		t.Error("an undescribed endpoint answering 200 was accepted")
	}
	if err := v.Check(odd, 404, json, []byte(`{"error":{"code":"not_found","message":"no such endpoint"}}`)); err != nil {
		t.Errorf("the not_found answer of an undescribed endpoint: %v", err)
	}
	if err := v.Check(httptest.NewRequest("GET", "http://127.0.0.1:1/a/x", nil), 200, nil, nil); err != ErrNotDescribed {
		t.Errorf("pages are not part of the API: %v", err)
	}
}
