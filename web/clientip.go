package web

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// proxies are the networks whose X-Forwarded-For is believed
// (COUNTERSIGN_TRUSTED_PROXIES).
type proxies []netip.Prefix

// parseProxies reads CIDRs ("10.0.0.0/8") or single addresses.
func parseProxies(list []string) (proxies, error) {
	var out proxies
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !strings.Contains(s, "/") {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, fmt.Errorf("web: trusted proxy %q is not a CIDR or an address", s)
			}
			s = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()).String()
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("web: trusted proxy %q is not a CIDR or an address", s)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

func (ps proxies) trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientAddr is the address a request comes from, for limits and logs: the
// peer, unless the peer is a trusted proxy; then the right-most address of
// X-Forwarded-For that is not a trusted proxy (each proxy appends the
// address it saw, so everything left of the first untrusted hop is the
// client's own say and may be forged). When every hop is trusted, the
// left-most one is the client; an unreadable hop ends the walk at the proxy
// that appended it.
func (ps proxies) clientAddr(c *fiber.Ctx) string {
	peer, ok := netip.AddrFromSlice(c.Context().RemoteIP())
	if !ok {
		return c.IP()
	}
	peer = peer.Unmap()
	if len(ps) == 0 || !ps.trusted(peer) {
		return peer.String()
	}
	var hops []string
	c.Request().Header.VisitAll(func(k, v []byte) {
		if strings.EqualFold(string(k), fiber.HeaderXForwardedFor) {
			hops = append(hops, strings.Split(string(v), ",")...)
		}
	})
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		h := strings.TrimSpace(hops[i])
		if ap, err := netip.ParseAddrPort(h); err == nil {
			h = ap.Addr().String()
		}
		a, err := netip.ParseAddr(strings.Trim(h, "[]"))
		if err != nil {
			break
		}
		client = a.Unmap()
		if !ps.trusted(client) {
			break
		}
	}
	return client.String()
}
