package store

import (
	"strconv"
	"testing"
)

func TestOwnersKeepTwoGenerations(t *testing.T) {
	var o owners
	for i := range 2 * ownersGen {
		o.put("op"+strconv.Itoa(i), "p"+strconv.Itoa(i))
	}
	if got := o.get("op0"); got != "p0" { // in the older generation: kept, and promoted
		t.Fatalf("op0 → %q", got)
	}
	o.put("new", "p") // the newer generation is full: the older one goes
	if got := o.get("op1"); got != "" {
		t.Fatalf("op1 kept past two generations: %q", got)
	}
	for _, k := range []string{"op0", "new", "op" + strconv.Itoa(2*ownersGen-1)} {
		if o.get(k) == "" {
			t.Fatalf("%s forgotten", k)
		}
	}
	if n := len(o.cur) + len(o.prev); n > 2*ownersGen {
		t.Fatalf("%d entries", n)
	}
}
