package config_test

import (
	"strings"
	"testing"

	"github.com/countersign/countersign/config"
)

func callbackFile(fields string) string {
	return `
principals:
  - {id: agent, api_key_sha256: "` + keyA + `", scopes: [email.send]` + fields + `}
approvers:
  - {id: grace, email: grace@example.com}
routes:
  - {match: {}, approvers: {ids: [grace]}, notify: [email]}
`
}

func TestCallbackURL(t *testing.T) {
	for _, ok := range []string{
		`, callback_url: "https://agents.example/hooks/cs", callback_secret: "${CB_SECRET}"`,
		`, callback_url: "http://127.0.0.1:9000/hook", callback_secret: "${CB_SECRET}"`,
		`, callback_url: "http://localhost:9000/hook", callback_secret: "${CB_SECRET}"`,
		``,
	} {
		f, err := config.Parse([]byte(callbackFile(ok)))
		if err != nil {
			t.Errorf("%s: %v", ok, err)
			continue
		}
		if ok != "" && (f.Principals[0].CallbackURL == "" || f.Principals[0].CallbackSecret != "${CB_SECRET}") {
			t.Errorf("%s: not read: %+v", ok, f.Principals[0])
		}
	}
	for _, c := range []struct{ name, fields, want string }{
		{"plain http elsewhere", `, callback_url: "http://agents.example/hook", callback_secret: "${S}"`, "must be https"},
		{"plain http to a private address", `, callback_url: "http://10.0.0.5/hook", callback_secret: "${S}"`, "must be https"},
		{"credentials", `, callback_url: "https://bob:hunter2@agents.example/hook", callback_secret: "${S}"`, "credentials"},
		{"a relative URL", `, callback_url: "/hook", callback_secret: "${S}"`, "absolute https URL"},
		{"another scheme", `, callback_url: "ftp://agents.example/hook", callback_secret: "${S}"`, "absolute https URL"},
		{"no secret", `, callback_url: "https://agents.example/hook"`, "needs callback_secret"},
		{"a literal secret", `, callback_url: "https://agents.example/hook", callback_secret: "hunter2"`, "never a literal"},
		{"a secret without a URL", `, callback_secret: "${S}"`, "callback_url is not"},
		{"an env reference in the URL", `, callback_url: "https://${HOST}/hook", callback_secret: "${S}"`, "cannot use"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := config.Parse([]byte(callbackFile(c.fields)))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to mention %q", err, c.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("the error repeats a secret: %v", err)
			}
		})
	}
}
