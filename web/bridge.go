package web

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"

	"github.com/countersign/countersign/internal/httpbody"
	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
)

// bridge serves a net/http handler inside fiber, as fiber's adaptor does
// (the response is buffered), but with the request's context: its trace
// and access-log record reach the handler. The store deadline of the
// deadline middleware does not (the handler bounds its own calls, and a
// long-poll must outlive it); the context never ends on its own, so the
// handler must not wait on it alone.
//
// The body is not read before the handler reads it (fasthttp's adaptor
// reads all of it first): the handler can authenticate from the headers
// and refuse at no cost, and reading stops past limit bytes with an
// *http.MaxBytesError.
func bridge(h http.Handler, limit int) fiber.Handler {
	return func(c *fiber.Ctx) error {
		r, err := convertRequest(c, limit)
		if err != nil {
			return fiber.NewError(fiber.StatusBadRequest, "cannot read the request")
		}
		w := &bufferedWriter{body: c.Response().BodyWriter()}
		h.ServeHTTP(w, r.WithContext(context.WithoutCancel(c.UserContext())))
		c.Status(w.StatusCode())
		typed := false
		for k, vv := range w.Header() {
			typed = typed || k == fasthttp.HeaderContentType
			for _, v := range vv {
				c.Response().Header.Add(k, v)
			}
		}
		if !typed {
			b := c.Response().Body()
			c.Response().Header.Set(fasthttp.HeaderContentType, http.DetectContentType(b[:min(len(b), 512)]))
		}
		return nil
	}
}

// convertRequest is fasthttpadaptor.ConvertRequest with a lazy body.
func convertRequest(c *fiber.Ctx, limit int) (*http.Request, error) {
	ctx := c.Context()
	uri := string(ctx.RequestURI())
	u, err := url.ParseRequestURI(uri)
	if err != nil {
		return nil, err
	}
	r := &http.Request{Method: string(ctx.Method()), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		RemoteAddr: ctx.RemoteAddr().String(), Host: string(ctx.Host()), TLS: ctx.TLSConnectionState(),
		URL: u, RequestURI: uri, Header: http.Header{}, ContentLength: int64(ctx.Request.Header.ContentLength())}
	if r.ContentLength < 0 {
		r.ContentLength = -1 // chunked
	}
	ctx.Request.Header.VisitAll(func(k, v []byte) {
		if sk := string(k); sk == fasthttp.HeaderTransferEncoding {
			r.TransferEncoding = append(r.TransferEncoding, string(v))
		} else {
			r.Header.Add(sk, string(v))
		}
	})
	r.Body = &lazyBody{c: c, limit: limit}
	if r.ContentLength == 0 {
		r.Body = http.NoBody
	}
	return r, nil
}

// lazyBody reads the request's body, at most limit bytes, when it is
// first read.
type lazyBody struct {
	c     *fiber.Ctx
	limit int
	r     *bytes.Reader
	err   error
}

func (b *lazyBody) Read(p []byte) (int, error) {
	if b.r == nil && b.err == nil {
		body, err := httpbody.Read(b.c, b.limit)
		var tl *httpbody.TooLargeError
		switch {
		case errors.As(err, &tl):
			b.err = &http.MaxBytesError{Limit: int64(tl.Limit)}
		case err != nil:
			b.err = err
		default:
			b.r = bytes.NewReader(body)
		}
	}
	if b.err != nil {
		return 0, b.err
	}
	return b.r.Read(p)
}

func (b *lazyBody) Close() error { return nil }

type bufferedWriter struct {
	code int
	h    http.Header
	body io.Writer
}

func (w *bufferedWriter) StatusCode() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

func (w *bufferedWriter) Header() http.Header {
	if w.h == nil {
		w.h = http.Header{}
	}
	return w.h
}

func (w *bufferedWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *bufferedWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.body.Write(p)
}

// Flush does nothing: the response is sent when the handler returns.
func (w *bufferedWriter) Flush() {}
