package activities

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/egress"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// TestWorkspaceAllowCannotOpenTheHost: a workspace's own allow-list entries
// (from the acquire request, untrusted) may name hosts by name and public
// addresses, but never cover a non-public address — loopback, unspecified,
// RFC 1918 (the compose stack's Temporal at 172.18.0.5), CGNAT,
// link-local, ULA, a catch-all — or an address of the worker's host:
// those are refused with SandboxCommandRejected naming the entry, and
// change nothing; the worker's own list may name them, and an entry it
// covers is then accepted. Stored entries from before are left out of the
// runtime's policy.
func TestWorkspaceAllowCannotOpenTheHost(t *testing.T) {
	a := &Activities{NetworkAllow: []string{"127.0.0.1:8080", "*.mirror.example:443", "10.20.0.0/16:443", "172.18.0.5"},
		HostAddrs: func() []netip.Addr {
			return []netip.Addr{netip.MustParseAddr("203.0.113.3"), netip.MustParseAddr("2001:db8::7"), netip.MustParseAddr("127.0.0.1")}
		}}
	for _, ok := range [][]string{
		{"npm.corp.example:443", "192.0.2.7", "8.8.8.0/24:443"},
		{"127.0.0.1:8080"},       // the worker's own entry
		{"*.mirror.example:443"}, // the worker's own wildcard
		{"10.20.0.0/16:443", "10.20.1.2:443", "172.18.0.5:7233"}, // inside the worker's entries
		{"localhost:80"}, // a name: what it resolves to is checked by the proxy
		{"203.0.113.4", "2001:db8::8", "[2606:4700::1111]:443"},
	} {
		n, allow, err := a.resolvePolicy(sandboxapi.WorkspaceRequest{Network: sandboxapi.NetworkLimited, NetworkAllow: ok}, "", nil)
		require.NoError(t, err, "%v", ok)
		require.Equal(t, sandboxapi.NetworkLimited, n)
		require.Len(t, allow, len(ok))
	}
	for entry, why := range map[string]string{
		"127.0.0.1:5432":           "loopback",
		"127.0.0.0/8":              "loopback",
		"127.0.0.1":                "loopback",
		"[::1]:7233":               "loopback",
		"::ffff:127.0.0.1":         "loopback",
		"0.0.0.0/0":                "loopback",
		"::/0":                     "loopback",
		"0.0.0.0":                  "'this network'",
		"64:ff9b::7f00:1":          "NAT64",
		"2002:7f00:1::/48":         "6to4",
		"10.0.0.0/8":               "private addresses (RFC 1918), which are not public",
		"10.20.0.0/16":             "private addresses", // every port: wider than the worker's :443
		"172.18.0.0/16":            "private addresses",
		"172.18.0.6":               "private addresses",
		"192.168.1.1":              "private addresses",
		"fd00::/8":                 "unique local addresses",
		"100.64.1.1":               "carrier-grade NAT",
		"169.254.1.1":              "link-local",
		"203.0.113.0/24":           "203.0.113.3, an address of the worker's host",
		"203.0.113.3:22":           "203.0.113.3, an address of the worker's host",
		"2001:db8::/32":            "2001:db8::7, an address of the worker's host",
		"64:ff9b::cb00:7103":       "203.0.113.3",
		"*.corp.example":           "a wildcard would let the workspace's commands make the worker resolve names of their choosing below corp.example",
		"*.corp.example:443":       "DNS exfiltration",
		"npm.corp.example,0.0.0.0": "", // malformed: InvalidArgument below
	} {
		_, _, err := a.resolvePolicy(sandboxapi.WorkspaceRequest{Network: sandboxapi.NetworkLimited, NetworkAllow: []string{"pypi.org", entry}}, "", nil)
		if why == "" {
			require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, entry)
			continue
		}
		require.ErrorIs(t, err, sandboxapi.ErrCommandRejected, entry)
		require.Contains(t, err.Error(), "network_allow[1]", entry)
		require.Contains(t, err.Error(), why, entry)
		require.Contains(t, err.Error(), "SANDBOX_NETWORK_ALLOW", entry)
	}

	// Entries of its own stored before they were refused (a wildcard, a
	// private address or CIDR, a catch-all) never reach the proxy's policy;
	// those the worker's list covers do.
	got := a.runtimeAllow(sandboxapi.Workspace{NetworkAllow: []string{"*.corp.example", "npm.corp.example:443", "*.mirror.example:443",
		"172.18.0.0/16", "0.0.0.0/0", "::/0", "10.20.1.2:443", "100.64.1.1", "8.8.8.8:53"}})
	require.Equal(t, []string{"127.0.0.1:8080", "*.mirror.example:443", "10.20.0.0/16:443", "172.18.0.5", "npm.corp.example:443", "10.20.1.2:443", "8.8.8.8:53"}, got)
}

// TestWorkspaceNameToPrivateAddressIsRefused: through a real egress proxy
// serving the runtime list RuntimeSpecFor gives (runtimeAllow), a
// workspace's name entry that resolves to a private address (the compose
// stack's Temporal at 172.18.0.5) is refused at connect, even with that
// address stored in the workspace's own list; with the worker's
// SANDBOX_NETWORK_ALLOW naming the address, the same name connects.
func TestWorkspaceNameToPrivateAddressIsRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("temporal-frontend\n"))
			_ = c.Close()
		}
	}()
	temporal := netip.MustParseAddrPort("172.18.0.5:7233")
	p := egress.New(egress.Options{
		Lookup: func(_ context.Context, host string) ([]netip.Addr, error) {
			if host == "temporal.corp.example" {
				return []netip.Addr{temporal.Addr()}, nil
			}
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		},
		Dial: func(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
			if ap != temporal {
				return nil, errors.New("no route to host")
			}
			var d net.Dialer
			return d.DialContext(ctx, "tcp", ln.Addr().String())
		},
		OwnAddrs: func() []netip.Addr { return nil },
	})
	defer p.Close()
	sock := filepath.Join(t.TempDir(), "egress.sock")
	ws := sandboxapi.Workspace{ID: "ws-x", NetworkAllow: []string{"temporal.corp.example:7233", "172.18.0.5:7233", "172.16.0.0/12"}}
	connect := func(a *Activities, dest string) string {
		t.Helper()
		rules, err := egress.ParseRules(a.runtimeAllow(ws))
		require.NoError(t, err)
		require.NoError(t, p.Attach(egress.Policy{WorkspaceID: ws.ID, RuntimeID: "rt-x", Allow: rules}, sock))
		c, err := net.Dial("unix", sock)
		require.NoError(t, err)
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", dest, dest)
		b, _ := io.ReadAll(c)
		return string(b)
	}
	noHost := func() []netip.Addr { return nil }

	untrusted := &Activities{NetworkAllow: []string{"pypi.org:443"}, HostAddrs: noHost}
	out := connect(untrusted, "temporal.corp.example:7233")
	require.Contains(t, out, egress.DeniedStatus)
	require.Contains(t, out, "temporal.corp.example resolves to 172.18.0.5, a private address")
	require.NotContains(t, out, "temporal-frontend")
	out = connect(untrusted, "172.18.0.5:7233")
	require.Contains(t, out, egress.DeniedStatus)
	require.NotContains(t, out, "temporal-frontend")

	operator := &Activities{NetworkAllow: []string{"172.18.0.5:7233"}, HostAddrs: noHost}
	out = connect(operator, "temporal.corp.example:7233")
	require.Contains(t, out, "200 Connection established")
	require.Contains(t, out, "temporal-frontend")
}
