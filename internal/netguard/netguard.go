// Package netguard keeps countersign's outbound HTTP off addresses that
// are not the public internet (SSRF): loopback, private, link-local (cloud
// metadata), carrier-grade NAT, documentation and the IPv6 forms that embed
// any IPv4 address. The check runs when dialing, on the address actually
// dialed after DNS resolution, so a name that resolves (or re-resolves:
// DNS rebinding) to a refused address is refused too. Used by http.request
// targets and by principals' status webhooks.
package netguard

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// RefusedError is a dial refused because the address is not public.
type RefusedError struct{ Addr netip.Addr }

func (e *RefusedError) Error() string {
	return "refusing to connect to non-public address " + e.Addr.String()
}

// Refused reports whether err is (or wraps) a refused dial.
func Refused(err error) bool {
	var re *RefusedError
	return errors.As(err, &re)
}

// Ranges that are not the public internet, beyond what netip reports as
// loopback, private, link-local, multicast or unspecified.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and broadcast
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64: may embed any IPv4
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("2002::/16"),       // 6to4: may embed any IPv4
	netip.MustParsePrefix("2001::/32"),       // Teredo
}

// Public reports whether a is an address on the public internet.
func Public(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsUnspecified() || a.IsLinkLocalUnicast() ||
		a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() || a.IsMulticast() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// Policy says which non-public addresses a client may still reach.
type Policy int

const (
	// PublicOnly refuses every non-public address.
	PublicOnly Policy = iota
	// AllowLoopback also lets loopback addresses through (a receiver on the
	// same machine, configured as such); private ranges stay refused.
	AllowLoopback
	// AllowAll turns the guard off (internal targets with allow_private).
	AllowAll
)

// Control is a net.Dialer Control function that refuses what p does not
// allow. It runs for every connection, on the resolved address.
func (p Policy) Control(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return &RefusedError{}
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return &RefusedError{Addr: a}
	}
	switch {
	case p == AllowAll, Public(a):
		return nil
	case p == AllowLoopback && a.Unmap().IsLoopback():
		return nil
	}
	return &RefusedError{Addr: a}
}

// Dialer returns a dialer guarded by p.
func (p Policy) Dialer(timeout time.Duration) *net.Dialer {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if p != AllowAll {
		d.Control = p.Control
	}
	return d
}

// NoRedirects is an http.Client CheckRedirect that never follows one: the
// 3xx answer is returned as it is, and the caller treats it as a refusal.
func NoRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Client is an HTTP client for posting to URLs configured by operators:
// guarded by p, no proxy from the environment, no redirects followed, every
// request bounded by timeout.
func Client(p Policy, timeout time.Duration) *http.Client {
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            p.Dialer(10 * time.Second).DialContext,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  timeout,
		MaxResponseHeaderBytes: 64 << 10,
		IdleConnTimeout:        90 * time.Second,
	}
	return &http.Client{Transport: tr, Timeout: timeout, CheckRedirect: NoRedirects}
}

// LoopbackHost reports whether a URL host (without port) names the local
// machine: localhost, or a loopback address literal.
func LoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && a.Unmap().IsLoopback()
}

// CheckCallbackURL validates the URL of an outbound webhook configured by
// an operator: absolute, https (plain http only to a loopback host), no
// credentials, no fragment. The error never repeats the URL (it may carry a
// token in its path or query).
func CheckCallbackURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || u.Opaque != "":
		return errors.New("must be an absolute https URL")
	case u.User != nil:
		return errors.New("must not carry credentials (user:password@); the request is signed instead")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return errors.New("must not have a fragment")
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && LoopbackHost(u.Hostname()):
		return nil
	case u.Scheme == "http":
		return errors.New("must be https (plain http only to localhost or a loopback address)")
	}
	return errors.New("must be an absolute https URL")
}

// PolicyFor is the dial policy of an outbound webhook at u: loopback is
// reached only when the URL itself names a loopback host (the operator
// wrote it so); everything else must be public.
func PolicyFor(raw string) Policy {
	if u, err := url.Parse(raw); err == nil && LoopbackHost(u.Hostname()) {
		return AllowLoopback
	}
	return PublicOnly
}
