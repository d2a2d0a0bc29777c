package slackapp_test

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testing/hostilehttp"
)

// TestHeadersBeforeBody: the signature's headers and timestamp are checked
// before any of the body is read (SPEC §3 guarantee 14), and then at most
// MaxBody (1 MiB) of it: a request that declares 1 GiB and sends 16 KiB is
// answered at once.
func TestHeadersBeforeBody(t *testing.T) {
	e := newEnv(t, opts{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = e.app.Listener(ln) }()
	t.Cleanup(func() { _ = e.app.Shutdown() })
	some := func(w io.Writer) { _, _ = w.Write([]byte(strings.Repeat("a", 16<<10))) }
	now := time.Now()
	for _, c := range []struct {
		name, head string
		want       int
	}{
		{"no signature", "Content-Length: 1073741824\r\n", http.StatusUnauthorized},
		{"stale timestamp", "X-Slack-Signature: v0=" + strings.Repeat("0", 64) + "\r\nX-Slack-Request-Timestamp: " + strconv.FormatInt(now.Add(-time.Hour).Unix(), 10) +
			"\r\nContent-Length: 1073741824\r\n", http.StatusUnauthorized},
		{"current timestamp, 1 GiB", "X-Slack-Signature: v0=" + strings.Repeat("0", 64) + "\r\nX-Slack-Request-Timestamp: " + strconv.FormatInt(now.Unix(), 10) +
			"\r\nContent-Length: 1073741824\r\n", http.StatusRequestEntityTooLarge},
	} {
		res, err := hostilehttp.Send(ln.Addr().String(), "POST", "/slack/interactions", "",
			hostilehttp.Shape{Head: []byte("Content-Type: application/x-www-form-urlencoded\r\n" + c.head), Body: some})
		if err != nil || res.Status != c.want || res.Took > 3*time.Second {
			t.Errorf("%s: %d after %s (%v), want %d at once", c.name, res.Status, res.Took, err, c.want)
		}
	}
	// Past 1 MiB, a chunked body is cut off: 413.
	res, err := hostilehttp.Send(ln.Addr().String(), "POST", "/slack/interactions",
		"X-Slack-Signature: v0="+strings.Repeat("0", 64)+"\r\nX-Slack-Request-Timestamp: "+strconv.FormatInt(now.Unix(), 10)+"\r\n", chunked(t))
	if err != nil || res.Status != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked 16 MiB: %d (%v), want 413", res.Status, err)
	}
}

func chunked(t *testing.T) hostilehttp.Shape {
	for _, sh := range hostilehttp.Shapes() {
		if sh.Name == "chunked" {
			return sh
		}
	}
	t.Fatal("no chunked shape")
	return hostilehttp.Shape{}
}
