package config

import (
	"os"
	"reflect"
	"testing"
)

// FuzzParse: no policy file makes the loader panic, and a file it accepts
// validates again as parsed (validation has no side effect a second look
// would trip on), reads back the same, and builds a policy whose
// conditions all validate.
func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile("../docs/countersign.example.yaml"); err == nil {
		f.Add(b)
	}
	for _, s := range []string{
		"principals: []\napprovers: []\nroutes: []\n",
		"approvers:\n  - {id: grace, email: grace@example.com}\nroutes:\n  - match: {action: email.send, when: [{attr: body.amount, gt: 1000}]}\n    approvers: {ids: [grace]}\n    notify: [email]\n",
		"targets:\n  - name: cal\n    base_url: https://cal.example/api\n    allow: [{method: PATCH, path: \"/events/*\", query: [notify]}]\n",
		"routes: [{match: {when: [{attr: a, in: [x]}]}}]\n",
		"&a [*a]\n", "a: !!binary gIGC\n", "? [a]\n: b\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		file, err := Parse(raw)
		if err != nil {
			return
		}
		if err := file.validate(); err != nil {
			t.Fatalf("accepted, then refused on a second look: %v", err)
		}
		again, err := Parse(raw)
		if err != nil || !reflect.DeepEqual(file, again) {
			t.Fatalf("parsed twice, read differently: %v", err)
		}
		for _, r := range file.Policy().Routes {
			for _, c := range r.Match.When {
				if err := c.Validate(); err != nil {
					t.Fatalf("an accepted route has a bad condition: %v", err)
				}
			}
		}
		_ = file.Channels()
	})
}
