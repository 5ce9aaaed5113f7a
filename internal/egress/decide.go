package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// ControlPlaneRefresh bounds how long the addresses of Options.ControlPlane
// names are reused before they are looked up again.
const ControlPlaneRefresh = 30 * time.Second

// decide returns the addresses host:port may be connected to, in order, or
// why not. A name is resolved only when a name entry allows it.
func (e *endpoint) decide(ctx context.Context, pol Policy, host string, port uint16) ([]netip.AddrPort, *Denial, error) {
	aps, d, err := e.decidePolicy(ctx, pol, host, port)
	if d != nil || err != nil {
		return aps, d, err
	}
	for _, ap := range aps {
		if e.p.controlPlane(ctx, host, ap) {
			return nil, &Denial{Reason: net.JoinHostPort(host, strconv.Itoa(int(port))) + " is an endpoint of the sandbox service itself (Temporal, its Web UI, the codec server, the metrics or the store), which no command may reach"}, nil
		}
	}
	return aps, nil, nil
}

// controlPlane reports whether ap (reached as host) is one of the
// Options.ControlPlane endpoints.
func (p *Proxy) controlPlane(ctx context.Context, host string, ap netip.AddrPort) bool {
	if len(p.opts.ControlPlane) == 0 {
		return false
	}
	a := ap.Addr().Unmap()
	for _, ep := range p.opts.ControlPlane {
		h, ps, err := net.SplitHostPort(ep)
		if err != nil || ps != strconv.Itoa(int(ap.Port())) {
			continue
		}
		if strings.EqualFold(h, host) {
			return true
		}
		if ha, err := netip.ParseAddr(h); h == "" || (err == nil && ha.IsUnspecified()) {
			if a.IsLoopback() || a.IsUnspecified() || p.ownAddr(a) {
				return true
			}
		}
	}
	p.cpMu.Lock()
	defer p.cpMu.Unlock()
	if p.cpAddrs == nil || time.Since(p.cpTime) > ControlPlaneRefresh {
		p.cpAddrs = map[netip.AddrPort]bool{}
		for _, ep := range p.opts.ControlPlane {
			h, ps, err := net.SplitHostPort(ep)
			port, perr := strconv.ParseUint(ps, 10, 16)
			if err != nil || perr != nil || h == "" {
				continue
			}
			addrs := []netip.Addr{}
			if ha, err := netip.ParseAddr(h); err == nil {
				addrs = append(addrs, ha)
			} else if rs, err := p.lookup(ctx, h); err == nil {
				addrs = rs
			}
			for _, x := range addrs {
				p.cpAddrs[netip.AddrPortFrom(x.Unmap(), uint16(port))] = true
			}
		}
		p.cpTime = time.Now()
	}
	return p.cpAddrs[netip.AddrPortFrom(a, ap.Port())]
}

// decidePolicy decides host:port by pol alone: the addresses to connect to,
// or why not.
func (e *endpoint) decidePolicy(ctx context.Context, pol Policy, host string, port uint16) ([]netip.AddrPort, *Denial, error) {
	own := e.p.ownAddr
	if a, err := netip.ParseAddr(host); err == nil {
		via := ""
		if pol.AnyPublic {
			// Decided as a resolved name's address is: public, or allowed.
			via = a.Unmap().String()
		}
		if d := pol.Allow.checkAddr(a, port, own, via); d != nil {
			return nil, d, nil
		}
		return []netip.AddrPort{netip.AddrPortFrom(a.Unmap(), port)}, nil, nil
	}
	if !validHostName(host) {
		return nil, &Denial{Reason: clipText(host) + " is not a host name"}, nil
	}
	allowed, viaWildcard := pol.Allow.nameAllowed(host, port)
	if !allowed && pol.AnyPublic {
		allowed, viaWildcard = true, false // every public destination
	}
	if !allowed {
		return nil, &Denial{Reason: host + ":" + strconv.Itoa(int(port)) + " is not in the allow-list"}, nil
	}
	if viaWildcard && !e.admitWildcardName(host) {
		return nil, &Denial{Reason: fmt.Sprintf("%s matches only a wildcard entry, and this runtime's commands have already had %d names under wildcard entries resolved (the limit: the worker resolves no more names of a command's choosing); allow the host by its exact name", host, MaxWildcardNames)}, nil
	}
	addrs, err := e.p.lookup(ctx, host)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot resolve %s: %w", host, lookupErr(err))
	}
	var out []netip.AddrPort
	var first *Denial
	seen := map[netip.Addr]bool{}
	for _, a := range addrs {
		a = a.Unmap()
		if seen[a] {
			continue
		}
		seen[a] = true
		if d := pol.Allow.checkAddr(a, port, own, host); d != nil {
			if first == nil {
				first = d
			}
			continue
		}
		out = append(out, netip.AddrPortFrom(a, port))
	}
	if len(out) == 0 {
		if first == nil {
			return nil, nil, fmt.Errorf("cannot resolve %s: no address", host)
		}
		return nil, first, nil
	}
	return out, nil, nil
}

func lookupErr(err error) error {
	var de *net.DNSError
	if errors.As(err, &de) {
		if de.IsNotFound {
			return errors.New("no such host")
		}
		if de.IsTimeout {
			return errors.New("lookup timed out")
		}
		return errors.New(de.Err)
	}
	return err
}
