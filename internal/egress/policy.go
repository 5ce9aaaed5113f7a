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
//     address entry (IP or CIDR, with its port) of the worker's list:
//     loopback, private, link-local, CGNAT, unspecified, multicast,
//     broadcast, benchmarking and reserved ranges, and the host's own
//     interface addresses, are refused otherwise (a workspace's own address
//     entries may cover public addresses only: WorkspaceEntryRefusal, and
//     CombineAllow leaves out the others, so a name of a workspace's
//     resolving into a private network is refused unless the operator
//     opened that address);
//   - an address given literally (CONNECT 10.0.0.5:443) must be covered by
//     an address entry (for a non-public one, the worker's);
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
	"slices"
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
// literally: nil when it may be connected to. A non-public address (or one
// of the host's, own) needs an address entry of rs covering it; rs is a
// runtime's list from CombineAllow, whose entries covering such addresses
// are all the worker's (a workspace's own are refused at acquire and left
// out by CombineAllow), so only the operator opens them.
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
	what := Classify(a)
	if what == "" && own != nil && own(a) {
		what = "an address of the worker's host"
	}
	if viaName == "" {
		if what != "" {
			return &Denial{Reason: hp + " is not in the allow-list (" + what + " needs an IP or CIDR entry in the worker's SANDBOX_NETWORK_ALLOW)"}
		}
		return &Denial{Reason: hp + " is not in the allow-list (an address needs an IP or CIDR entry)"}
	}
	if what == "" {
		return nil
	}
	return &Denial{Reason: viaName + " resolves to " + a.String() + ", " + what + ": allow " + a.String() + ":" + strconv.Itoa(int(port)) + " (or its CIDR) by address in the worker's SANDBOX_NETWORK_ALLOW to reach it"}
}

// addrClass is a range of addresses a workspace's own allow-list entries
// may never cover (WorkspaceEntryRefusal), with the words of the refusal.
type addrClass struct {
	prefix netip.Prefix
	what   string
}

// hostClasses are the ranges that reach the worker's host itself whatever
// its interfaces: loopback and "this network"/unspecified.
var hostClasses = []addrClass{
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback addresses"},
	{netip.MustParsePrefix("::1/128"), "the loopback address"},
	{netip.MustParsePrefix("0.0.0.0/8"), "'this network' addresses"},
	{netip.MustParsePrefix("::/128"), "the unspecified address"},
}

// nonPublicClasses are the other ranges Classify reports as non-public
// (TestNonPublicClassesMatchClassify keeps the two in step): an address
// entry of a workspace covering any of them would open the networks behind
// the worker (the compose stack's Temporal, PostgreSQL, a cloud VPC) to
// whoever may acquire a workspace.
var nonPublicClasses = []addrClass{
	{netip.MustParsePrefix("10.0.0.0/8"), "private addresses (RFC 1918)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private addresses (RFC 1918)"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private addresses (RFC 1918)"},
	{netip.MustParsePrefix("fc00::/7"), "unique local addresses (fc00::/7)"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT (shared) addresses"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local addresses"},
	{netip.MustParsePrefix("fe80::/10"), "link-local addresses"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast addresses"},
	{netip.MustParsePrefix("ff00::/8"), "multicast addresses"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol addresses"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking addresses"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved addresses (and the broadcast address)"},
	{netip.MustParsePrefix("100::/64"), "discard-only addresses"},
	{netip.MustParsePrefix("2001:2::/48"), "benchmarking addresses"},
}

// translations are the IPv6 ranges whose addresses reach the IPv4 address
// they carry at byte off (effective): what such an entry covers is checked
// as that IPv4 range too.
var translations = []struct {
	prefix netip.Prefix
	off    int
	as     string
}{
	{netip.MustParsePrefix("::ffff:0:0/96"), 12, "IPv4-mapped"},
	{nat64, 12, "NAT64"},
	{sixTo, 2, "6to4"},
}

// reach is a range an address entry reaches, and how (" (as NAT64)", or "").
type reach struct {
	prefix netip.Prefix
	as     string
}

// reaches returns the ranges an address prefix p reaches: p itself and,
// for the part of an IPv6 prefix inside a translation range, the IPv4
// range that part carries (all of IPv4 when p holds the whole translation
// range).
func reaches(p netip.Prefix) []reach {
	out := []reach{{prefix: p}}
	if !p.Addr().Is6() {
		return out
	}
	for _, t := range translations {
		if !p.Overlaps(t.prefix) {
			continue
		}
		b := p.Addr().As16()
		bits := min(max(p.Bits()-t.off*8, 0), 32)
		v4 := netip.AddrFrom4([4]byte{b[t.off], b[t.off+1], b[t.off+2], b[t.off+3]})
		out = append(out, reach{prefix: netip.PrefixFrom(v4, bits).Masked(), as: " (as " + t.as + ")"})
	}
	return out
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
// allow-list entries ("" when it may). A workspace's entries come from
// whoever acquires it (network_allow), so they are untrusted:
//
//   - an address entry may only cover public addresses: one that covers
//     any address Classify reports as non-public — loopback, "this
//     network" and unspecified, RFC 1918, CGNAT, link-local, unique local
//     (fc00::/7), multicast, reserved, benchmarking and the rest, also as
//     the IPv4-mapped, NAT64 and 6to4 addresses that reach them — or one of
//     own (the worker host's addresses, HostAddrs) would open the worker's
//     own services or the networks behind it (the compose stack's
//     Temporal at a private 172.x address). A CIDR is refused when it
//     overlaps such a range at all: 0.0.0.0/0 and ::/0 are refused, not
//     applied to their public part;
//   - a wildcard name entry would let the workspace's commands make the
//     worker resolve names of their choosing below it (DNS exfiltration:
//     "CONNECT <secret>.example.com:443" sends the label to example.com's
//     name servers).
//
// Only the worker's list (SANDBOX_NETWORK_ALLOW) may name those
// (docs/SECURITY.md "The egress proxy"; CombineAllow keeps a workspace's
// entry the worker's list covers). Exact name entries are always accepted:
// each address a name resolves to is checked by the proxy on every
// connection, and as no address entry of a workspace covers a non-public
// address, only the worker's entries let a name reach one. (Metadata
// addresses are never reached whatever the list says.)
func WorkspaceEntryRefusal(r sandboxapi.NetworkRule, own []netip.Addr) string {
	if r.IsName() {
		if r.Wildcard {
			return "a wildcard would let the workspace's commands make the worker resolve names of their choosing below " + r.Host + " (DNS exfiltration); name each host exactly"
		}
		return ""
	}
	rs := reaches(r.Prefix)
	for _, c := range hostClasses {
		for _, x := range rs {
			if x.prefix.Overlaps(c.prefix) {
				return "it covers " + c.what + x.as
			}
		}
	}
	for _, a := range own {
		a = a.Unmap()
		for _, x := range rs {
			if x.prefix.Contains(a) {
				return "it covers " + a.String() + ", an address of the worker's host" + x.as
			}
		}
	}
	for _, c := range nonPublicClasses {
		for _, x := range rs {
			if x.prefix.Overlaps(c.prefix) {
				return "it covers " + c.what + x.as + ", which are not public"
			}
		}
	}
	return ""
}

// operatorCovers reports whether an entry of the worker's list (operator,
// parsed) allows everything r allows: the same name entry (a wildcard
// exactly), or an address entry whose prefix holds r's and whose ports
// hold r's.
func operatorCovers(operator Rules, r sandboxapi.NetworkRule) bool {
	for _, o := range operator {
		if o.PortMin != 0 && (r.PortMin == 0 || r.PortMin < o.PortMin || r.PortMax > o.PortMax) {
			continue
		}
		if r.IsName() {
			if o.IsName() && o.Host == r.Host && o.Wildcard == r.Wildcard {
				return true
			}
			continue
		}
		if !o.IsName() && o.Prefix.Bits() <= r.Prefix.Bits() && o.Prefix.Contains(r.Prefix.Addr()) {
			return true
		}
	}
	return false
}

// WorkspaceEntryCheck is WorkspaceEntryRefusal for an entry the worker's
// list (operator) does not cover: "" when the operator's list covers r
// (the entry then grants nothing the worker did not), else
// WorkspaceEntryRefusal(r, own()). own is called only for an address entry
// (nil: no host addresses).
func WorkspaceEntryCheck(operator Rules, r sandboxapi.NetworkRule, own func() []netip.Addr) string {
	if !r.IsName() || r.Wildcard {
		if operatorCovers(operator, r) {
			return ""
		}
	}
	if r.IsName() {
		return WorkspaceEntryRefusal(r, nil)
	}
	var addrs []netip.Addr
	if own != nil {
		addrs = own()
	}
	return WorkspaceEntryRefusal(r, addrs)
}

// CombineAllow is a runtime's complete allow-list (canonical entries): the
// worker's (operator: SANDBOX_NETWORK_ALLOW, trusted), then each of the
// workspace's own (workspace: its stored network_allow, untrusted) once —
// except an entry WorkspaceEntryCheck refuses (stored before the rule that
// refuses it at acquire, or accepted while the host had other addresses),
// which is left out and returned in dropped. So every address entry of the
// result that covers a non-public address or one of the host's is the
// operator's, and the proxy's "covered by an address entry" means covered
// by the worker's list. Entries that do not parse are dropped too (the
// stored ones were checked at acquire).
func CombineAllow(operator, workspace []string, own func() []netip.Addr) (combined, dropped []string) {
	ops, _ := ParseRules(operator)
	combined = append([]string(nil), operator...)
	var hostAddrs []netip.Addr
	var listed bool
	ownOnce := func() []netip.Addr {
		if !listed && own != nil {
			hostAddrs, listed = own(), true
		}
		return hostAddrs
	}
	for _, e := range workspace {
		if slices.Contains(combined, e) {
			continue
		}
		r, err := sandboxapi.ParseNetworkRule(e)
		if err != nil || WorkspaceEntryCheck(ops, r, ownOnce) != "" {
			dropped = append(dropped, e)
			continue
		}
		combined = append(combined, e)
	}
	return combined, dropped
}
