package approval

import "slices"

// A bulk operation (SPEC §10) is one operation of several items. Its
// preview marks each item's fields and diff rows with the item's number
// (Field.Item, Change.Item); the message keeps them in one list, so a
// channel that lists fields and changes shows everything, and channels
// that lay items out group them with the methods below.

// ShownItem is one item of a bulk as humans see it: its heading (its
// first field, e.g. "Item 3": "PATCH /events/3 (moved)"), its other
// fields, and its diff rows.
type ShownItem struct {
	N      int
	Head   ShownField
	Fields []ShownField
	Diff   []ShownChange
}

// Items groups the message's item fields and diff rows by item, in item
// order; nil when the operation is not a bulk. Every item has a heading:
// the action gives each item a first field.
func (m Message) Items() []ShownItem {
	return groupItems(m.Fields, m.Diff)
}

// StaleItems groups the stale report's rows by item (nil for a single
// operation): what changed on each item since it was prepared.
func (m Message) StaleItems() []ShownItem {
	return groupItems(nil, m.Stale)
}

func groupItems(fields []ShownField, diff []ShownChange) []ShownItem {
	var out []ShownItem
	at := map[int]int{}
	item := func(n int) *ShownItem {
		i, ok := at[n]
		if !ok {
			i = len(out)
			at[n] = i
			out = append(out, ShownItem{N: n})
		}
		return &out[i]
	}
	for _, f := range fields {
		if f.Item == 0 {
			continue
		}
		it := item(f.Item)
		if it.Head.Name == "" && len(it.Fields) == 0 {
			it.Head = f
			continue
		}
		it.Fields = append(it.Fields, f)
	}
	for _, c := range diff {
		if c.Item != 0 {
			it := item(c.Item)
			it.Diff = append(it.Diff, c)
		}
	}
	// In item order, whatever order the action gave them in.
	slices.SortStableFunc(out, func(a, b ShownItem) int { return a.N - b.N })
	return out
}

// OwnFields are the fields of the operation itself, not of one item.
func (m Message) OwnFields() []ShownField {
	var out []ShownField
	for _, f := range m.Fields {
		if f.Item == 0 {
			out = append(out, f)
		}
	}
	return out
}

// MainFields are the operation's own fields that say what it does, in
// the action's order; TechnicalFields the protocol detail behind them
// (Field.Technical), which a page shows last. Together they are
// OwnFields.
func (m Message) MainFields() []ShownField { return m.ownFields(false) }

// TechnicalFields: see MainFields.
func (m Message) TechnicalFields() []ShownField { return m.ownFields(true) }

func (m Message) ownFields(technical bool) []ShownField {
	var out []ShownField
	for _, f := range m.OwnFields() {
		if f.Technical == technical {
			out = append(out, f)
		}
	}
	return out
}

// OwnDiff are the diff rows of a single operation (none for a bulk).
func (m Message) OwnDiff() []ShownChange {
	var out []ShownChange
	for _, c := range m.Diff {
		if c.Item == 0 {
			out = append(out, c)
		}
	}
	return out
}
