// Package mailer is the one place in countersign that talks SMTP. Both the
// email notifier (approval requests to humans) and the email.send action
// (the agent's approved email) send through a Sender from this package, so
// TLS policy, credentials and the honest classification of failures live
// in one place.
package mailer

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/mail"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// TLSMode says how a connection to the SMTP server is protected.
type TLSMode string

const (
	// TLSMandatory upgrades with STARTTLS and refuses servers that cannot.
	TLSMandatory TLSMode = "mandatory"
	// TLSOpportunistic upgrades with STARTTLS when the server offers it.
	TLSOpportunistic TLSMode = "opportunistic"
	// TLSNone never upgrades.
	TLSNone TLSMode = "none"
	// TLSImplicit speaks TLS from the first byte (smtps://, port 465).
	TLSImplicit TLSMode = "implicit"
)

// Auth mechanisms a Config may ask for.
const (
	AuthPlain = "plain"
	AuthLogin = "login"
)

// DefaultTimeout bounds one SMTP conversation when the URL sets none.
const DefaultTimeout = 30 * time.Second

// Config is a parsed COUNTERSIGN_SMTP_URL. Print it with String (or log it
// with slog): both leave the password out.
type Config struct {
	Host     string
	Port     int
	Username string
	Password string
	// Auth is the SASL mechanism used when Username is set: plain or login.
	Auth string
	TLS  TLSMode
	// From is the sender of every message countersign sends.
	From mail.Address
	// InsecureSkipVerify accepts any server certificate. For tests only.
	InsecureSkipVerify bool
	Timeout            time.Duration
}

// ParseURL reads COUNTERSIGN_SMTP_URL:
//
//	smtp://user:pass@host:port?tls=mandatory|opportunistic|none&from=...
//	smtps://user:pass@host:port?from=...
//
// smtp defaults to port 587 and to tls=mandatory, except for loopback hosts
// (localhost, 127.0.0.0/8, ::1), where a development server without TLS is
// common and opportunistic is the default. smtps defaults to port 465.
// Other query parameters: from (an address, default countersign@<host>, or
// countersign@localhost for an IP host), auth (plain, the default, or
// login), timeout (a Go duration, default 30s) and insecure_skip_verify
// (true only in tests). Unknown parameters are errors, so that a typo does
// not silently weaken TLS. Credentials are refused with tls=none unless the
// host is loopback. Errors never contain the password.
func ParseURL(s string) (Config, error) {
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the whole URL, password included
		}
		return Config{}, fmt.Errorf("mailer: SMTP URL: %v", err)
	}
	var c Config
	switch u.Scheme {
	case "smtp":
		c.Port = 587
	case "smtps":
		c.Port = 465
		c.TLS = TLSImplicit
	default:
		return Config{}, fmt.Errorf("mailer: SMTP URL: scheme must be smtp or smtps, not %q", u.Scheme)
	}
	if u.Opaque != "" || (u.Path != "" && u.Path != "/") || u.Fragment != "" {
		return Config{}, errors.New("mailer: SMTP URL: want scheme://[user:pass@]host[:port][?params] with no path")
	}
	c.Host = u.Hostname()
	if c.Host == "" {
		return Config{}, errors.New("mailer: SMTP URL: host is missing")
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Config{}, fmt.Errorf("mailer: SMTP URL: invalid port %q", p)
		}
		c.Port = n
	}
	if u.User != nil {
		c.Username = u.User.Username()
		c.Password, _ = u.User.Password()
		if c.Username == "" {
			return Config{}, errors.New("mailer: SMTP URL: a password needs a user name")
		}
	}
	loopback := isLoopback(c.Host)
	c.Auth = AuthPlain
	c.Timeout = DefaultTimeout

	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Config{}, fmt.Errorf("mailer: SMTP URL: query: %v", err)
	}
	for key, vals := range q {
		if len(vals) != 1 {
			return Config{}, fmt.Errorf("mailer: SMTP URL: parameter %q given %d times", key, len(vals))
		}
		v := vals[0]
		switch key {
		case "tls":
			if c.TLS == TLSImplicit {
				return Config{}, errors.New("mailer: SMTP URL: tls= applies to smtp:// only; smtps:// is always TLS")
			}
			switch m := TLSMode(v); m {
			case TLSMandatory, TLSOpportunistic, TLSNone:
				c.TLS = m
			default:
				return Config{}, fmt.Errorf("mailer: SMTP URL: tls must be mandatory, opportunistic or none, not %q", v)
			}
		case "from":
			a, err := mail.ParseAddress(v)
			if err != nil {
				return Config{}, fmt.Errorf("mailer: SMTP URL: from %q is not an email address", v)
			}
			c.From = *a
		case "auth":
			switch strings.ToLower(v) {
			case AuthPlain, AuthLogin:
				c.Auth = strings.ToLower(v)
			default:
				return Config{}, fmt.Errorf("mailer: SMTP URL: auth must be plain or login, not %q", v)
			}
		case "timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return Config{}, fmt.Errorf("mailer: SMTP URL: timeout %q is not a positive duration", v)
			}
			c.Timeout = d
		case "insecure_skip_verify":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return Config{}, fmt.Errorf("mailer: SMTP URL: insecure_skip_verify must be true or false, not %q", v)
			}
			c.InsecureSkipVerify = b
		default:
			return Config{}, fmt.Errorf("mailer: SMTP URL: unknown parameter %q", key)
		}
	}
	if c.TLS == "" {
		c.TLS = TLSMandatory
		if loopback {
			c.TLS = TLSOpportunistic
		}
	}
	if c.Username != "" && c.TLS == TLSNone && !loopback {
		return Config{}, fmt.Errorf("mailer: SMTP URL: refusing to send credentials to %s without TLS", c.Host)
	}
	if c.From.Address == "" {
		domain := c.Host
		if net.ParseIP(domain) != nil {
			domain = "localhost"
		}
		c.From = mail.Address{Name: "countersign", Address: "countersign@" + strings.ToLower(domain)}
	}
	return c, nil
}

// isLoopback reports whether host names this machine.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Addr is host:port.
func (c Config) Addr() string { return net.JoinHostPort(c.Host, strconv.Itoa(c.Port)) }

// String renders the config as a URL with the password replaced, for logs
// and check-config output.
func (c Config) String() string {
	u := url.URL{Scheme: "smtp", Host: c.Addr()}
	if c.TLS == TLSImplicit {
		u.Scheme = "smtps"
	}
	if c.Username != "" {
		u.User = url.User(c.Username)
		if c.Password != "" {
			u.User = url.UserPassword(c.Username, "REDACTED")
		}
	}
	q := url.Values{}
	if c.TLS != TLSImplicit {
		q.Set("tls", string(c.TLS))
	}
	if c.From.Address != "" {
		q.Set("from", c.From.String())
	}
	if c.InsecureSkipVerify {
		q.Set("insecure_skip_verify", "true")
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// GoString keeps %#v from printing the password.
func (c Config) GoString() string { return "mailer.Config(" + c.String() + ")" }

// LogValue keeps slog from printing the password.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }
