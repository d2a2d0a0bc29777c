package httpreq

import (
	"bytes"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/approval"
)

// The words of a bulk's summary: what each item does, said the way people
// say it ("18 moved, 2 deleted"), derived from its method and from what
// its diff changes.

// Verbs, in the order a summary lists them.
const (
	verbMoved     = "moved"
	verbChanged   = "changed"
	verbCreated   = "created"
	verbDeleted   = "deleted"
	verbUnchanged = "unchanged"
)

var verbOrder = []string{verbMoved, verbChanged, verbCreated, verbDeleted, verbUnchanged}

// verbOf says what one item does: DELETE deletes, POST creates; a PATCH or
// PUT whose real changes (before ≠ after) are all of time fields moves the
// resource, one that changes nothing leaves it unchanged, any other
// changes it. For a write not bound to state, diff is what its body sets
// (bodyChanges).
func verbOf(method string, diff []approval.Change) string {
	switch method {
	case http.MethodDelete:
		return verbDeleted
	case http.MethodPost:
		return verbCreated
	}
	real, times := 0, 0
	for _, c := range diff {
		if bytes.Equal(c.Before, c.After) {
			continue
		}
		real++
		if timeField(c) {
			times++
		}
	}
	switch {
	case real == 0:
		return verbUnchanged
	case times == real:
		return verbMoved
	}
	return verbChanged
}

// bodyChanges are the fields a body sets, as changes from unknown values.
func bodyChanges(body any) []approval.Change {
	obj, _ := body.(map[string]any)
	var out []approval.Change
	for _, l := range leaves(obj, nil) {
		out = append(out, approval.Change{Field: l.path.String(), After: canonical(l.value)})
	}
	return out
}

// timeWords are the field names (lower case, without _ and -) that hold a
// time.
var timeWords = map[string]bool{
	"start": true, "end": true, "starttime": true, "endtime": true, "startdate": true, "enddate": true,
	"startsat": true, "endsat": true, "startat": true, "endat": true, "begin": true, "beginsat": true,
	"finish": true, "due": true, "dueat": true, "duedate": true, "date": true, "datetime": true, "time": true,
	"when": true, "dtstart": true, "dtend": true, "scheduledat": true, "scheduledfor": true,
}

var isoDate = regexp.MustCompile(`^"\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?"$`)

// timeField reports whether a change is of a time: by its name (any
// segment of the dotted path, "start.dateTime"), or by its value (the new
// value is an ISO 8601 date or date-time).
func timeField(c approval.Change) bool {
	for _, seg := range strings.Split(c.Field, ".") {
		if timeWords[strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(seg))] {
			return true
		}
	}
	if isoDate.Match(c.After) {
		s := strings.Trim(string(c.After), `"`)
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02T15:04", "2006-01-02"} {
			if _, err := time.Parse(layout, s); err == nil {
				return true
			}
		}
	}
	return false
}

// verbCounts is "18 moved, 2 deleted".
func verbCounts(plans []*itemPlan) string {
	count := map[string]int{}
	for _, p := range plans {
		count[p.verb]++
	}
	var parts []string
	for _, v := range verbOrder {
		if n := count[v]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, v))
		}
	}
	return strings.Join(parts, ", ")
}

var nounWord = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,39}$`)

// collectionNoun names what the items are, from their paths: the
// collection they are in ("/events/42" and "/events" are events) when
// they share one whose name is a plain word, else "requests".
func collectionNoun(items []*Request) string {
	noun := ""
	for _, it := range items {
		segs := it.segs
		if it.Method != http.MethodPost && len(segs) > 1 {
			segs = segs[:len(segs)-1]
		}
		if len(segs) == 0 {
			return "requests"
		}
		c := segs[len(segs)-1]
		switch {
		case !nounWord.MatchString(c):
			return "requests"
		case noun == "":
			noun = c
		case noun != c:
			return "requests"
		}
	}
	return noun
}

// countOf is "20 events", "1 event".
func countOf(n int, noun string) string {
	if n == 1 {
		if s, ok := strings.CutSuffix(noun, "s"); ok && len(s) > 1 {
			noun = s
		}
	}
	return fmt.Sprintf("%d %s", n, noun)
}

// bulkAttrs are the facts routes match on for a bulk (approval.Match):
// "target"; "items", the number of items; and every attribute a single
// request reports (Request.Attrs), with the value the items agree on.
// Where they differ, or some items have it and others not, the attribute
// is opaque, so that a condition on it cannot be decided and the route
// that guards against it is taken (conditions fail closed): a DELETE
// hidden among PATCHes cannot pass a route written for PATCHes only.
func bulkAttrs(r *Request) map[string]string {
	attrs := map[string]string{"target": r.Target, "items": fmt.Sprint(len(r.Items))}
	var per []map[string]string
	keys := map[string]bool{}
	for _, it := range r.Items {
		a := it.Attrs()
		delete(a, "target")
		per = append(per, a)
		for k := range a {
			keys[k] = true
		}
	}
	for k := range keys {
		v, same := per[0][k]
		for _, a := range per[1:] {
			if w, ok := a[k]; !ok || w != v {
				same = false
				break
			}
		}
		if same {
			attrs[k] = v
		} else {
			attrs[k] = approval.AttrOpaque("value that differs between the items of a bulk")
		}
		if sum, ok := itemsTotal(per, k); ok {
			attrs[approval.SumAttr(k)] = sum
		}
	}
	return attrs
}

// itemsTotal is the total of attribute k over the items, for an
// allowance's sum budget (approval.SumAttr): every item writes its value.
// It is opaque when some item holds k as other than a number or not at
// all while another holds a number; ok is false when no item holds a
// number.
func itemsTotal(per []map[string]string, k string) (string, bool) {
	total, numbers, others := 0.0, 0, 0
	for _, a := range per {
		v, ok := a[k]
		f, err := strconv.ParseFloat(v, 64)
		if ok && err == nil && isJSONNumber(v) {
			total += f
			numbers++
		} else {
			others++
		}
	}
	switch {
	case numbers == 0:
		return "", false
	case others > 0 || math.IsInf(total, 0):
		return approval.AttrOpaque("total over items that do not all hold a number"), true
	}
	return strconv.FormatFloat(total, 'f', -1, 64), true
}

// isJSONNumber: the attribute is a number as JSON writes it (bodies are
// canonical, so numbers read so; "0x10" or "Inf" in a string do not).
func isJSONNumber(v string) bool { return jsonNumberText.MatchString(v) }

var jsonNumberText = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)
