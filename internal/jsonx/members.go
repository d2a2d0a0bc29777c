package jsonx

import (
	"bytes"
	"encoding/json"
	"errors"
	"hash/maphash"
	"io"
	"strconv"

	"github.com/countersign/countersign/internal/jcs"
)

// NameConflict is two values of one document with the same dotted name
// (a member "a.b" beside a member "b" of "a", or one name given twice):
// whatever reads the name reads one of them, and the other may be what a
// target uses.
type NameConflict struct {
	Name          string // the dotted name both have
	First, Second string // their JSON Pointers, in document order
}

func (e *NameConflict) Error() string {
	return strconv.Quote(e.Name) + " names two values (" + e.First + " and " + e.Second + ")"
}

// NumberError is a number that does not keep its value through RFC 8785
// (jcs.RoundTrip).
type NumberError struct {
	Pointer string
	Number  string // the number as written, cut to 40 bytes
	Err     error  // jcs.ErrNumberRange or jcs.ErrNumberPrecision
}

func (e *NumberError) Error() string {
	return "number " + e.Number + " at " + e.Pointer + ": " + e.Err.Error()
}

func (e *NumberError) Unwrap() error { return e.Err }

// CheckMembers reads the JSON document b once and returns the first value
// whose dotted name another value has too (*NameConflict; array elements
// are named by their index, so "a.0" is the first element of a list "a"),
// or whose number does not survive canonicalization (*NumberError). A
// malformed document is returned as the decoder's error. Run CheckDepth
// first: the work here is bounded by depth × size.
//
// Names are compared by a seeded 64-bit hash of the name, so memory is a
// few words per value, not the names themselves; a hash collision is
// confirmed against the real names before it is reported, so it can only
// cost a second pass, never a wrong answer.
func CheckMembers(b []byte) error {
	seed := maphash.MakeSeed()
	seen := map[uint64]struct{}{}
	var hit string
	var found bool
	err := walk(b, func(name []byte, ptr func() string) error {
		h := maphash.Bytes(seed, name)
		if _, dup := seen[h]; dup {
			hit, found = string(name), true
			return errStop
		}
		seen[h] = struct{}{}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return err
	}
	if !found {
		return nil
	}
	// Confirm: the pointers of the values named hit (two of them, unless
	// the hash collided, which is then no conflict).
	var ptrs []string
	err = walk(b, func(name []byte, ptr func() string) error {
		if string(name) == hit {
			if ptrs = append(ptrs, ptr()); len(ptrs) == 2 {
				return errStop
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return err
	}
	if len(ptrs) == 2 {
		return &NameConflict{Name: hit, First: ptrs[0], Second: ptrs[1]}
	}
	return checkMembersExact(b) // a 64-bit hash collision: check by name
}

// checkMembersExact is CheckMembers keeping the names themselves.
func checkMembersExact(b []byte) error {
	seen := map[string]string{}
	err := walk(b, func(name []byte, ptr func() string) error {
		if first, dup := seen[string(name)]; dup {
			return &NameConflict{Name: string(name), First: first, Second: ptr()}
		}
		seen[string(name)] = ptr()
		return nil
	})
	return err
}

var errStop = errors.New("stop")

// walk calls visit with the dotted name of every value below the root of
// b, and a function giving its JSON Pointer; it checks every number.
func walk(b []byte, visit func(name []byte, ptr func() string) error) error {
	type frame struct {
		obj      bool
		index    int
		nameLen  int  // length of the container's own dotted name
		tokenLen int  // number of tokens of its pointer
		key      bool // an object expects a key next
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var (
		stack  []frame
		name   []byte   // dotted name of the current value
		tokens []string // its pointer's tokens
	)
	ptr := func() string { return Pointer(tokens) }
	// enter names the next value of the container on top.
	enter := func(tok string) error {
		top := &stack[len(stack)-1]
		name, tokens = name[:top.nameLen], tokens[:top.tokenLen]
		if len(stack) > 1 || top.nameLen > 0 {
			name = append(name, '.')
		}
		name = append(name, tok...)
		tokens = append(tokens, tok)
		return visit(name, ptr)
	}
	for {
		t, err := dec.Token()
		if err == io.EOF {
			if len(stack) > 0 {
				return io.ErrUnexpectedEOF
			}
			return nil
		}
		if err != nil {
			return err
		}
		if len(stack) > 0 {
			top := &stack[len(stack)-1]
			switch {
			case top.obj && top.key:
				if d, ok := t.(json.Delim); ok && d == '}' {
					break
				}
				k, _ := t.(string)
				top.key = false
				if err := enter(k); err != nil {
					return err
				}
				continue
			case top.obj:
				top.key = true // this token is the member's value
			default:
				if d, ok := t.(json.Delim); !ok || d != ']' {
					if err := enter(strconv.Itoa(top.index)); err != nil {
						return err
					}
					top.index++
				}
			}
		}
		switch x := t.(type) {
		case json.Delim:
			switch x {
			case '{', '[':
				stack = append(stack, frame{obj: x == '{', key: x == '{', nameLen: len(name), tokenLen: len(tokens)})
			default:
				stack = stack[:len(stack)-1]
			}
		case json.Number:
			if _, err := jcs.RoundTrip(string(x)); err != nil {
				n := string(x)
				if len(n) > 40 {
					n = n[:40] + "…"
				}
				return &NumberError{Pointer: ptr(), Number: n, Err: err}
			}
		}
	}
}
