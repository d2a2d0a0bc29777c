package config_test

import (
	"strings"
	"testing"

	"github.com/countersign/countersign/config"
)

// Route attributes may be written dotted, as they always were, or as JSON
// Pointers for members whose names hold dots or slashes; both name the
// same attribute (guarantee 13).
func TestRouteAttributeNamesAsPointers(t *testing.T) {
	f, err := config.Parse([]byte(base + `
routes:
  - name: named
    match:
      attrs: {"/body/app.example~1name": x}
      when: [{attr: "/body/customer/tier", eq: platinum}, {attr: body.app.example/name, present: true}]
    approvers: {ids: [grace]}
    notify: [console]
`))
	if err != nil {
		t.Fatal(err)
	}
	m := f.Policy().Routes[0].Match
	if got, want := m.String(), `body.app.example/name=x body.customer.tier = "platinum" body.app.example/name present`; got != want {
		t.Fatalf("match = %s\nwant    %s", got, want)
	}
	attrs := map[string]string{"body.app.example/name": "x", "body.customer.tier": "platinum"}
	if ok, why := m.Check("http.request", "support-agent", attrs); !ok {
		t.Fatalf("not matched: %s", why)
	}
	for _, tc := range []struct{ match, want string }{
		{`{when: [{attr: "/body/a~2", eq: x}]}`, `"~" is written "~0"`},
		{`{attrs: {"/body/a": x, body.a: y}}`, "name the same attribute"},
	} {
		_, err := config.Parse([]byte(base + "routes:\n  - match: " + tc.match + "\n    approvers: {ids: [grace]}\n    notify: [console]\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.match, err, tc.want)
		}
	}
}
