package upstream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stopGrace is how long a stdio upstream gets between SIGTERM and SIGKILL.
const stopGrace = 5 * time.Second

// link is one connection attempt's transport: an mcp.Transport, and for
// stdio the process behind it.
type link struct {
	mcp.Transport
	watch *watchConn // stdio: set by Connect
	proc  *process   // stdio
	http  *http.Transport
}

func (l *link) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := l.Transport.Connect(ctx)
	if err != nil || l.proc == nil {
		return c, err
	}
	l.watch = &watchConn{Connection: c, calls: map[jsonrpc.ID]*callMark{}}
	return l.watch, nil
}

func (l *link) stop() {
	if l.proc != nil {
		l.proc.stop()
	}
	if l.http != nil {
		l.http.CloseIdleConnections()
	}
}

// exited says how the process ended, "" if it did not (or for HTTP).
func (l *link) exited() string {
	if l.proc == nil {
		return ""
	}
	select {
	case <-l.proc.done:
		return "process exited: " + l.proc.state
	default:
		return ""
	}
}

func (u *upstream) transport() (*link, error) {
	if u.spec.URL != "" {
		return u.httpTransport()
	}
	return u.stdioTransport()
}

// process is a running stdio upstream in its own process group.
type process struct {
	cmd     *exec.Cmd
	done    chan struct{} // closed when Wait returned
	state   string        // how it ended, once done
	stderr  *os.File
	logDone chan struct{}
	once    sync.Once
}

func (u *upstream) stdioTransport() (*link, error) {
	if len(u.spec.Command) == 0 {
		return nil, errors.New("no command")
	}
	cmd := exec.Command(u.spec.Command[0], u.spec.Command[1:]...)
	cmd.Env = os.Environ()
	for _, k := range slices.Sorted(maps.Keys(u.spec.Env)) {
		cmd.Env = append(cmd.Env, k+"="+u.spec.Env[k])
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Our own pipes (not StdoutPipe): Wait must not close what the MCP
	// connection and the stderr logger still read.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		closeAll(inR, inW, outR, outW, errR, errW)
		// The error names the program, never its environment.
		return nil, fmt.Errorf("start: %w", err)
	}
	closeAll(inR, outW, errW)
	p := &process{cmd: cmd, done: make(chan struct{}), stderr: errR, logDone: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		p.state = cmd.ProcessState.String()
		if err != nil && cmd.ProcessState == nil {
			p.state = err.Error()
		}
		close(p.done)
	}()
	go func() {
		defer close(p.logDone)
		logStderr(errR, u.log)
	}()
	bound := u.spec.MessageBound()
	return &link{
		Transport: &mcp.IOTransport{
			Reader: &lineBound{r: outR, max: bound},
			Writer: inW,
			// lineBound refuses a long line before the decoder buffers it.
			MaxLineLength: -1,
		},
		proc: p,
	}, nil
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

// stop ends the process group: SIGTERM, SIGKILL after stopGrace, and
// waits for the process and its stderr.
func (p *process) stop() {
	p.once.Do(func() {
		pgid := -p.cmd.Process.Pid
		_ = syscall.Kill(pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(stopGrace):
			_ = syscall.Kill(pgid, syscall.SIGKILL)
			<-p.done
		}
		// Whatever else is left of its group.
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		select {
		case <-p.logDone:
		case <-time.After(time.Second):
			// A descendant outside the group still holds stderr open.
		}
		_ = p.stderr.Close()
		<-p.logDone
	})
}

// errLineTooLong fails a stdio connection whose upstream sent a line over
// the message bound.
var errLineTooLong = errors.New("the upstream sent a message larger than allowed")

// lineBound passes stdout through while no line is longer than max bytes.
type lineBound struct {
	r   io.ReadCloser
	max int64
	cur int64
	err error
}

func (l *lineBound) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.r.Read(p)
	b := p[:n]
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			l.cur += int64(len(b))
			break
		}
		if l.cur+int64(i) > l.max {
			l.cur += int64(i)
			break
		}
		l.cur, b = 0, b[i+1:]
	}
	if l.cur > l.max {
		l.err = fmt.Errorf("%w (over %d bytes)", errLineTooLong, l.max)
		return 0, l.err
	}
	return n, err
}

func (l *lineBound) Close() error { return l.r.Close() }

// watchConn sees each tools/call written (callMark.sent) and keeps its raw
// response, so a result is hashed as received.
type watchConn struct {
	mcp.Connection
	mu    sync.Mutex
	calls map[jsonrpc.ID]*callMark
}

func (w *watchConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	m := markOf(ctx)
	req, ok := msg.(*jsonrpc.Request)
	if m == nil || !ok || !req.IsCall() || req.Method != "tools/call" {
		return w.Connection.Write(ctx, msg)
	}
	// Registered first: the answer may come before Write returns.
	w.mu.Lock()
	w.calls[req.ID] = m
	w.mu.Unlock()
	err := w.Connection.Write(ctx, msg)
	if !notWritten(err) {
		m.sent.Store(true)
	}
	return err
}

// notWritten says a write's error proves no byte reached the upstream: its
// end of the pipe was gone (EPIPE), ours was closed, or the context ended
// before the write.
func notWritten(err error) bool {
	return err != nil && (errors.Is(err, syscall.EPIPE) || errors.Is(err, os.ErrClosed) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

func (w *watchConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := w.Connection.Read(ctx)
	if resp, ok := msg.(*jsonrpc.Response); ok && err == nil {
		w.mu.Lock()
		m := w.calls[resp.ID]
		delete(w.calls, resp.ID)
		w.mu.Unlock()
		if m != nil {
			m.mu.Lock()
			if resp.Error != nil {
				m.rpcErr = resp.Error
			} else {
				m.raw = slices.Clone(resp.Result)
			}
			m.mu.Unlock()
		}
	}
	return msg, err
}

// Stderr of stdio upstreams: each line (cut at stderrLineMax bytes,
// invalid UTF-8 replaced) logged at Info, at most stderrPerSecond a second;
// the dropped lines are counted in a later line.
const (
	stderrLineMax   = 2 << 10
	stderrPerSecond = 20
)

func logStderr(r io.Reader, log *slog.Logger) {
	br := bufio.NewReaderSize(r, 4<<10)
	var (
		window  time.Time
		n       int
		dropped int
	)
	flush := func() {
		if dropped > 0 {
			log.Info("upstream stderr lines dropped (rate limit)", "dropped", dropped)
			dropped = 0
		}
	}
	for {
		line, err := readLine(br)
		if len(line) > 0 || err == nil {
			if now := time.Now(); now.Sub(window) >= time.Second {
				flush()
				window, n = now, 0
			}
			if n < stderrPerSecond {
				n++
				log.Info("upstream stderr", "line", strings.ToValidUTF8(string(line), "\uFFFD"))
			} else {
				dropped++
			}
		}
		if err != nil {
			flush()
			return
		}
	}
}

// readLine reads one line, keeping at most stderrLineMax bytes of it.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if room := stderrLineMax - len(line); room > 0 {
			line = append(line, frag[:min(len(frag), room)]...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		line = bytes.TrimRight(line, "\r\n")
		return line, err
	}
}

// httpTransport is the streamable HTTP client of a url upstream: its
// headers on every request, no cookies, no redirects, bounded bodies.
func (u *upstream) httpTransport() (*link, error) {
	end, err := url.Parse(u.spec.URL)
	if err != nil || (end.Scheme != "http" && end.Scheme != "https") || end.Host == "" {
		return nil, errors.New("invalid url")
	}
	bound := u.spec.MessageBound()
	base := http.DefaultTransport.(*http.Transport).Clone()
	client := &http.Client{
		Transport: &headerTransport{
			base:    base,
			headers: u.spec.Headers,
			host:    end.Host,
			bound:   bound,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &link{Transport: &mcp.StreamableClientTransport{
		Endpoint:     u.spec.URL,
		HTTPClient:   client,
		MaxEventSize: int(bound),
	}, http: base}, nil
}

type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
	host    string
	bound   int64
}

func (h *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if m := markOf(req.Context()); m != nil {
		// Sent once the request's headers were written: a refused dial
		// or a closed pool sent nothing.
		trace := &httptrace.ClientTrace{WroteHeaders: func() { m.sent.Store(true) }}
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	}
	if req.URL.Host == h.host && len(h.headers) > 0 {
		req = req.Clone(req.Context())
		for k, v := range h.headers {
			req.Header.Set(k, v)
		}
	}
	resp, err := h.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	// A server-sent event stream lives long; MaxEventSize bounds each event.
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body = &capBody{ReadCloser: resp.Body, left: h.bound}
	}
	return resp, nil
}

// capBody fails a response body longer than the message bound.
type capBody struct {
	io.ReadCloser
	left int64
}

func (c *capBody) Read(p []byte) (int, error) {
	if c.left < 0 {
		return 0, errLineTooLong
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.ReadCloser.Read(p)
	c.left -= int64(n)
	if c.left < 0 {
		return 0, errLineTooLong
	}
	return n, err
}
