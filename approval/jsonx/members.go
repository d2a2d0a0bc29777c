package jsonx

import (
	"errors"
	"hash/maphash"
	"strconv"
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
	seen := make(map[uint64]struct{}, len(b)/32)
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
