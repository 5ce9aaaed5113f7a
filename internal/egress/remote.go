package egress

import (
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// RemoteAllow is an allow-list as a remote backend's own egress lists take
// it (docs/SECURITY.md "Network modes"): those lists have no ports and do
// their own name resolution, so
//
//   - a name entry becomes a domain ("example.com", "*.example.com"): the
//     backend decides what it reaches; its port is dropped (every port);
//   - an address entry becomes an IP or CIDR ("192.0.2.7", "10.0.0.0/8"),
//     its port dropped;
//   - an address entry covering a cloud metadata address (MetadataAddrs:
//     e.g. 0.0.0.0/0, 169.254.0.0/16) is left out, so that the list never
//     opens the metadata service; Dropped names it.
type RemoteAllow struct {
	Domains []string // names, in order, each once
	CIDRs   []string // addresses (a single address without a prefix length) and CIDRs
	// Widened lists the entries whose port was dropped; Dropped those left out.
	Widened, Dropped []string
}

// ForRemote maps canonical or user-written entries onto a RemoteAllow.
// Errors: ErrInvalidArgument for a malformed entry.
func ForRemote(entries []string) (RemoteAllow, error) {
	rules, err := ParseRules(entries)
	if err != nil {
		return RemoteAllow{}, err
	}
	var out RemoteAllow
	seen := map[string]bool{}
	add := func(list *[]string, s string) {
		if !seen[s] {
			seen[s] = true
			*list = append(*list, s)
		}
	}
	for _, r := range rules {
		if r.PortMin != 0 {
			out.Widened = append(out.Widened, r.String())
		}
		if r.IsName() {
			bare := r
			bare.PortMin, bare.PortMax = 0, 0
			add(&out.Domains, bare.String())
			continue
		}
		if coversMetadata(r) {
			out.Dropped = append(out.Dropped, r.String())
			continue
		}
		if r.Prefix.IsSingleIP() {
			add(&out.CIDRs, r.Prefix.Addr().String())
		} else {
			add(&out.CIDRs, r.Prefix.String())
		}
	}
	return out, nil
}

func coversMetadata(r sandboxapi.NetworkRule) bool {
	for _, m := range MetadataAddrs {
		if r.MatchesAddr(m) {
			return true
		}
	}
	return false
}
