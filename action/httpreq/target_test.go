package httpreq_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fakeTarget is a real HTTP server playing a JSON API: resources by path,
// a version per resource served as a strong ETag (when etags is on),
// If-Match honoured with 412, merge-patch PATCH, PUT, DELETE and POST. Its
// hooks can change a resource at any moment, e.g. right after answering a
// GET (between countersign's re-read and its write).
type fakeTarget struct {
	srv   *httptest.Server
	etags bool

	mu       sync.Mutex
	docs     map[string]map[string]any
	versions map[string]int
	seen     []seenRequest
	// afterGet, when set, runs once after the next GET is answered (its
	// response already computed from the old state).
	afterGet func(f *fakeTarget, path string)
	// override, when set, answers a request instead of the API (redirects,
	// errors); it returns false to let the API answer.
	override func(w http.ResponseWriter, r *http.Request) bool
	// echo makes every answer carry the request's Authorization header, as
	// a careless debugging endpoint would.
	echo bool
}

type seenRequest struct {
	Method, Path, Query, IfMatch, IdempotencyKey, Authorization, ContentType string
	Body                                                                     string
}

func newFakeTarget(t testing.TB, etags bool) *fakeTarget {
	f := &fakeTarget{etags: etags, docs: map[string]map[string]any{}, versions: map[string]int{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// put sets a resource (a test's "someone else changed it").
func (f *fakeTarget) put(path string, doc map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.docs[path] = clone(doc)
	f.versions[path]++
}

// change sets one top-level field of a resource.
func (f *fakeTarget) change(path, field string, v any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.docs[path][field] = v
	f.versions[path]++
}

func (f *fakeTarget) doc(path string) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return clone(f.docs[path])
}

// writes are the requests other than GET that reached the target.
func (f *fakeTarget) writes() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []seenRequest
	for _, s := range f.seen {
		if s.Method != http.MethodGet {
			out = append(out, s)
		}
	}
	return out
}

func (f *fakeTarget) requests() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.seen...)
}

func (f *fakeTarget) etag(path string) string { return fmt.Sprintf(`"v%d"`, f.versions[path]) }

func (f *fakeTarget) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.seen = append(f.seen, seenRequest{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery,
		IfMatch: r.Header.Get("If-Match"), IdempotencyKey: r.Header.Get("Idempotency-Key"),
		Authorization: r.Header.Get("Authorization"), ContentType: r.Header.Get("Content-Type"), Body: string(body)})
	override, echo := f.override, f.echo
	f.mu.Unlock()
	if override != nil && override(w, r) {
		return
	}
	path := r.URL.Path
	f.mu.Lock()
	doc, exists := f.docs[path]
	reply := func(status int, v any) {
		if echo && v != nil {
			if m, ok := v.(map[string]any); ok {
				m = clone(m)
				m["debug_echo"] = "seen " + r.Header.Get("Authorization")
				v = m
			}
		}
		if f.etags && exists {
			w.Header().Set("ETag", f.etag(path))
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if v != nil {
			_ = json.NewEncoder(w).Encode(v)
		}
	}
	if r.Method != http.MethodGet && r.Method != http.MethodPost && exists && f.etags {
		if im := r.Header.Get("If-Match"); im != "" && im != f.etag(path) {
			reply(http.StatusPreconditionFailed, map[string]any{"error": "precondition failed"})
			f.mu.Unlock()
			return
		}
	}
	switch r.Method {
	case http.MethodGet:
		if !exists {
			reply(http.StatusNotFound, map[string]any{"error": "not found"})
			f.mu.Unlock()
			return
		}
		reply(http.StatusOK, doc)
		hook := f.afterGet
		f.afterGet = nil
		f.mu.Unlock()
		if hook != nil {
			hook(f, path)
		}
		return
	case http.MethodPatch, http.MethodPut:
		if !exists {
			reply(http.StatusNotFound, map[string]any{"error": "not found"})
			break
		}
		var in map[string]any
		if err := json.Unmarshal(body, &in); err != nil {
			reply(http.StatusBadRequest, map[string]any{"error": "bad json"})
			break
		}
		if r.Method == http.MethodPatch {
			f.docs[path] = mergePatch(doc, in)
		} else {
			f.docs[path] = in
		}
		f.versions[path]++
		reply(http.StatusOK, f.docs[path])
	case http.MethodDelete:
		if !exists {
			reply(http.StatusNotFound, nil)
			break
		}
		delete(f.docs, path)
		w.WriteHeader(http.StatusNoContent)
	case http.MethodPost:
		reply(http.StatusCreated, map[string]any{"created": true})
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
	f.mu.Unlock()
}

// mergePatch applies an RFC 7396 JSON merge patch.
func mergePatch(doc, patch map[string]any) map[string]any {
	out := clone(doc)
	for k, v := range patch {
		if v == nil {
			delete(out, k)
			continue
		}
		if pm, ok := v.(map[string]any); ok {
			cur, _ := out[k].(map[string]any)
			out[k] = mergePatch(cur, pm)
			continue
		}
		out[k] = v
	}
	return out
}

func clone(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	b, _ := json.Marshal(m)
	var out map[string]any
	_ = json.NewDecoder(bytes.NewReader(b)).Decode(&out)
	return out
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func contains(haystack, needle string) bool { return strings.Contains(haystack, needle) }
