// Package previewfuzz holds the fuzz target of the preview renderer
// across every channel (fuzz_test.go): whatever an agent sends, no
// channel's output carries a hidden or direction-changing character, and
// no agent text starts a line of its own outside the fence. It has no
// code of its own.
package previewfuzz
