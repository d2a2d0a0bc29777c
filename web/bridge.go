package web

import (
	"context"
	"io"
	"net/http"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// bridge serves a net/http handler inside fiber, as fiber's adaptor does
// (the response is buffered), but with the request's context: its trace
// and access-log record reach the handler. The store deadline of the
// deadline middleware does not (the handler bounds its own calls, and a
// long-poll must outlive it); the context never ends on its own, so the
// handler must not wait on it alone.
func bridge(h http.Handler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		var r http.Request
		if err := fasthttpadaptor.ConvertRequest(c.Context(), &r, true); err != nil {
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
