// Package egress is the worker's egress proxy: the only way out of a runtime
// whose command runs with the "limited" network (docs/SECURITY.md "Network
// modes"). Each runtime gets an endpoint of its own, a unix socket that only
// its limited sandbox reaches (Proxy.Attach), so every connection is known
// to come from one workspace and is checked against that workspace's
// allow-list (sandboxapi.NetworkRule: the worker's SANDBOX_NETWORK_ALLOW and
// the workspace's network_allow entries).
//
// It speaks HTTP proxying: CONNECT host:port (a TCP tunnel; TLS passes
// through untouched, never intercepted) and plain HTTP requests by absolute
// URL (http://host/...). The proxy, not the sandbox, resolves every name and
// checks every address it would connect to, so:
//
//   - a name must be a host name and match a name entry (and its port),
//     and is only resolved then (a command cannot make the worker look up
//     arbitrary names); a name only a wildcard entry matches is one the
//     command chose, so at most MaxWildcardNames of those are resolved per
//     endpoint (a workspace's own wildcard entries are refused:
//     WorkspaceEntryRefusal);
//   - each address a name resolves to must be public, or covered by an
//     address entry (IP or CIDR, with its port): loopback, private,
//     link-local, CGNAT, unspecified, multicast, broadcast, benchmarking and
//     reserved ranges, and the host's own interface addresses, are refused
//     otherwise;
//   - an address given literally (CONNECT 10.0.0.5:443) must be covered by
//     an address entry;
//   - the cloud metadata addresses (MetadataAddrs) are never reached,
//     whatever the list says.
//
// The proxy connects to the address it checked (no second resolution). A
// refused request is answered 403 with a body that names the policy and
// the reason, and is logged with the workspace id, the runtime id and the
// destination host:port: never a URL path, a query or a header.
package egress

import (
	"net"
	"net/netip"
	"strconv"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// MetadataAddrs are the cloud instance metadata and credential endpoints the
// proxy never connects to, even when an allow entry covers them: AWS, GCP,
// Azure, OpenStack, DigitalOcean and Oracle (169.254.169.254), AWS IPv6
// (fd00:ec2::254), AWS ECS task credentials (169.254.170.2) and Alibaba
// Cloud (100.100.100.200).
var MetadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"),
	netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("169.254.170.2"),
	netip.MustParseAddr("100.100.100.200"),
}

// special ranges a name may not resolve into unless an address entry
// allows it, with the word used in the refusal. Go's netip predicates cover
// loopback, private (RFC 1918, fc00::/7), link-local, multicast and
// unspecified; these are the rest.
var special = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "a 'this network' address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a carrier-grade NAT (shared) address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
	{netip.MustParsePrefix("100::/64"), "a discard-only address"},
	{netip.MustParsePrefix("2001:2::/48"), "a benchmarking address"},
}

// embedded IPv4 of translation prefixes: the IPv4 address they carry is
// what is reached, so it is the one checked.
var (
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
	sixTo = netip.MustParsePrefix("2002::/16")
)

// isMetadata reports whether a (or the IPv4 address it embeds) is a
// metadata address.
func isMetadata(a netip.Addr) bool {
	a = effective(a)
	for _, m := range MetadataAddrs {
		if a == m {
			return true
		}
	}
	return false
}

// effective returns the address actually reached: a unmapped, or the IPv4
// address inside a NAT64 or 6to4 address.
func effective(a netip.Addr) netip.Addr {
	a = a.Unmap()
	if a.Is6() {
		b := a.As16()
		switch {
		case nat64.Contains(a):
			return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
		case sixTo.Contains(a):
			return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})
		}
	}
	return a
}

// Classify returns what kind of non-public address a is ("" for a public
// one): loopback, private, link-local, multicast, unspecified, broadcast,
// and the ranges of special. The cloud metadata addresses are link-local
// (or private, or CGNAT) and are refused separately (isMetadata).
func Classify(a netip.Addr) string {
	a = effective(a)
	switch {
	case !a.IsValid():
		return "an invalid address"
	case a.IsLoopback():
		return "a loopback address"
	case a.IsPrivate():
		return "a private address"
	case a.IsLinkLocalUnicast():
		return "a link-local address"
	case a.IsMulticast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast():
		return "a multicast address"
	case a.IsUnspecified():
		return "an unspecified address"
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "the broadcast address"
	}
	for _, s := range special {
		if s.prefix.Contains(a) {
			return s.what
		}
	}
	return ""
}

// Rules is a parsed allow-list.
type Rules []sandboxapi.NetworkRule

// ParseRules parses canonical or user-written entries (sandboxapi.ParseNetworkRule).
func ParseRules(entries []string) (Rules, error) {
	return sandboxapi.ParseNetworkAllow("network_allow", entries)
}

// nameAllowed reports whether a name entry matches host:port, and whether
// only wildcard entries do (the name itself was chosen by whoever asks).
func (rs Rules) nameAllowed(host string, port uint16) (allowed, viaWildcard bool) {
	for _, r := range rs {
		if r.MatchesName(host) && r.MatchesPort(port) {
			if !r.Wildcard {
				return true, false
			}
			allowed, viaWildcard = true, true
		}
	}
	return allowed, viaWildcard
}

// validHostName reports whether host (lowercase, no final dot) is a DNS
// host name: labels of 1 to 63 letters, digits, '-' and '_', not starting
// or ending with '-', at most 253 bytes in all. The proxy resolves nothing
// else.
func validHostName(host string) bool {
	if len(host) == 0 || len(host) > 253 {
		return false
	}
	label := 0
	for i := 0; i < len(host); i++ {
		switch c := host[i]; {
		case c == '.':
			if label == 0 || host[i-1] == '-' {
				return false
			}
			label = 0
			continue
		case c == '-':
			if label == 0 {
				return false
			}
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_':
		default:
			return false
		}
		label++
		if label > 63 {
			return false
		}
	}
	return label > 0 && host[len(host)-1] != '-'
}

// addrAllowed reports whether an address entry covers a:port.
func (rs Rules) addrAllowed(a netip.Addr, port uint16) bool {
	a = a.Unmap()
	for _, r := range rs {
		if r.MatchesAddr(a) && r.MatchesPort(port) {
			return true
		}
	}
	return false
}

// Denial is a refused destination: why, in words for the answer and the log.
type Denial struct {
	// Reason completes "denied by the network policy: …".
	Reason string
}

func (d *Denial) Error() string { return "denied by the network policy: " + d.Reason }

// checkAddr decides one address reached through a name (viaName) or given
// literally: nil when it may be connected to.
func (rs Rules) checkAddr(a netip.Addr, port uint16, own func(netip.Addr) bool, viaName string) *Denial {
	a = a.Unmap()
	hp := netip.AddrPortFrom(a, port).String()
	if isMetadata(a) {
		if viaName != "" {
			return &Denial{Reason: viaName + " resolves to " + a.String() + ", a cloud metadata address, which is never reachable"}
		}
		return &Denial{Reason: a.String() + " is a cloud metadata address, which is never reachable"}
	}
	if rs.addrAllowed(a, port) {
		return nil
	}
	if viaName == "" {
		return &Denial{Reason: hp + " is not in the allow-list (an address needs an IP or CIDR entry)"}
	}
	what := Classify(a)
	if what == "" && own != nil && own(a) {
		what = "an address of the worker's host"
	}
	if what == "" {
		return nil
	}
	return &Denial{Reason: viaName + " resolves to " + a.String() + ", " + what + ": allow " + a.String() + ":" + strconv.Itoa(int(port)) + " (or its CIDR) by address to reach it"}
}

// guardedPrefixes are the address ranges a workspace's own allow-list
// entries may never cover (WorkspaceEntryRefusal): loopback and "this
// network"/unspecified, also as the NAT64 and 6to4 addresses that reach them.
var guardedPrefixes = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback addresses"},
	{netip.MustParsePrefix("::1/128"), "the loopback address"},
	{netip.MustParsePrefix("0.0.0.0/8"), "'this network' addresses"},
	{netip.MustParsePrefix("::/128"), "the unspecified address"},
	{netip.MustParsePrefix("64:ff9b::7f00:0/104"), "loopback addresses (as NAT64)"},
	{netip.MustParsePrefix("64:ff9b::/104"), "'this network' addresses (as NAT64)"},
	{netip.MustParsePrefix("2002:7f00::/24"), "loopback addresses (as 6to4)"},
	{netip.MustParsePrefix("2002::/24"), "'this network' addresses (as 6to4)"},
}

// HostAddrs returns the addresses of this host's network interfaces
// (IPv4-mapped ones unmapped); nil when they cannot be listed.
func HostAddrs() []netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, ad := range addrs {
		if n, ok := ad.(*net.IPNet); ok {
			if x, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, x.Unmap())
			}
		}
	}
	return out
}

// WorkspaceEntryRefusal returns why r may not be one of a workspace's own
// allow-list entries ("" when it may): an address entry that covers a
// loopback or unspecified address or one of own (the worker host's
// addresses, HostAddrs) would let the workspace's
// requester open the worker's own services, and a wildcard name entry
// would let the workspace's commands make the worker resolve names of
// their choosing below it (DNS exfiltration: "CONNECT
// <secret>.example.com:443" sends the label to example.com's name
// servers) (docs/SECURITY.md "The egress proxy"); only the worker's list
// (SANDBOX_NETWORK_ALLOW) may name those. Exact name entries are always
// accepted: what a name resolves to is checked by the proxy on every
// connection. (Metadata addresses are never reached whatever the list
// says.)
func WorkspaceEntryRefusal(r sandboxapi.NetworkRule, own []netip.Addr) string {
	if r.IsName() {
		if r.Wildcard {
			return "a wildcard would let the workspace's commands make the worker resolve names of their choosing below " + r.Host + " (DNS exfiltration); name each host exactly"
		}
		return ""
	}
	for _, g := range guardedPrefixes {
		if r.Prefix.Overlaps(g.prefix) {
			return "it covers " + g.what
		}
	}
	covers := func(a netip.Addr) bool {
		if r.Prefix.Contains(a) {
			return true
		}
		if a.Is4() {
			b := a.As4()
			n := netip.AddrFrom16([16]byte{0: 0x00, 1: 0x64, 2: 0xff, 3: 0x9b, 12: b[0], 13: b[1], 14: b[2], 15: b[3]})
			s := netip.AddrFrom16([16]byte{0: 0x20, 1: 0x02, 2: b[0], 3: b[1], 4: b[2], 5: b[3]})
			return r.Prefix.Contains(n) || r.Prefix.Contains(s)
		}
		return false
	}
	for _, a := range own {
		if covers(a.Unmap()) {
			return "it covers " + a.Unmap().String() + ", an address of the worker's host"
		}
	}
	return ""
}
