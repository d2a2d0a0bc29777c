package fakeslack

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Slack refuses blocks past its documented limits with invalid_blocks
// (https://docs.slack.dev/reference/block-kit/blocks): 50 blocks in a
// message, 100 in a modal; section text 3000 characters, section fields
// 10 of 2000; header text 150; context elements 10; actions elements 25.
// The fake refuses them too, so a test cannot pass on blocks real Slack
// would not show. Modal titles and buttons are 24 characters at most.

func checkBlocks(raw json.RawMessage, max int) error {
	var blocks []map[string]any
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return err
	}
	if len(blocks) > max {
		return fmt.Errorf("%d blocks, at most %d", len(blocks), max)
	}
	for i, b := range blocks {
		if err := checkBlock(b); err != nil {
			return fmt.Errorf("block %d (%v): %w", i, b["type"], err)
		}
	}
	return nil
}

func textOf(v any) (string, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return "", false
	}
	s, ok := m["text"].(string)
	return s, ok
}

func checkBlock(b map[string]any) error {
	runes := func(v any, max int, what string) error {
		if s, ok := textOf(v); ok && utf8.RuneCountInString(s) > max {
			return fmt.Errorf("%s of %d characters, at most %d", what, utf8.RuneCountInString(s), max)
		}
		return nil
	}
	switch b["type"] {
	case "section":
		if err := runes(b["text"], 3000, "text"); err != nil {
			return err
		}
		if f, ok := b["fields"].([]any); ok {
			if len(f) > 10 {
				return fmt.Errorf("%d fields, at most 10", len(f))
			}
			for _, x := range f {
				if err := runes(x, 2000, "field"); err != nil {
					return err
				}
			}
		}
	case "header":
		return runes(b["text"], 150, "header")
	case "context":
		if e, ok := b["elements"].([]any); ok && len(e) > 10 {
			return fmt.Errorf("%d elements, at most 10", len(e))
		}
	case "actions":
		if e, ok := b["elements"].([]any); ok && len(e) > 25 {
			return fmt.Errorf("%d elements, at most 25", len(e))
		}
	}
	return nil
}

func checkView(view map[string]any) error {
	for _, k := range []string{"title", "submit", "close"} {
		if s, ok := textOf(view[k]); ok && utf8.RuneCountInString(s) > 24 {
			return fmt.Errorf("%s of %d characters, at most 24", k, utf8.RuneCountInString(s))
		}
	}
	if pm, _ := view["private_metadata"].(string); len(pm) > 3000 {
		return fmt.Errorf("private_metadata of %d characters, at most 3000", len(pm))
	}
	raw, _ := json.Marshal(view["blocks"])
	return checkBlocks(raw, 100)
}
