package approval

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/countersign/countersign/approval/jsonx"
)

// echoed is how much of the input a view repeats: the input and every
// preview string and value built from it.
func echoed(t *testing.T, v View) int {
	t.Helper()
	f, _ := jsonx.Marshal(v.Preview.Fields)
	d, _ := jsonx.Marshal(v.Preview.Diff)
	return len(v.Input) + len(f) + len(d) + len(v.Preview.Title) + len(v.Preview.Summary)
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := jsonx.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// compactInputs are generated inputs of every shape: one large value,
// many medium ones, thousands of tiny ones, deep nesting, a huge key,
// escapes and multi-byte text.
func compactInputs(t *testing.T) map[string]json.RawMessage {
	r := rand.New(rand.NewPCG(1, 2))
	words := func(n int) string {
		var b strings.Builder
		for b.Len() < n {
			b.WriteString([]string{"alpha ", "βeta ", "<tag> ", "\"q\" ", "\x01\n", "日本語 ", "🙂 "}[r.IntN(7)])
		}
		return b.String()
	}
	out := map[string]json.RawMessage{}
	for _, n := range []int{10, 1 << 10, 3 << 10, 100 << 10, 400 << 10} {
		out[fmt.Sprintf("text %d", n)] = mustJSON(t, map[string]any{"to": []string{"a@b.example"}, "subject": "s", "text": words(n), "html": words(n / 2)})
	}
	for _, count := range []int{10, 100, 5000} {
		m := map[string]any{}
		for i := range count {
			m[fmt.Sprintf("field_%04d", i)] = words(r.IntN(400))
		}
		out[fmt.Sprintf("%d medium fields", count)] = mustJSON(t, m)
		tiny := make([]any, count)
		for i := range tiny {
			tiny[i] = i
		}
		out[fmt.Sprintf("%d tiny values", count)] = mustJSON(t, map[string]any{"items": tiny})
	}
	deep := any(words(5000))
	for i := range 60 {
		deep = map[string]any{fmt.Sprintf("level%d", i): deep, "pad": words(100)}
	}
	out["deep nesting"] = mustJSON(t, deep)
	out["huge key"] = mustJSON(t, map[string]any{strings.Repeat("k", 10000): 1})
	items := make([]any, 100)
	for i := range items {
		items[i] = map[string]any{"method": "PATCH", "path": fmt.Sprintf("/events/%d", i), "body": map[string]any{"title": words(200), "n": i}}
	}
	out["bulk"] = mustJSON(t, map[string]any{"target": "calendar", "items": items})
	return out
}

func TestCompactBound(t *testing.T) {
	for name, in := range compactInputs(t) {
		t.Run(name, func(t *testing.T) {
			fields := []Field{}
			var diff []Change
			for i := range 300 {
				fields = append(fields, Field{Name: fmt.Sprintf("f%d", i), Label: "Field", Value: string(in[:min(len(in), 2000)])})
				if i < 20 {
					diff = append(diff, Change{Field: "x", Before: in, After: in})
				}
			}
			v := View{Input: in, Preview: Preview{Title: string(in), Summary: string(in), Fields: fields, Diff: diff}}
			c := Compact(v)
			if n := echoed(t, c); n > CompactBudget {
				t.Fatalf("the compact view repeats %d bytes of the input; at most %d", n, CompactBudget)
			}
			if !json.Valid(c.Input) {
				t.Fatalf("compact input is not JSON: %.200s", c.Input)
			}
			if len(in) <= inputBudget && !bytes.Equal(c.Input, in) {
				t.Errorf("a small input was changed: %s", c.Input)
			}
			if again := Compact(c); !bytes.Equal(again.Input, c.Input) || echoed(t, again) != echoed(t, c) {
				t.Errorf("compacting a compact view changed it")
			}
			list := CompactList([]View{v, v, v})
			total := 0
			for _, l := range list {
				total += echoed(t, l)
			}
			if total > CompactBudget {
				t.Errorf("a list of three repeats %d bytes", total)
			}
		})
	}
}

// An attachment's stand-in gives the size and digest of its decoded bytes,
// as the stored input's own size and sha256 do; a small field stays.
func TestCompactAttachment(t *testing.T) {
	pdf := bytes.Repeat([]byte("%PDF-1.7 binary\x00\xff"), 20000)
	in := mustJSON(t, map[string]any{"subject": "Invoice", "attachments": []map[string]any{
		{"name": "invoice.pdf", "content_base64": base64.StdEncoding.EncodeToString(pdf)}}})
	var got struct {
		Subject     string `json:"subject"`
		Attachments []struct {
			Name    string  `json:"name"`
			Content Omitted `json:"content_base64"`
		} `json:"attachments"`
	}
	if err := json.Unmarshal(Compact(View{Input: in}).Input, &got); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(pdf)
	c := got.Attachments[0].Content
	if got.Subject != "Invoice" || got.Attachments[0].Name != "invoice.pdf" || !c.Omitted || c.Bytes != len(pdf) ||
		c.SHA256 != hex.EncodeToString(sum[:]) || len([]rune(c.Head)) != headRunes {
		t.Errorf("compact attachment: %+v", got)
	}
}
