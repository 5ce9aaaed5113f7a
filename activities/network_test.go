package activities

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// TestWorkspaceAllowCannotOpenTheHost: a workspace's own allow-list entries
// (from the acquire request) may name private registries by name or
// address, but never cover a loopback or unspecified address or an address
// of the worker's host (a catch-all included): those are refused with
// SandboxCommandRejected naming the entry, and change nothing; the worker's
// own list may name them, and the same entry in a request is then accepted.
func TestWorkspaceAllowCannotOpenTheHost(t *testing.T) {
	a := &Activities{NetworkAllow: []string{"127.0.0.1:8080", "*.mirror.example:443"},
		HostAddrs: func() []netip.Addr {
			return []netip.Addr{netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("2001:db8::7"), netip.MustParseAddr("127.0.0.1")}
		}}
	for _, ok := range [][]string{
		{"npm.corp.example:443", "10.20.0.0/16:443", "192.0.2.7"},
		{"127.0.0.1:8080"},       // the worker's own entry
		{"*.mirror.example:443"}, // the worker's own wildcard
		{"localhost:80"},         // a name: what it resolves to is checked by the proxy
		{"10.1.2.4", "2001:db8::8"},
	} {
		n, allow, err := a.resolvePolicy(sandbox.WorkspaceRequest{Network: sandboxapi.NetworkLimited, NetworkAllow: ok}, "", nil)
		require.NoError(t, err, "%v", ok)
		require.Equal(t, sandboxapi.NetworkLimited, n)
		require.Len(t, allow, len(ok))
	}
	for entry, why := range map[string]string{
		"127.0.0.1:5432":           "loopback",
		"127.0.0.0/8":              "loopback",
		"[::1]:7233":               "loopback",
		"::ffff:127.0.0.1":         "loopback",
		"0.0.0.0/0":                "loopback",
		"::/0":                     "loopback",
		"0.0.0.0":                  "'this network'",
		"64:ff9b::7f00:1":          "NAT64",
		"2002:7f00:1::/48":         "6to4",
		"10.0.0.0/8":               "10.1.2.3, an address of the worker's host",
		"10.1.2.3:22":              "10.1.2.3, an address of the worker's host",
		"2001:db8::/32":            "2001:db8::7, an address of the worker's host",
		"64:ff9b::a01:203":         "10.1.2.3",
		"*.corp.example":           "a wildcard would let the workspace's commands make the worker resolve names of their choosing below corp.example",
		"*.corp.example:443":       "DNS exfiltration",
		"npm.corp.example,0.0.0.0": "", // malformed: InvalidArgument below
	} {
		_, _, err := a.resolvePolicy(sandbox.WorkspaceRequest{Network: sandboxapi.NetworkLimited, NetworkAllow: []string{"pypi.org", entry}}, "", nil)
		if why == "" {
			require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, entry)
			continue
		}
		require.ErrorIs(t, err, sandboxapi.ErrCommandRejected, entry)
		require.Contains(t, err.Error(), "network_allow[1]", entry)
		require.Contains(t, err.Error(), why, entry)
		require.Contains(t, err.Error(), "SANDBOX_NETWORK_ALLOW", entry)
	}

	// A wildcard of its own stored before they were refused never reaches the proxy's policy.
	got := a.runtimeAllow(sandbox.Workspace{NetworkAllow: []string{"*.corp.example", "npm.corp.example:443", "*.mirror.example:443"}})
	require.Equal(t, []string{"127.0.0.1:8080", "*.mirror.example:443", "npm.corp.example:443"}, got)
}
