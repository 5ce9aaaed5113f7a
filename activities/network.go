package activities

import (
	"net/netip"

	"github.com/sandboxcore/sandboxcore/internal/egress"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// The network policy of workspaces (docs/SECURITY.md "Network modes"): set
// at acquire (WorkspaceRequest.Network and NetworkAllow, within the
// worker's NetworkMax), stored with the workspace, applied to its runtime
// (runtimeSpecFor) and to each command (exec).

// defaultNetwork is the policy of a workspace that names none: the worker's
// RuntimeNetwork (SANDBOX_RUNTIME_NETWORK), limited when unset.
func (a *Activities) defaultNetwork() sandboxapi.Network {
	if a.RuntimeNetwork.Valid() {
		return a.RuntimeNetwork
	}
	return sandboxapi.NetworkLimited
}

// networkMax is the widest policy this worker grants (SANDBOX_NETWORK_MAX):
// NetworkMax, or when unset the wider of limited and the default.
func (a *Activities) networkMax() sandboxapi.Network {
	if a.NetworkMax.Valid() {
		return a.NetworkMax
	}
	if d := a.defaultNetwork(); d == sandboxapi.NetworkDefault {
		return d
	}
	return sandboxapi.NetworkLimited
}

// effectiveNetwork is the policy ws's commands get: its stored one (the
// default for a workspace recorded before policies existed), never above
// the worker's current maximum.
func (a *Activities) effectiveNetwork(ws sandboxapi.Workspace) sandboxapi.Network {
	n := ws.Network
	if !n.Valid() {
		n = a.defaultNetwork()
	}
	if max := a.networkMax(); !n.Within(max) {
		return max
	}
	return n
}

// resolvePolicy applies req's network fields to a workspace whose stored
// policy is (cur, curAllow) (cur "" for a new workspace): a request that
// names neither keeps them (a new workspace gets the default and no
// entries); one that names either replaces both. Entries are stored in
// canonical form, without duplicates. Errors: ErrInvalidArgument for a bad
// mode or entry, ErrCommandRejected naming SANDBOX_NETWORK_MAX for a mode
// above the worker's maximum.
func (a *Activities) resolvePolicy(req sandboxapi.WorkspaceRequest, cur sandboxapi.Network, curAllow []string) (sandboxapi.Network, []string, error) {
	if req.Network == "" && req.NetworkAllow == nil {
		if cur == "" {
			return a.defaultNetwork(), nil, nil
		}
		return cur, curAllow, nil
	}
	n := req.Network
	if n == "" {
		n = cur
		if n == "" {
			n = a.defaultNetwork()
		}
	}
	if err := sandboxapi.ValidateNetwork("network", n); err != nil {
		return "", nil, err
	}
	if max := a.networkMax(); !n.Within(max) {
		return "", nil, sandboxapi.Errorf(sandboxapi.ErrCommandRejected,
			"network %s is above this worker's network policy maximum (SANDBOX_NETWORK_MAX=%s): ask for %s", n, max, upTo(max))
	}
	allow, err := sandboxapi.CanonicalNetworkAllow("network_allow", req.NetworkAllow)
	if err != nil {
		return "", nil, err
	}
	if err := a.checkWorkspaceAllow(allow); err != nil {
		return "", nil, err
	}
	return n, allow, nil
}

// checkWorkspaceAllow refuses a workspace's own entry (canonical: from the
// acquire request, untrusted) that the worker's list does not cover and
// that would open a non-public destination — an address entry covering a
// loopback, unspecified, private (RFC 1918, fc00::/7), CGNAT, link-local
// or any other address egress.Classify reports as non-public, or an
// address of this host — or let its commands choose the names the worker
// resolves — a wildcard name entry (egress.WorkspaceEntryCheck). Errors:
// ErrCommandRejected naming network_allow[i] and SANDBOX_NETWORK_ALLOW
// (docs/SECURITY.md "The egress proxy").
func (a *Activities) checkWorkspaceAllow(allow []string) error {
	ops, _ := egress.ParseRules(a.NetworkAllow)
	for i, e := range allow {
		r, err := sandboxapi.ParseNetworkRule(e)
		if err != nil {
			return sandboxapi.FieldError("network_allow", "network_allow[%d]: %s", i, sandboxapi.Message(err))
		}
		if why := egress.WorkspaceEntryCheck(ops, r, a.hostAddrs); why != "" {
			what := "open the worker's host or a non-public address"
			if r.IsName() {
				what = "make the worker resolve names a command chooses"
			}
			return sandboxapi.Errorf(sandboxapi.ErrCommandRejected,
				"network_allow[%d] %s: %s; a workspace's own entries cannot %s (only the worker's SANDBOX_NETWORK_ALLOW can)", i, e, why, what)
		}
	}
	return nil
}

// hostAddrs is HostAddrs, or this host's interface addresses.
func (a *Activities) hostAddrs() []netip.Addr {
	if a.HostAddrs != nil {
		return a.HostAddrs()
	}
	return egress.HostAddrs()
}

// runtimeAllow is a workspace's complete allow-list (egress.CombineAllow):
// the worker's entries, then its own, each once — except an entry of its
// own that checkWorkspaceAllow would refuse now (stored before it refused
// wildcards and non-public addresses, or accepted while the host had other
// addresses): the worker never resolves names a command chooses below a
// zone only a workspace named, and only the worker's list opens a
// non-public address, to a name or given literally.
func (a *Activities) runtimeAllow(ws sandboxapi.Workspace) []string {
	out, dropped := egress.CombineAllow(a.NetworkAllow, ws.NetworkAllow, a.hostAddrs)
	if len(dropped) > 0 {
		a.log().Warn("workspace network_allow entries left out: only SANDBOX_NETWORK_ALLOW may open them", "workspace", ws.ID, "entries", dropped)
	}
	return out
}

// commandNetwork checks the network an exec (or a background process) of
// ws asks for against its policy and the runtime's capability. Errors:
// ErrInvalidArgument for an unknown mode, ErrCommandRejected naming the
// policy for a mode above it, or for a mode other than the policy on a
// runtime that applies one network to all its commands.
func (a *Activities) commandNetwork(op string, ws sandboxapi.Workspace, asked sandboxapi.Network) error {
	if asked == "" {
		return nil
	}
	if err := sandboxapi.ValidateNetwork("network", asked); err != nil {
		return err
	}
	policy := a.effectiveNetwork(ws)
	if !asked.Within(policy) {
		return sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "%s: network %s is above the network policy of workspace %s (%s): a command may use %s",
			op, asked, ws.ID, policy, upTo(policy))
	}
	if asked != policy && !a.Runtimes.Capabilities().PerCommandNetwork {
		return sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "%s: the %s runtime applies the workspace's network policy (%s) to every command: a command cannot choose another network",
			op, a.Runtimes.Kind(), policy)
	}
	return nil
}

func upTo(max sandboxapi.Network) string {
	switch max {
	case sandboxapi.NetworkNone:
		return "none"
	case sandboxapi.NetworkLimited:
		return "none or limited"
	}
	return "none, limited or default"
}
