package teamsapp_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/hostilehttp"
)

// TestTokenBeforeBody: the Bot Framework token (a header) is checked
// before any of the body is read (SPEC §3 guarantee 14): a request that
// declares 1 GiB and sends 16 KiB is answered 401 at once.
func TestTokenBeforeBody(t *testing.T) {
	e := newEnv(t, opts{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = e.app.Listener(ln) }()
	t.Cleanup(func() { _ = e.app.Shutdown() })
	some := func(w io.Writer) { _, _ = w.Write([]byte(strings.Repeat("a", 16<<10))) }
	for _, auth := range []string{"", "Authorization: Bearer not.a.token\r\n"} {
		res, err := hostilehttp.Send(ln.Addr().String(), "POST", "/teams/messages", auth,
			hostilehttp.Shape{Head: []byte("Content-Type: application/json\r\nContent-Length: 1073741824\r\n"), Body: some})
		if err != nil || res.Status != http.StatusUnauthorized || res.Took > 3*time.Second {
			t.Errorf("%q: %d after %s (%v), want 401 at once", auth, res.Status, res.Took, err)
		}
	}
}
