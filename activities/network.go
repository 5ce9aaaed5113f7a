package activities

import (
	"net/netip"
	"slices"

	"github.com/sandboxcore/sandboxcore/internal/egress"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// The network policy of workspaces (docs/SECURITY.md "Network modes"): set
// at acquire (WorkspaceRequest.Network and NetworkAllow, within the
// worker's NetworkMax), stored with the workspace, applied to its runtime
// (RuntimeSpecFor) and to each command (exec).

// defaultNetwork is the policy of a workspace that names none: the worker's
// RuntimeNetwork (SANDBOX_RUNTIME_NETWORK), limited when unset.
func (a *Activities) defaultNetwork() sandbox.Network {
	if a.RuntimeNetwork.Valid() {
		return a.RuntimeNetwork
	}
	return sandbox.NetworkLimited
}

// networkMax is the widest policy this worker grants (SANDBOX_NETWORK_MAX):
// NetworkMax, or when unset the wider of limited and the default.
func (a *Activities) networkMax() sandbox.Network {
	if a.NetworkMax.Valid() {
		return a.NetworkMax
	}
	if d := a.defaultNetwork(); d == sandbox.NetworkDefault {
		return d
	}
	return sandbox.NetworkLimited
}

// effectiveNetwork is the policy ws's commands get: its stored one (the
// default for a workspace recorded before policies existed), never above
// the worker's current maximum.
func (a *Activities) effectiveNetwork(ws sandbox.Workspace) sandbox.Network {
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
func (a *Activities) resolvePolicy(req sandbox.WorkspaceRequest, cur sandbox.Network, curAllow []string) (sandbox.Network, []string, error) {
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
		return "", nil, sandbox.Errorf(sandbox.ErrCommandRejected,
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

// checkWorkspaceAllow refuses a workspace's own entry (canonical) that
// would open the worker's own services — an address entry covering a
// loopback or unspecified address or an address of this host — or let its
// commands choose the names the worker resolves — a wildcard name entry
// (egress.WorkspaceEntryRefusal), unless the worker's own list has the same
// entry. Errors: ErrCommandRejected naming network_allow[i] and
// SANDBOX_NETWORK_ALLOW (docs/SECURITY.md "The egress proxy").
func (a *Activities) checkWorkspaceAllow(allow []string) error {
	var own []netip.Addr
	for i, e := range allow {
		if slices.Contains(a.NetworkAllow, e) {
			continue
		}
		r, err := sandboxapi.ParseNetworkRule(e)
		if err != nil {
			return sandboxapi.FieldError("network_allow", "network_allow[%d]: %s", i, sandboxapi.Message(err))
		}
		if r.IsName() && !r.Wildcard {
			continue
		}
		if own == nil && !r.IsName() {
			own = a.hostAddrs()
		}
		if why := egress.WorkspaceEntryRefusal(r, own); why != "" {
			what := "open the worker's host"
			if r.IsName() {
				what = "make the worker resolve names a command chooses"
			}
			return sandbox.Errorf(sandbox.ErrCommandRejected,
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

// runtimeAllow is a workspace's complete allow-list: the worker's entries,
// then its own, each once — except a wildcard entry of its own that the
// worker's list does not have (stored before checkWorkspaceAllow refused
// them): the worker never resolves names a command chooses below a zone
// only a workspace named.
func (a *Activities) runtimeAllow(ws sandbox.Workspace) []string {
	out := slices.Clone(a.NetworkAllow)
	for _, e := range ws.NetworkAllow {
		if slices.Contains(out, e) {
			continue
		}
		if r, err := sandboxapi.ParseNetworkRule(e); err == nil && r.Wildcard {
			continue
		}
		out = append(out, e)
	}
	return out
}

// commandNetwork checks the network an exec (or a background process) of
// ws asks for against its policy and the runtime's capability. Errors:
// ErrInvalidArgument for an unknown mode, ErrCommandRejected naming the
// policy for a mode above it, or for a mode other than the policy on a
// runtime that applies one network to all its commands.
func (a *Activities) commandNetwork(op string, ws sandbox.Workspace, asked sandbox.Network) error {
	if asked == "" {
		return nil
	}
	if err := sandboxapi.ValidateNetwork("network", asked); err != nil {
		return err
	}
	policy := a.effectiveNetwork(ws)
	if !asked.Within(policy) {
		return sandbox.Errorf(sandbox.ErrCommandRejected, "%s: network %s is above the network policy of workspace %s (%s): a command may use %s",
			op, asked, ws.ID, policy, upTo(policy))
	}
	if asked != policy && !a.Runtimes.Capabilities().PerCommandNetwork {
		return sandbox.Errorf(sandbox.ErrCommandRejected, "%s: the %s runtime applies the workspace's network policy (%s) to every command: a command cannot choose another network",
			op, a.Runtimes.Kind(), policy)
	}
	return nil
}

func upTo(max sandbox.Network) string {
	switch max {
	case sandbox.NetworkNone:
		return "none"
	case sandbox.NetworkLimited:
		return "none or limited"
	}
	return "none, limited or default"
}
