package web

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/approval"
	"github.com/gofiber/fiber/v2"
)

// Development mode opens two doors for the person at the service's
// terminal and for nobody else. An agent on the same machine reaches
// loopback too (SPEC §3 guarantee 1), so each door opens only with a
// secret of 32 random bytes drawn at start, printed on the terminal (the
// banner) and kept in this process's memory only as its SHA-256, compared
// in constant time. No response, log line, audit event or /dev/mail
// message carries either secret: the access log writes no query string,
// and nothing else ever sees them.
//
//   - GET /dev/waiting?k=KEY lists what waits for the development
//     approver, each operation with the approval link the console channel
//     printed for it. The key travels in a URL once: the answer sets it as
//     an HttpOnly, SameSite=Strict cookie for /dev/waiting and redirects to
//     the bare path, so that it leaves the address bar and the history.
//     Without the key, or with a wrong one, the answer is exactly the 404
//     of a path that does not exist.
//   - GET /dev/signin?k=TOKEN signs the person in as the development
//     approver (and operator) to the inbox and the console: the session an
//     OIDC sign-in starts. A token works once; each sign-in prints the next
//     link on the terminal.
//
// Outside development mode Config.Dev is nil and neither route exists.

// DevConfig describes development mode's person at the terminal.
type DevConfig struct {
	// Approver and Operator are whom the sign-in opens the inbox and
	// console to ("you" and "dev-operator"); Name is shown when signed in.
	Approver, Operator, Name string
	// Link returns the approval link the console channel printed for an
	// operation and approver, or "" (console.Console.Link).
	Link func(op, approver string) string
	// Terminal is where the next sign-in link is printed (the terminal
	// the banner went to, which only the person running the service reads).
	Terminal io.Writer
}

// DevDoors holds the secrets of the waiting page and the sign-in.
type DevDoors struct {
	cfg  DevConfig
	base string

	mu      sync.Mutex
	waiting [sha256.Size]byte
	signIn  [sha256.Size]byte
	live    bool // the sign-in token is not spent yet
}

const (
	devWaitingPath   = "/dev/waiting"
	devSignInPath    = "/dev/signin"
	devWaitingCookie = "countersign-dev-waiting"
)

// NewDevDoors draws both secrets and returns the doors with the two links
// to print in the banner, and nowhere else.
func NewDevDoors(cfg DevConfig, publicURL string) (d *DevDoors, waitingLink, signInLink string) {
	d = &DevDoors{cfg: cfg, base: strings.TrimRight(publicURL, "/")}
	key := devSecret()
	d.waiting = sha256.Sum256([]byte(key))
	return d, d.base + devWaitingPath + "?k=" + key, d.issueSignIn()
}

func devSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// matches compares a presented secret with a stored hash in constant time.
func matches(presented string, want [sha256.Size]byte) bool {
	if len(presented) != 43 {
		return false
	}
	got := sha256.Sum256([]byte(presented))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// issueSignIn draws a new sign-in token, replacing any earlier one, and
// returns its link.
func (d *DevDoors) issueSignIn() string {
	tok := devSecret()
	d.mu.Lock()
	d.signIn, d.live = sha256.Sum256([]byte(tok)), true
	d.mu.Unlock()
	return d.base + devSignInPath + "?k=" + tok
}

// spend reports whether tok is the live sign-in token, and spends it.
func (d *DevDoors) spend(tok string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.live || !matches(tok, d.signIn) {
		return false
	}
	d.live = false
	return true
}

func (d *DevDoors) waitingKey(k string) bool { return matches(k, d.waiting) }

func (s *Server) devRoutes() {
	if s.cfg.Dev == nil {
		return
	}
	s.app.Get(devWaitingPath, s.devWaiting)
	s.app.Get(devSignInPath, s.devSignIn)
}

// devWaiting is GET /dev/waiting.
func (s *Server) devWaiting(c *fiber.Ctx) error {
	d := s.cfg.Dev
	if k := c.Query("k"); k != "" {
		if !d.waitingKey(k) {
			return fiber.ErrNotFound // as if there were no such page
		}
		c.Cookie(&fiber.Cookie{Name: devWaitingCookie, Value: k, Path: devWaitingPath, HTTPOnly: true,
			Secure: s.cookieSecure(), SameSite: fiber.CookieSameSiteStrictMode})
		setPageHeaders(c)
		return c.Redirect(devWaitingPath, http.StatusSeeOther)
	}
	if !d.waitingKey(c.Cookies(devWaitingCookie)) {
		return fiber.ErrNotFound
	}
	setPageHeaders(c)
	ops, err := s.svc.Inbox(c.UserContext(), d.cfg.Approver)
	if err != nil {
		return err
	}
	now := s.svc.Now()
	data := devWaitingData{Approver: d.cfg.Approver}
	for _, op := range ops {
		m := approval.BuildMessage(op, s.svc.Policy(), now)
		it := devWaitingItem{Key: op.Key, M: m, When: devSentAt(op), ExpiresIn: human(m.ExpiresAt.Sub(now)),
			ExpiresISO: m.ExpiresAt.UTC().Format(time.RFC3339)}
		if d.cfg.Link != nil {
			it.Link = d.cfg.Link(op.Key, d.cfg.Approver)
		}
		data.Items = append(data.Items, it)
	}
	c.Type("html", "utf-8")
	if c.Method() == fiber.MethodHead {
		return nil
	}
	return s.pages.ExecuteTemplate(c, "devwaiting", data)
}

func devSentAt(op *approval.Operation) time.Time {
	if op.SentAt != nil {
		return *op.SentAt
	}
	return op.CreatedAt
}

type devWaitingData struct {
	Approver string
	Items    []devWaitingItem
}

type devWaitingItem struct {
	Key        string
	M          approval.Message
	When       time.Time
	ExpiresIn  string
	ExpiresISO string
	// Link is the approval link the console printed, "" when this process
	// printed none (another run or replica delivered the notice).
	Link string
}

// devSignIn is GET /dev/signin?k=TOKEN.
func (s *Server) devSignIn(c *fiber.Ctx) error {
	d := s.cfg.Dev
	setPageHeaders(c)
	if c.Method() == fiber.MethodHead {
		return c.SendStatus(http.StatusOK) // a look at the link spends nothing
	}
	if !d.spend(c.Query("k")) {
		return s.problemPage(c, http.StatusForbidden, "This sign-in link does not work",
			"A development sign-in link works once. This one was used already, or it is not the one the service printed. "+
				"After each sign-in the service prints the next link on its terminal; nothing was signed in.")
	}
	ss := session{Approver: d.cfg.Approver, Operator: d.cfg.Operator, Name: d.cfg.Name}
	if err := s.startSession(c, ss, "/inbox"); err != nil {
		return err
	}
	if d.cfg.Terminal != nil {
		rule := strings.Repeat("─", 72)
		fmt.Fprintf(d.cfg.Terminal, "\n%s\n  DEVELOPMENT ONLY: %s signed in to the inbox and console. The next sign-in link\n  (works once; for this terminal only, never give it to an agent):\n  %s\n%s\n",
			rule, d.cfg.Approver, d.issueSignIn(), rule)
	}
	return nil
}
