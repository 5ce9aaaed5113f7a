package sandboxapi

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseNetworkRule(t *testing.T) {
	good := map[string]string{
		"Example.COM.":         "example.com",
		"*.example.com:443":    "*.example.com:443",
		"registry.test:80-90":  "registry.test:80-90",
		"192.0.2.7":            "192.0.2.7",
		"192.0.2.7:8080":       "192.0.2.7:8080",
		"10.1.2.3/8":           "10.0.0.0/8",
		"10.0.0.0/8:443":       "10.0.0.0/8:443",
		"2001:db8::1":          "2001:db8::1",
		"[2001:db8::1]:443":    "[2001:db8::1]:443",
		"2001:db8::/32":        "2001:db8::/32",
		"[2001:db8::/32]:1-2":  "[2001:db8::/32]:1-2",
		"::ffff:192.0.2.1":     "192.0.2.1",
		"my_host.internal:873": "my_host.internal:873",
		"localhost":            "localhost",
	}
	for in, want := range good {
		r, err := ParseNetworkRule(in)
		require.NoError(t, err, in)
		require.Equal(t, want, r.String(), in)
		again, err := ParseNetworkRule(r.String())
		require.NoError(t, err)
		require.Equal(t, r, again, "canonical form re-parses to the same rule")
	}
	bad := []string{"", "*", "*.", "*.*.example.com", "ex*ample.com", "example.com:", "example.com:0", "example.com:65536",
		"example.com:08", "example.com:90-80", "example.com:a", "-bad.com", "bad-.com", "a..b", "http://example.com",
		"example.com/path", "[example.com]:80", "2001:db8::1:443:", "10.0.0.0/33", "fe80::1%eth0",
		"1.2.3", "300.1.1.1", "exa mple.com", "user@example.com"}
	for _, in := range bad {
		_, err := ParseNetworkRule(in)
		require.Error(t, err, in)
		require.True(t, IsInvalidArgument(err), in)
	}
}

func TestNetworkRuleMatching(t *testing.T) {
	w, _ := ParseNetworkRule("*.example.com:443")
	require.True(t, w.MatchesName("a.example.com"))
	require.True(t, w.MatchesName("a.b.example.com"))
	require.False(t, w.MatchesName("example.com"))
	require.False(t, w.MatchesName("badexample.com"))
	require.True(t, w.MatchesPort(443))
	require.False(t, w.MatchesPort(80))
	c, _ := ParseNetworkRule("10.0.0.0/8")
	require.True(t, c.MatchesAddr(netip.MustParseAddr("10.9.8.7")))
	require.True(t, c.MatchesAddr(netip.MustParseAddr("::ffff:10.9.8.7")))
	require.False(t, c.MatchesAddr(netip.MustParseAddr("11.0.0.1")))
	require.False(t, c.MatchesName("10.9.8.7"))
	require.True(t, c.MatchesPort(1))
}

func TestNetworkModes(t *testing.T) {
	require.True(t, NetworkNone.Within(NetworkLimited))
	require.True(t, NetworkLimited.Within(NetworkLimited))
	require.False(t, NetworkDefault.Within(NetworkLimited))
	require.False(t, Network("").Within(NetworkDefault))
	require.False(t, Network("open").Valid())
	require.NoError(t, ValidateNetwork("network", ""))
	require.True(t, IsInvalidArgument(ValidateNetwork("network", "open")))
	_, err := ParseNetworkAllow("network_allow", []string{"ok.test", "no good"})
	require.ErrorContains(t, err, "network_allow[1]")
	require.Equal(t, []string{"a.test", "b.test:443", "10.0.0.0/8"}, SplitNetworkAllow(" a.test,b.test:443\n10.0.0.0/8,, "))
}

// TestSplitRuleEntryAndPortRange: the target/port split of an allow entry
// and the port range, each on its own.
func TestSplitRuleEntryAndPortRange(t *testing.T) {
	for entry, want := range map[string][3]string{
		"example.com":      {"example.com", "", ""},
		"example.com:443":  {"example.com", "443", ""},
		"[::1]:22":         {"::1", "22", ""},
		"::1":              {"::1", "", ""},
		"[::1]":            {"::1", "", ""},
		"[::1":             {"", "", "missing ']'"},
		"[::1]22":          {"", "", "want [address]:port"},
		"[::1]:":           {"", "", "empty port"},
		"[10.0.0.1]:1":     {"", "", "brackets are for IPv6 addresses"},
		"example.com:":     {"", "", "empty port"},
		"10.0.0.0/8:80-90": {"10.0.0.0/8", "80-90", ""},
	} {
		target, ports, why := splitRuleEntry(entry)
		require.Equal(t, want, [3]string{target, ports, why}, entry)
	}
	for ports, want := range map[string][2]uint16{"80": {80, 80}, "80-90": {80, 90}, "1-65535": {1, 65535}} {
		min, max, ok := parsePortRange(ports)
		require.True(t, ok, ports)
		require.Equal(t, want, [2]uint16{min, max}, ports)
	}
	for _, ports := range []string{"0", "90-80", "65536", "a", "80-", "-80"} {
		_, _, ok := parsePortRange(ports)
		require.False(t, ok, ports)
	}
}
