// Package hostilehttp sends the request shapes that try to make refusing
// expensive (SPEC §3 guarantee 14) over raw TCP, so that nothing on the
// client side fixes them up: compression bombs, huge and endless bodies,
// slow bodies, huge headers, multipart forms, Expect: 100-continue. Tests
// send them to a real server and measure what the server spent.
package hostilehttp

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/andybalholm/brotli"
)

// Shape is one kind of hostile request: its own header lines and a body
// writer, which stops when the server stops reading (its error is
// ignored).
type Shape struct {
	Name string
	Head []byte // header lines, each ending in \r\n
	Body func(w io.Writer)
}

// BombSize is what each compression bomb expands to.
const BombSize = 32 << 20

// StreamSize is how much of an endless body is sent at most.
const StreamSize = 16 << 20

var (
	zeros    = make([]byte, 64<<10)
	bombOnce sync.Once
	bombs    map[string][]byte
)

func makeBombs() {
	bombs = map[string][]byte{}
	compress := func(w io.WriteCloser, src io.Reader) {
		_, _ = io.Copy(w, src)
		_ = w.Close()
	}
	var inner, gz2, df, br bytes.Buffer
	gw, _ := gzip.NewWriterLevel(&inner, gzip.BestCompression)
	compress(gw, io.LimitReader(zeroReader{}, BombSize))
	gw2, _ := gzip.NewWriterLevel(&gz2, gzip.BestCompression)
	compress(gw2, bytes.NewReader(inner.Bytes()))
	bombs["gzip, gzip"] = gz2.Bytes()
	zw, _ := zlib.NewWriterLevel(&df, zlib.BestCompression)
	compress(zw, io.LimitReader(zeroReader{}, BombSize))
	bombs["deflate"] = df.Bytes()
	compress(brotli.NewWriterLevel(&br, brotli.BestSpeed), io.LimitReader(zeroReader{}, BombSize))
	bombs["br"] = br.Bytes()
}

var (
	crlf      = []byte("\r\n")
	chunkHead = fmt.Appendf(nil, "%x\r\n", len(zeros))
)

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// Shapes returns every hostile shape (the bombs are built once, ~1 s).
func Shapes() []Shape {
	bombOnce.Do(makeBombs)
	var out []Shape
	for _, enc := range []string{"gzip, gzip", "deflate", "br"} {
		b := bombs[enc]
		out = append(out, Shape{Name: "bomb " + enc,
			Head: fmt.Appendf(nil, "Content-Type: application/json\r\nContent-Encoding: %s\r\nContent-Length: %d\r\n", enc, len(b)),
			Body: func(w io.Writer) { _, _ = w.Write(b) }})
	}
	stream := func(w io.Writer) {
		for n := 0; n < StreamSize; n += len(zeros) {
			if _, err := w.Write(zeros); err != nil {
				return
			}
		}
	}
	out = append(out,
		Shape{Name: "huge body", Head: []byte("Content-Type: application/json\r\nContent-Length: 1073741824\r\n"), Body: stream},
		Shape{Name: "chunked", Head: []byte("Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"), Body: func(w io.Writer) {
			for n := 0; n < StreamSize; n += len(zeros) {
				for _, b := range [][]byte{chunkHead, zeros, crlf} {
					if _, err := w.Write(b); err != nil {
						return
					}
				}
			}
			_, _ = io.WriteString(w, "0\r\n\r\n")
		}},
		Shape{Name: "slow body", Head: []byte("Content-Type: application/json\r\nContent-Length: 1048576\r\n"), Body: func(w io.Writer) {
			for i := 0; i < 50; i++ {
				if _, err := w.Write(zeros[:1024]); err != nil {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}},
		Shape{Name: "huge headers", Head: []byte(strings.Repeat("X-Pad: "+strings.Repeat("a", 100)+"\r\n", 2000) + "Content-Length: 0\r\n"),
			Body: func(io.Writer) {}},
		Shape{Name: "multipart", Head: []byte("Content-Type: multipart/form-data; boundary=XyZ\r\nContent-Length: 1073741824\r\n"),
			Body: func(w io.Writer) {
				if _, err := io.WriteString(w, "--XyZ\r\nContent-Disposition: form-data; name=\"f\"; filename=\"f\"\r\n\r\n"); err == nil {
					stream(w)
				}
			}},
		Shape{Name: "expect 100-continue", Head: []byte("Content-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: 1073741824\r\n"),
			Body: stream},
	)
	return out
}

// Result is what the server answered.
type Result struct {
	Status int // 0: no answer (the connection was closed)
	Took   time.Duration
}

// Send sends one request of shape to addr (host:port) and reads the
// answer (the first 64 KiB of its body); it gives up after 15 s.
func Send(addr, method, path, headers string, sh Shape) (Result, error) {
	start := time.Now()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return Result{}, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(15 * time.Second))
	// Written as they are: the client allocates little, so that what a
	// test measures of its process is the server's.
	line := []byte(method + " " + path + " HTTP/1.1\r\nHost: " + addr + "\r\n" + headers)
	for _, b := range [][]byte{line, sh.Head, crlf} {
		if _, err := conn.Write(b); err != nil {
			return Result{Took: time.Since(start)}, nil // refused while the headers were sent
		}
	}
	go sh.Body(conn)
	br := bufio.NewReaderSize(conn, 4096)
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return Result{Took: time.Since(start)}, nil
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusContinue {
			continue
		}
		return Result{Status: resp.StatusCode, Took: time.Since(start)}, nil
	}
}

// HeapPeak samples the heap in use every 2 ms until the function it
// returns is called, which stops the sampling and returns the highest
// value seen: the memory tests' measure of what hostile requests cost at
// once.
func HeapPeak() (stop func() uint64) {
	var peak atomic.Uint64
	done, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-sampled
		return peak.Load()
	}
}
