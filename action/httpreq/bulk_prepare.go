package httpreq

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/countersign/countersign/approval"
)

// Budgets of what a bulk keeps, in terms of n, the size of the agent's
// input: every item's diff rows together (the before values come from the
// target, not from the agent), and the values its state binding keeps
// whole. Past them the preview cuts the diff of the items that follow
// (their bodies are then shown whole, warning diff_truncated) and the
// binding keeps digests. preparedBound is what the whole prepared
// operation may take, a little under the store's bound of 4 × the request
// + 64 KiB (guarantee 10); past it the bulk is refused, naming its
// largest items.
func diffBudget(n int) int { return n + 16<<10 }
func keepBudget(n int) int { return n + 8<<10 }
func preparedBound(n int) int {
	return 4*(n+len(Name)+64) + 64<<10 - preparedSlack
}

// preparedSlack is what the store adds to an operation beyond its input,
// preview and state (the route, the event, its own overhead).
const preparedSlack = 4 << 10

// rowCost is what a diff row takes to keep, JSON included.
func rowCost(c approval.Change) int { return len(c.Field) + len(c.Before) + len(c.After) + 48 }

// maxFirstRow is the largest first row of an item shown past the budget.
const maxFirstRow = 2 << 10

// itemPlan is one item of a bulk as prepared.
type itemPlan struct {
	r       *Request
	pl      plan
	bind    *itemBinding
	snap    *snapshot
	verb    string
	cut     bool // its diff is not shown whole
	written []string
}

// prepareBulk reads every state-bound item (readItems), binds each to its
// own state, and renders one preview: a summary ("20 events: 18 moved, 2
// deleted"), then each item with its diff. It never writes.
func (a *Action) prepareBulk(ctx context.Context, req approval.PrepareRequest, r *Request, t *target) (*approval.Prepared, error) {
	reads, errs := a.readItems(ctx, t, r.Items, t.boundItems(r), true)
	if at, rerr := firstError(errs); rerr != nil {
		return nil, atItem(rerr.prepareError(), at)
	}
	plans := make([]*itemPlan, len(r.Items))
	var binds []*itemBinding
	var snaps []*snapshot
	var bodyFields [][]string
	for i, it := range r.Items {
		p := &itemPlan{r: it}
		plans[i] = p
		var body any
		if len(it.Body) > 0 {
			body, _ = decodeJSON(it.Body)
		}
		if rd := reads[i]; rd != nil {
			if rd.gone {
				return nil, atItem(&approval.Error{Code: approval.CodeInvalidInput,
					Message: fmt.Sprintf("path: target %s has no resource at %s (the state read found nothing); check the path", t.Name, it.Path),
					Details: map[string]any{"rule": "resource_not_found", "fields": []approval.FieldError{{Field: "path", Reason: "no resource at this path"}}}}, i)
			}
			p.pl = planWrite(it.Method, t.StateFields, body, rd.doc)
			p.snap = take(rd.doc, p.pl.fields)
			p.bind = &itemBinding{N: i + 1, Fields: p.snap.Fields, Hash: p.snap.hash(), ETag: rd.etag}
			if obj, ok := body.(map[string]any); ok {
				for _, l := range leaves(obj, nil) {
					p.written = append(p.written, l.path.String())
				}
			}
			binds, snaps, bodyFields = append(binds, p.bind), append(snaps, p.snap), append(bodyFields, p.written)
		}
		if p.bind != nil {
			p.verb = verbOf(it.Method, p.pl.diff)
		} else {
			p.verb = verbOf(it.Method, bodyChanges(body))
		}
	}
	n := len(req.Input)
	keepValues(binds, snaps, bodyFields, keepBudget(n))

	prep := &approval.Prepared{Input: r, Scope: Scope(t.Name), Attrs: r.Attrs()}
	if len(binds) > 0 {
		items := make([]itemBinding, len(binds))
		for i, b := range binds {
			items[i] = *b
		}
		prep.State = &approval.StateBinding{Hash: bulkStateHash(items), Snapshot: canonical(bulkState{Items: items})}
	}
	prep.Preview = bulkPreview(t, r, plans, diffBudget(n))
	if err := checkPreparedSize(prep, plans, n); err != nil {
		return nil, err
	}
	return prep, nil
}

// checkPreparedSize refuses a bulk whose prepared operation would take
// more than preparedBound to keep, naming its largest items.
func checkPreparedSize(p *approval.Prepared, plans []*itemPlan, n int) error {
	in, _ := approval.Canonical(p.Input)
	pv, _ := json.Marshal(p.Preview)
	size := len(in) + len(pv)
	if p.State != nil {
		st, _ := json.Marshal(p.State)
		size += len(st)
	}
	limit := preparedBound(n)
	if size <= limit {
		return nil
	}
	type cost struct{ n, bytes int }
	costs := make([]cost, len(plans))
	for i, pl := range plans {
		c := len(pl.r.Path) + len(pl.r.Body)
		for _, row := range pl.pl.diff {
			c += rowCost(row)
		}
		if pl.bind != nil {
			b, _ := json.Marshal(pl.bind)
			c += len(b)
		}
		costs[i] = cost{i + 1, c}
	}
	sort.SliceStable(costs, func(i, j int) bool { return costs[i].bytes > costs[j].bytes })
	var names []string
	var nums []int
	for _, c := range costs[:min(3, len(costs))] {
		names = append(names, fmt.Sprintf("item %d (about %d bytes)", c.n, c.bytes))
		nums = append(nums, c.n)
	}
	e := approval.FieldErrors{{Field: "items", Reason: fmt.Sprintf(
		"the prepared bulk would take %d bytes to keep (requests, previews and the state each is bound to), and a request of this size may take at most %d; the largest: %s. Split the bulk, or send the largest items on their own",
		size, limit, strings.Join(names, ", "))}}.Err().(*approval.Error)
	e.Details["rule"], e.Details["items"], e.Details["limit"] = "bulk_too_large", nums, limit
	return e
}

// bulkPreview renders a bulk for humans and the agent: the target, then
// each item as a heading field ("Item 3", "PATCH /events/3 (moved)"), its
// body where the diff does not show it whole (POST, DELETE with a body, a
// cut diff), and its diff rows; the diff rows of all items together stay
// within budget bytes.
func bulkPreview(t *target, r *Request, plans []*itemPlan, budget int) approval.Preview {
	pv := approval.Preview{Fields: []approval.Field{
		{Name: "target", Label: "Target", Value: t.Name},
		{Name: "base_url", Label: "Base URL", Value: t.base.String()},
		{Name: "items", Label: "Requests", Value: fmt.Sprintf("%d, written in this order; the first that fails stops the rest", len(plans))},
	}}
	var cut, unbound, noETag, irreversible []int
	for i, p := range plans {
		n := i + 1
		rows := p.pl.diff
		shown := 0
		for j, c := range rows {
			cost := rowCost(c)
			if cost > budget && !(j == 0 && cost <= maxFirstRow) {
				break
			}
			budget -= min(cost, budget)
			c.Item = n
			pv.Diff = append(pv.Diff, c)
			shown++
		}
		p.cut = shown < len(rows) || p.pl.truncated
		head := fmt.Sprintf("%s %s", p.r.Method, p.r.Path)
		if q := queryString(p.r); q != "" {
			head += "?" + q
		}
		pv.Fields = append(pv.Fields, approval.Field{Name: "item", Label: fmt.Sprintf("Item %d", n), Value: head + " (" + p.verb + ")", Item: n})
		if len(p.r.Body) > 0 && (p.cut || (p.r.Method != http.MethodPatch && p.r.Method != http.MethodPut)) {
			pv.Fields = append(pv.Fields, approval.Field{Name: "body", Label: "Body (JSON)", Value: string(p.r.Body), Long: true, Item: n})
		}
		switch {
		case p.bind == nil:
			unbound = append(unbound, n)
		case p.bind.ETag == "":
			noETag = append(noETag, n)
		}
		if p.cut {
			cut = append(cut, n)
		}
		if p.r.Method == http.MethodDelete || p.r.Method == http.MethodPost {
			irreversible = append(irreversible, n)
		}
	}
	noun := collectionNoun(r.Items)
	pv.Title = fmt.Sprintf("%s on %s: %s", countOf(len(plans), noun), t.Name, verbCounts(plans))
	var s strings.Builder
	fmt.Fprintf(&s, "%s: %s.", countOf(len(plans), noun), verbCounts(plans))
	if len(unbound) < len(plans) {
		s.WriteString(" Right before anything is written, every item is read again: if any of them changed, nothing is written.")
	}
	s.WriteString(" Then they are written in order, each once; if one fails, the rest are not attempted.")
	if len(irreversible) > 0 {
		pv.Warnings = append(pv.Warnings, "irreversible")
		fmt.Fprintf(&s, " %s cannot be undone (%s).", itemList(irreversible), "DELETE or POST")
	}
	if len(unbound) > 0 {
		pv.Warnings = append(pv.Warnings, "not_state_bound")
		fmt.Fprintf(&s, " %s: not checked against the record's current state before it runs.", itemList(unbound))
	}
	if len(noETag) > 0 {
		pv.Warnings = append(pv.Warnings, "no_etag")
		fmt.Fprintf(&s, " %s: the target does not say which version it holds, so a change in the very last instant cannot be caught.", itemList(noETag))
	}
	if len(noETag)+len(unbound) < len(plans) {
		s.WriteString(" The others are written only if their record has not changed since it was read: the target itself refuses the write otherwise.")
		pv.Fields = append(pv.Fields, approval.Field{Name: "precondition", Label: "Sent only if unchanged",
			Value: "each item whose target gave a version tag (ETag) when it was read is written with If-Match: that ETag, so the target refuses the write if the record has changed since", Technical: true})
	}
	if len(cut) > 0 {
		pv.Warnings = append(pv.Warnings, "diff_truncated")
		fmt.Fprintf(&s, " %s: the changes are too many to list; the body is shown whole.", itemList(cut))
	}
	pv.Summary = s.String()
	return pv
}

func queryString(r *Request) string {
	if len(r.Query) == 0 {
		return ""
	}
	var parts []string
	for _, k := range sortedKeys(r.Query) {
		for _, v := range r.Query[k] {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, "&")
}

// itemList names items: "Item 3", "Items 3, 7 and 9", "Items 1–40".
func itemList(ns []int) string {
	if len(ns) == 1 {
		return fmt.Sprintf("Item %d", ns[0])
	}
	var parts []string
	for i := 0; i < len(ns); {
		j := i
		for j+1 < len(ns) && ns[j+1] == ns[j]+1 {
			j++
		}
		if j-i >= 2 {
			parts = append(parts, fmt.Sprintf("%d–%d", ns[i], ns[j]))
		} else {
			for k := i; k <= j; k++ {
				parts = append(parts, fmt.Sprint(ns[k]))
			}
		}
		i = j + 1
	}
	if len(parts) == 1 {
		return "Items " + parts[0]
	}
	return "Items " + strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}
