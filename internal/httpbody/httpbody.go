// Package httpbody reads request bodies on countersign's fiber server, which
// streams them (fiber's StreamRequestBody): nothing of a body past the first
// few KiB is read from the connection until a handler asks for it, so an
// endpoint can authenticate from the headers first, and then read at most
// its own limit (SPEC §3 guarantee 14). No body is ever decompressed: web
// refuses any Content-Encoding but identity before anything else.
//
// Every handler reads the body through Read, never through fiber's Body,
// BodyRaw or fasthttp's PostArgs on a body Read has not loaded: on a
// streamed body those read the whole of it, however large.
package httpbody

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
)

// TooLargeError is a body over the limit a handler gave Read.
type TooLargeError struct{ Limit int }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("request body is larger than %d bytes", e.Limit)
}

// ErrUnreadable is a body that ended early or whose chunks were malformed.
var ErrUnreadable = errors.New("httpbody: the request body could not be read")

// ErrEncoding is a request with a Content-Encoding other than identity.
var ErrEncoding = errors.New("httpbody: request bodies are never decompressed: send them without Content-Encoding")

// loadedLocal marks a request whose body Read has loaded.
const loadedLocal = "countersign.httpbody.loaded"

// Read returns the request's body, reading at most limit bytes of it: a
// declared Content-Length over limit is refused before any byte is read,
// and a chunked body is cut off at limit+1 bytes. After Read, fiber's Body
// and PostArgs see the bytes read. Reading twice returns the same bytes.
// Returns *TooLargeError or ErrUnreadable.
func Read(c *fiber.Ctx, limit int) ([]byte, error) {
	req := c.Request()
	if c.Locals(loadedLocal) != nil {
		if b := req.Body(); len(b) <= limit {
			return b, nil
		}
		return nil, &TooLargeError{Limit: limit}
	}
	n := req.Header.ContentLength() // -1: chunked; 0: none
	if n > limit {
		return nil, &TooLargeError{Limit: limit}
	}
	stream := c.Context().RequestBodyStream()
	if stream == nil { // not streamed: fasthttp read it already, within its own limit
		b := req.Body()
		if len(b) > limit {
			return nil, &TooLargeError{Limit: limit}
		}
		c.Locals(loadedLocal, true)
		return b, nil
	}
	size := 512
	if n > 0 {
		size = n + 1 // the +1 sees EOF without growing
	}
	buf := make([]byte, 0, min(size, limit+1))
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		m, err := stream.Read(buf[len(buf):min(cap(buf), limit+1)])
		buf = buf[:len(buf)+m]
		if len(buf) > limit {
			return nil, &TooLargeError{Limit: limit}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			c.Context().SetConnectionClose()
			return nil, fmt.Errorf("%w: %w", ErrUnreadable, err)
		}
	}
	if n > 0 && len(buf) != n {
		c.Context().SetConnectionClose()
		return nil, ErrUnreadable
	}
	req.SetBodyRaw(buf) // ends the stream; Body and PostArgs read buf
	c.Locals(loadedLocal, true)
	return buf, nil
}

// drainWait is how long Finish waits for the rest of a body it discards.
const drainWait = time.Second

var scratchPool = sync.Pool{New: func() any { return new([4 << 10]byte) }}

// Finish ends a request whose body no handler loaded (refused, or not
// needed): up to drain bytes of it are read and discarded through a small
// fixed buffer, so that the connection can serve its next request; a
// longer body, a slower one or a broken one closes the connection instead
// (its unread bytes would otherwise be parsed as the next request).
func Finish(c *fiber.Ctx, drain int) {
	if c.Locals(loadedLocal) != nil {
		return
	}
	stream := c.Context().RequestBodyStream()
	n := c.Request().Header.ContentLength()
	if stream == nil || n == 0 {
		return
	}
	if n > drain {
		c.Context().SetConnectionClose()
		return
	}
	if conn := c.Context().Conn(); conn != nil {
		_ = conn.SetReadDeadline(time.Now().Add(drainWait)) // fasthttp sets its own again for the next request
	}
	scratch := scratchPool.Get().(*[4 << 10]byte)
	defer scratchPool.Put(scratch)
	got, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{io.LimitReader(stream, int64(drain)+1)}, scratch[:])
	if err != nil || got > int64(drain) || (n > 0 && got != int64(n)) {
		c.Context().SetConnectionClose()
	}
}

// CheckEncoding returns an error for a request whose Content-Encoding is
// anything but absent or identity: countersign never decompresses a body,
// so any other coding is refused (415) before anything else.
func CheckEncoding(c *fiber.Ctx) error {
	bad := false
	c.Request().Header.VisitAll(func(k, v []byte) {
		if bad || !strings.EqualFold(string(k), fiber.HeaderContentEncoding) {
			return
		}
		for _, coding := range strings.Split(string(v), ",") {
			if !strings.EqualFold(strings.TrimSpace(coding), "identity") {
				bad = true
				return
			}
		}
	})
	if bad {
		return ErrEncoding
	}
	return nil
}
