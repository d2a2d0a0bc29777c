package httpreq_test

import (
	"testing"

	"github.com/countersign/countersign/action/httpreq"
)

// TestIrreversibleByMethod: an allowance covers only irreversible requests
// when it pins the method to POST and/or DELETE, none when to PUT and/or
// PATCH, and some (named) otherwise.
func TestIrreversibleByMethod(t *testing.T) {
	a := &httpreq.Action{}
	for _, tc := range []struct {
		pinned map[string][]string
		all    bool
		some   string
	}{
		{nil, false, "POST and DELETE requests"},
		{map[string][]string{"target": {"billing"}}, false, "POST and DELETE requests"},
		{map[string][]string{"method": {"POST"}}, true, ""},
		{map[string][]string{"method": {"DELETE", "POST"}}, true, ""},
		{map[string][]string{"method": {"PATCH", "PUT"}}, false, ""},
		{map[string][]string{"method": {"DELETE", "PATCH"}}, false, "DELETE requests"},
	} {
		all, some := a.Irreversible(tc.pinned)
		if all != tc.all || some != tc.some {
			t.Errorf("%v: (%v, %q), want (%v, %q)", tc.pinned, all, some, tc.all, tc.some)
		}
	}
}
