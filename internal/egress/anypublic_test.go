package egress

import (
	"context"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAnyPublicReachesOnlyPublicDestinations: the default network's policy
// (AnyPublic) lets a command reach any public name or address on any port,
// and never loopback, a private or link-local address (the compose stack's
// Temporal container, the embedded frontend on 127.0.0.1), the worker
// host's own addresses or a metadata address, whether given by name or
// literally — unless the operator's allow-list names them.
func TestAnyPublicReachesOnlyPublicDestinations(t *testing.T) {
	names := map[string]string{
		"registry.example": "93.184.216.34",
		"sibling.example":  "172.18.0.5",
		"loop.example":     "127.0.0.1",
		"self.example":     "93.184.216.99",
		"meta.example":     "169.254.169.254",
	}
	p := New(Options{
		Lookup: func(_ context.Context, host string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr(names[host])}, nil
		},
		OwnAddrs: func() []netip.Addr { return []netip.Addr{netip.MustParseAddr("93.184.216.99")} },
	})
	e := &endpoint{p: p}
	pol := Policy{WorkspaceID: "ws-1", RuntimeID: "rt-1", AnyPublic: true}
	for _, c := range []struct {
		host    string
		port    uint16
		allowed bool
	}{
		{"registry.example", 443, true},
		{"registry.example", 22, true},
		{"93.184.216.34", 8080, true},
		{"sibling.example", 7233, false},
		{"172.18.0.5", 7233, false},
		{"loop.example", 7233, false},
		{"127.0.0.1", 8233, false},
		{"::1", 7233, false},
		{"self.example", 9090, false},
		{"93.184.216.99", 9090, false},
		{"meta.example", 80, false},
		{"169.254.169.254", 80, false},
		{"10.1.2.3", 5432, false},
	} {
		_, d, err := e.decide(context.Background(), pol, c.host, c.port)
		require.NoError(t, err, c.host)
		if c.allowed {
			require.Nil(t, d, "%s:%d", c.host, c.port)
		} else {
			require.NotNil(t, d, "%s:%d must be refused", c.host, c.port)
		}
	}
	// The operator's entry opens a private address; the limited policy
	// (no AnyPublic) reaches only its list.
	rules, err := ParseRules([]string{"172.18.0.5:7233"})
	require.NoError(t, err)
	_, d, err := e.decide(context.Background(), Policy{AnyPublic: true, Allow: rules}, "172.18.0.5", 7233)
	require.NoError(t, err)
	require.Nil(t, d)
	_, d, err = e.decide(context.Background(), Policy{}, "registry.example", 443)
	require.NoError(t, err)
	require.NotNil(t, d, "limited: a name not in the list is refused")
}

// TestControlPlaneIsNeverReached: the service's own endpoints
// (Options.ControlPlane) are refused by name and by address, even when
// public (a Temporal Cloud frontend) and even when an operator's allow-list
// entry covers them; other ports of the same addresses are not.
func TestControlPlaneIsNeverReached(t *testing.T) {
	p := New(Options{
		Lookup: func(_ context.Context, host string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr(map[string]string{"temporal.example": "93.184.216.40", "alias.example": "93.184.216.40"}[host])}, nil
		},
		OwnAddrs:     func() []netip.Addr { return nil },
		ControlPlane: []string{"temporal.example:7233", ":9464", "93.184.216.50:5432"},
	})
	e := &endpoint{p: p}
	rules, err := ParseRules([]string{"93.184.216.50:5432", "127.0.0.1:9464", "temporal.example:7233"})
	require.NoError(t, err)
	for _, pol := range []Policy{{AnyPublic: true}, {Allow: rules}, {AnyPublic: true, Allow: rules}} {
		for _, c := range []struct {
			host    string
			port    uint16
			allowed bool
		}{
			{"temporal.example", 7233, false},
			{"alias.example", 7233, false},
			{"93.184.216.40", 7233, false},
			{"93.184.216.50", 5432, false},
			{"127.0.0.1", 9464, false},
			{"temporal.example", 443, pol.AnyPublic},
			{"93.184.216.40", 8080, pol.AnyPublic},
		} {
			_, d, err := e.decide(context.Background(), pol, c.host, c.port)
			require.NoError(t, err)
			require.Equal(t, c.allowed, d == nil, "%+v: %s:%d (%v)", pol, c.host, c.port, d)
		}
	}
}
