package procexec

import (
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// RuntimeNetwork returns a runtime's network policy: spec.Network, or
// limited when it is "" (the default of SANDBOX_RUNTIME_NETWORK).
func RuntimeNetwork(spec sandbox.RuntimeSpec) sandboxapi.Network {
	if spec.Network == "" {
		return sandboxapi.NetworkLimited
	}
	return spec.Network
}

// CommandNetwork returns the network a command of op ("exec",
// "process_start") runs with: asked, or policy when asked is "". Errors:
// sandboxapi.ErrInvalidArgument for an unknown mode, sandboxapi.ErrCommandRejected
// naming the policy for a mode above it (docs/SECURITY.md "Network modes").
func CommandNetwork(op string, policy, asked sandboxapi.Network) (sandboxapi.Network, error) {
	if asked == "" {
		return policy, nil
	}
	if !asked.Valid() {
		return "", sandboxapi.FieldError("network", "%s: network %q: want none, limited or default", op, sandboxapi.Clip(string(asked), 32))
	}
	if !asked.Within(policy) {
		return "", sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "%s: network %s is above the workspace's network policy (%s): a command may use %s", op, asked, policy, allowedUpTo(policy))
	}
	return asked, nil
}

func allowedUpTo(policy sandboxapi.Network) string {
	switch policy {
	case sandboxapi.NetworkNone:
		return "none only"
	case sandboxapi.NetworkLimited:
		return "none or limited"
	}
	return "none, limited or default"
}

// NoProxy is NO_PROXY in the limited network: the sandbox's own loopback
// is reached directly.
const NoProxy = "localhost,127.0.0.1,::1"

// ProxyEnv returns the variables that point ordinary tools (curl, git, npm,
// pip, go, apt, …) at the egress forwarder listening on addr (host:port) in
// a limited runtime: HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and NO_PROXY, each
// also in lower case (docs/SECURITY.md "Network modes").
func ProxyEnv(addr string) map[string]string {
	u := "http://" + addr
	return map[string]string{
		"HTTP_PROXY": u, "HTTPS_PROXY": u, "ALL_PROXY": u, "NO_PROXY": NoProxy,
		"http_proxy": u, "https_proxy": u, "all_proxy": u, "no_proxy": NoProxy,
	}
}

// SingleNetwork checks the network a command of op asks for on a runtime of
// kind that applies one network, its spec's, to every command (the remote
// runtimes: RuntimeCapabilities.PerCommandNetwork false). Errors: those of
// CommandNetwork, and sandboxapi.ErrCommandRejected for any mode but the
// runtime's own.
func SingleNetwork(kind, op string, spec *sandbox.RuntimeSpec, asked sandboxapi.Network) error {
	if asked == "" || spec == nil {
		return nil
	}
	policy := RuntimeNetwork(*spec)
	if _, err := CommandNetwork(op, policy, asked); err != nil {
		return err
	}
	if asked != policy {
		return sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "%s: the %s runtime applies the workspace's network policy (%s) to every command: a command cannot choose another network", op, kind, policy)
	}
	return nil
}
