package smtptest

import (
	"bufio"
	"net"
	"strconv"
	"strings"
)

// go-smtp always answers DATA with 354 before it asks the session for the
// body, so a refusal of the DATA command itself cannot come from a
// Session. The gate sits between the socket and go-smtp, reads the
// client's commands line by line, and answers a DATA command itself when
// Fail.DataCommand is set. After STARTTLS it steps aside and passes the
// encrypted stream through untouched.

type gateListener struct {
	net.Listener
	s *Server
}

func (l *gateListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.s.mu.Lock()
	l.s.conns = append(l.s.conns, c)
	l.s.mu.Unlock()
	return &gateConn{Conn: c, br: bufio.NewReader(c), s: l.s}, nil
}

type gateConn struct {
	net.Conn
	s  *Server
	br *bufio.Reader

	// Read is only ever called by the one goroutine serving the connection.
	passthrough bool // after STARTTLS: bytes are TLS records, not lines
	inData      bool // between an accepted DATA and the line "."
	pending     []byte
}

func (g *gateConn) Read(p []byte) (int, error) {
	for len(g.pending) == 0 {
		if g.passthrough {
			return g.br.Read(p)
		}
		line, err := g.br.ReadBytes('\n')
		if len(line) > 0 {
			cmd := strings.TrimRight(string(line), "\r\n")
			switch {
			case g.inData:
				g.inData = cmd != "."
			case strings.EqualFold(cmd, "STARTTLS"):
				g.passthrough = true
			case strings.EqualFold(cmd, "DATA"):
				if code := g.s.currentFail().DataCommand; code != 0 {
					reply := strconv.Itoa(code) + " " + strconv.Itoa(code/100) + ".0.0 DATA refused by smtptest\r\n"
					if _, werr := g.Conn.Write([]byte(reply)); werr != nil {
						return 0, werr
					}
					continue
				}
				g.inData = true // the body follows; its lines are not commands
			}
			g.pending = line
		}
		if err != nil && len(g.pending) == 0 {
			return 0, err
		}
		if err != nil {
			break
		}
	}
	n := copy(p, g.pending)
	g.pending = g.pending[n:]
	return n, nil
}
