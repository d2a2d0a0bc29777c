package httpreq

import (
	"net/http"
	"strings"

	"github.com/countersign/countersign/approval"
)

var _ approval.IrreversibleOps = (*Action)(nil)

// Irreversible says which requests an allowance could cover cannot be
// undone: POST and DELETE (a bulk holding one is irreversible too, and
// reports its method only when every item agrees, so a pinned method
// covers only bulks of that method). An allowance that pins the method to
// POST and/or DELETE covers only irreversible requests; one that pins it
// to PUT and/or PATCH none; any other covers some.
func (a *Action) Irreversible(pinned map[string][]string) (bool, string) {
	methods, ok := pinned["method"]
	if !ok {
		return false, "POST and DELETE requests"
	}
	var irr []string
	for _, m := range methods {
		if m == http.MethodPost || m == http.MethodDelete {
			irr = append(irr, m)
		}
	}
	switch {
	case len(irr) == 0:
		return false, ""
	case len(irr) == len(methods):
		return true, ""
	}
	return false, strings.Join(irr, " and ") + " requests"
}
