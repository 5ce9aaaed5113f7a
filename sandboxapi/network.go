package sandboxapi

import (
	"net/netip"
	"strconv"
	"strings"
)

// Network policies, per workspace and per command (docs/SECURITY.md
// "Network modes"). The three modes are ordered: none < limited < default.
// A workspace's Network is the most any of its commands may use; a command's
// Network (ExecRequest.Network, "" = the workspace's) may be lower, never
// higher.

// Valid reports whether n is one of the three modes ("" is not).
func (n Network) Valid() bool {
	return n == NetworkNone || n == NetworkLimited || n == NetworkDefault
}

// Rank orders the modes: none 0, limited 1, default 2; anything else -1.
func (n Network) Rank() int {
	switch n {
	case NetworkNone:
		return 0
	case NetworkLimited:
		return 1
	case NetworkDefault:
		return 2
	}
	return -1
}

// Within reports whether n is a valid mode no wider than max.
func (n Network) Within(max Network) bool { return n.Valid() && max.Valid() && n.Rank() <= max.Rank() }

// NetworkModes lists the modes, narrowest first, for documentation and schemas.
var NetworkModes = []Network{NetworkNone, NetworkLimited, NetworkDefault}

// ValidateNetwork checks a mode given in field ("" allowed: the default
// applies). Errors: ErrInvalidArgument naming field.
func ValidateNetwork(field string, n Network) error {
	if n == "" || n.Valid() {
		return nil
	}
	return FieldError(field, "%s %q: want none, limited or default", field, clip(string(n)))
}

// Allow-list limits.
const (
	// MaxNetworkAllowEntries bounds WorkspaceRequest.NetworkAllow.
	MaxNetworkAllowEntries = 64
	// MaxNetworkAllowEntryBytes bounds one entry (a 253-byte name, "*." and a port range).
	MaxNetworkAllowEntryBytes = 270
)

// NetworkRule is one parsed entry of a `limited` allow-list
// (SANDBOX_NETWORK_ALLOW, WorkspaceRequest.NetworkAllow; docs/SECURITY.md
// "Network modes"): a host name, a "*." wildcard name, an IP address or a
// CIDR, with an optional port or port range.
//
// Forms: "example.com", "*.example.com" (every name below example.com, not
// example.com itself), "192.0.2.7", "10.0.0.0/8", "2001:db8::1",
// "2001:db8::/32"; each may end in ":PORT" or ":LOW-HIGH" (an IPv6 address
// or prefix then needs brackets: "[2001:db8::1]:443"). Without a port every
// port matches.
type NetworkRule struct {
	// Host is the lowercased host name (without the "*." of a wildcard);
	// empty for an address rule.
	Host string
	// Wildcard: Host's proper subdomains match, Host itself does not.
	Wildcard bool
	// Prefix is the address (a /32 or /128) or CIDR of an address rule;
	// invalid for a name rule.
	Prefix netip.Prefix
	// PortMin..PortMax is the port range; 0, 0 means every port.
	PortMin, PortMax uint16
}

// IsName reports whether r matches host names (not addresses).
func (r NetworkRule) IsName() bool { return r.Host != "" }

// String returns the canonical form of r (what ParseNetworkRule accepts).
func (r NetworkRule) String() string {
	var s string
	switch {
	case r.IsName() && r.Wildcard:
		s = "*." + r.Host
	case r.IsName():
		s = r.Host
	case r.Prefix.IsSingleIP():
		s = r.Prefix.Addr().String()
	default:
		s = r.Prefix.String()
	}
	if r.PortMin == 0 {
		return s
	}
	if !r.IsName() && r.Prefix.Addr().Is6() {
		s = "[" + s + "]"
	}
	if r.PortMin == r.PortMax {
		return s + ":" + strconv.Itoa(int(r.PortMin))
	}
	return s + ":" + strconv.Itoa(int(r.PortMin)) + "-" + strconv.Itoa(int(r.PortMax))
}

// MatchesPort reports whether port is in r's range.
func (r NetworkRule) MatchesPort(port uint16) bool {
	return r.PortMin == 0 || (port >= r.PortMin && port <= r.PortMax)
}

// MatchesName reports whether the (lowercased, dot-less at the end) host
// name is matched by a name rule.
func (r NetworkRule) MatchesName(host string) bool {
	if !r.IsName() {
		return false
	}
	if r.Wildcard {
		return strings.HasSuffix(host, "."+r.Host)
	}
	return host == r.Host
}

// MatchesAddr reports whether addr is inside an address rule.
func (r NetworkRule) MatchesAddr(addr netip.Addr) bool {
	return !r.IsName() && r.Prefix.Contains(addr.Unmap())
}

// ParseNetworkRule parses one allow-list entry (see NetworkRule). Errors:
// ErrInvalidArgument saying what is wrong.
func ParseNetworkRule(entry string) (NetworkRule, error) {
	bad := func(why string) (NetworkRule, error) {
		return NetworkRule{}, Errorf(ErrInvalidArgument, "network allow entry %q: %s", clip(entry), why)
	}
	if entry == "" {
		return bad("empty")
	}
	if len(entry) > MaxNetworkAllowEntryBytes {
		return bad("too long")
	}
	target, ports, why := splitRuleEntry(entry)
	if why != "" {
		return bad(why)
	}
	var r NetworkRule
	if ports != "" {
		min, max, ok := parsePortRange(ports)
		if !ok {
			return bad("the port must be 1-65535, or a range LOW-HIGH")
		}
		r.PortMin, r.PortMax = min, max
	}
	if why := r.setTarget(target); why != "" {
		return bad(why)
	}
	return r, nil
}

// splitRuleEntry splits an allow entry into its target and its port part
// ("" when none): "[v6]:ports", "host:ports" (exactly one ':'), or the
// whole entry (a bare IPv6 address or CIDR included); why says what is
// wrong ("" when nothing).
func splitRuleEntry(entry string) (target, ports, why string) {
	switch {
	case strings.HasPrefix(entry, "["):
		end := strings.IndexByte(entry, ']')
		if end < 0 {
			return "", "", "missing ']'"
		}
		target, ports = entry[1:end], entry[end+1:]
		if ports != "" {
			if !strings.HasPrefix(ports, ":") {
				return "", "", "want [address]:port"
			}
			ports = ports[1:]
			if ports == "" {
				return "", "", "empty port"
			}
		}
		if !strings.Contains(target, ":") {
			return "", "", "brackets are for IPv6 addresses"
		}
		return target, ports, ""
	case strings.Count(entry, ":") == 1:
		target, ports, _ = strings.Cut(entry, ":")
		if ports == "" {
			return "", "", "empty port"
		}
		return target, ports, ""
	}
	return entry, "", ""
}

// parsePortRange parses "PORT" or "LOW-HIGH" (each 1-65535, LOW <= HIGH).
func parsePortRange(ports string) (min, max uint16, ok bool) {
	lo, hi, isRange := strings.Cut(ports, "-")
	min, err1 := parsePort(lo)
	max = min
	var err2 error
	if isRange {
		max, err2 = parsePort(hi)
	}
	if err1 != nil || err2 != nil || max < min {
		return 0, 0, false
	}
	return min, max, true
}

// setTarget sets r's Prefix (a CIDR, masked, IPv4-mapped ones unmapped; or
// one IP address as a full-length prefix) or Host and Wildcard (a host
// name, lower-cased, without a trailing dot, "*." opening its subdomains)
// from target, and returns why it cannot ("" when it did): zones, a bad
// CIDR or IPv6 address, a misplaced "*", something that is no host name.
func (r *NetworkRule) setTarget(target string) string {
	if strings.Contains(target, "/") {
		p, err := netip.ParsePrefix(target)
		if err != nil {
			return "not a CIDR (e.g. 10.0.0.0/8)"
		}
		if p.Addr().Zone() != "" {
			return "zones are not allowed"
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		r.Prefix = p.Masked()
		return ""
	}
	if a, err := netip.ParseAddr(target); err == nil {
		if a.Zone() != "" {
			return "zones are not allowed"
		}
		a = a.Unmap()
		r.Prefix = netip.PrefixFrom(a, a.BitLen())
		return ""
	}
	if strings.Contains(target, ":") {
		return "not an IPv6 address"
	}
	host := strings.TrimSuffix(strings.ToLower(target), ".")
	wildcard := false
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		wildcard, host = true, rest
	}
	if !validHostName(host) {
		if host == "*" || strings.Contains(host, "*") {
			return `"*" may only open a name ("*.example.com"); to allow everything use the network mode default`
		}
		return "not a host name, IP address or CIDR"
	}
	if _, err := netip.ParseAddr(host); err == nil || allDigitsAndDots(host) {
		return "not a host name, IP address or CIDR"
	}
	r.Host, r.Wildcard = host, wildcard
	return ""
}

func parsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 || (len(s) > 1 && s[0] == '0') {
		return 0, Errorf(ErrInvalidArgument, "bad port")
	}
	return uint16(n), nil
}

// validHostName: labels of letters, digits, '-' and '_' (not at a label's
// ends for '-'), 1-63 bytes each, 253 in all.
func validHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

func allDigitsAndDots(s string) bool {
	return strings.Trim(s, "0123456789.") == ""
}

// ParseNetworkAllow parses a list of entries given in field (e.g.
// "network_allow"): at most MaxNetworkAllowEntries. Errors:
// ErrInvalidArgument naming field and the bad entry.
func ParseNetworkAllow(field string, entries []string) ([]NetworkRule, error) {
	if len(entries) > MaxNetworkAllowEntries {
		return nil, FieldError(field, "%s: %d entries, at most %d", field, len(entries), MaxNetworkAllowEntries)
	}
	out := make([]NetworkRule, 0, len(entries))
	for i, e := range entries {
		r, err := ParseNetworkRule(e)
		if err != nil {
			return nil, FieldError(field, "%s[%d]: %s", field, i, Message(err))
		}
		out = append(out, r)
	}
	return out, nil
}

// SplitNetworkAllow splits a list written in one string (SANDBOX_NETWORK_ALLOW,
// a Daytona list) at commas and white space, dropping empty items.
func SplitNetworkAllow(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' })
}

// CanonicalNetworkAllow parses entries (ParseNetworkAllow) and returns their
// canonical forms (NetworkRule.String) in order, each once; nil for none.
// Errors: ErrInvalidArgument naming field and the bad entry.
func CanonicalNetworkAllow(field string, entries []string) ([]string, error) {
	rules, err := ParseNetworkAllow(field, entries)
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	for _, r := range rules {
		if c := r.String(); !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out, nil
}
