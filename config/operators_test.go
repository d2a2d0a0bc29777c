package config_test

import (
	"strings"
	"testing"

	"github.com/countersign/countersign/config"
)

const keyA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
const keyB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

func operatorsFile(operators string) string {
	return `
principals:
  - {id: agent, api_key_sha256: "` + keyA + `", scopes: [email.send]}
approvers:
  - {id: grace, email: grace@example.com}
routes:
  - {match: {}, approvers: {ids: [grace]}, notify: [email]}
operators:
` + operators
}

func TestOperators(t *testing.T) {
	f, err := config.Parse([]byte(operatorsFile(`  - {id: oncall, api_key_sha256: "` + keyB + `"}`)))
	if err != nil {
		t.Fatal(err)
	}
	p := f.Policy()
	if o := p.OperatorByKeyHash(keyB); o == nil || o.ID != "oncall" {
		t.Fatalf("operator by key hash: %+v", o)
	}
	if p.OperatorByKeyHash(keyA) != nil || p.PrincipalByKeyHash(keyB) != nil {
		t.Error("a principal's key and an operator's key are interchangeable")
	}

	for _, c := range []struct{ name, operators, want string }{
		{"the key of a principal", `  - {id: oncall, api_key_sha256: "` + keyA + `"}`, "also the key of principal agent"},
		{"two operators, one key", `  - {id: a, api_key_sha256: "` + keyB + `"}` + "\n" + `  - {id: b, api_key_sha256: "` + keyB + `"}`, "also the key of operator a"},
		{"a duplicate id", `  - {id: a, api_key_sha256: "` + keyB + `"}` + "\n" + `  - {id: a, api_key_sha256: "` + strings.Repeat("c", 64) + `"}`, `duplicate id "a"`},
		{"a bad id", `  - {id: On Call, api_key_sha256: "` + keyB + `"}`, `id "On Call"`},
		{"a bad hash", `  - {id: oncall, api_key_sha256: "cso_plaintext"}`, "keygen --operator"},
		{"an unknown field", `  - {id: oncall, api_key_sha256: "` + keyB + `", scopes: ["*"]}`, "scopes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := config.Parse([]byte(operatorsFile(c.operators)))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want it to mention %q", err, c.want)
			}
		})
	}
}
