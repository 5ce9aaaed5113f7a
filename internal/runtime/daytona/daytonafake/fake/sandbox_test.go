package fake

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNewSandboxDefaults(t *testing.T) {
	now := time.Unix(1700000000, 0)
	b := newSandbox(createRequest{}, "id-1", DefaultDiskGiB, now)
	require.Equal(t, "id-1", b.name, "named by its id")
	require.Equal(t, "us", b.target)
	require.Equal(t, "daytonaio/sandbox:0.190.0", b.snapshot)
	require.Equal(t, 1, b.cpu)
	require.Equal(t, 1, b.mem)
	require.Equal(t, 15, b.autoStop)
	require.Equal(t, 7*24*60, b.autoArchive)
	require.Equal(t, -1, b.autoDelete)
	require.Equal(t, stCreating, b.state)
	require.Equal(t, stStarted, b.desired)
	require.Equal(t, now, b.created)

	zero, neg, ten := 0, -5, 10
	b = newSandbox(createRequest{Name: "n", Target: "eu", CPU: 4, AutoStopInterval: &zero, AutoArchiveInterval: &neg, AutoDeleteInterval: &ten,
		BuildInfo: &struct {
			DockerfileContent string `json:"dockerfileContent"`
		}{}}, "id-2", 3, now)
	require.Equal(t, "n", b.name)
	require.Equal(t, "eu", b.target)
	require.Equal(t, "", b.snapshot, "a built sandbox has no default snapshot")
	require.Equal(t, 4, b.cpu)
	require.Equal(t, 0, b.autoStop, "zero turns auto-stop off")
	require.Equal(t, 7*24*60, b.autoArchive, "a non-positive interval keeps the default")
	require.Equal(t, 10, b.autoDelete)
	require.Equal(t, 3, b.disk)
}

func TestNetworkMode(t *testing.T) {
	require.Equal(t, "bridge", networkMode(createRequest{}))
	require.Equal(t, "none", networkMode(createRequest{NetworkBlockAll: true, NetworkAllowList: "10.0.0.0/8"}))
	require.Equal(t, "limited", networkMode(createRequest{NetworkAllowList: "10.0.0.0/8"}))
	require.Equal(t, "limited", networkMode(createRequest{DomainAllowList: "example.com"}))
}

// TestCheckCreate: the create rules of Daytona's createSandbox
// (apps/api/src/sandbox/controllers/sandbox.controller.ts:284-302, v0.190.0),
// with its messages.
func TestCheckCreate(t *testing.T) {
	build := &struct {
		DockerfileContent string `json:"dockerfileContent"`
	}{DockerfileContent: "FROM x\n"}
	require.Equal(t, "", checkCreate(createRequest{}))
	require.Equal(t, "", checkCreate(createRequest{Snapshot: "s"}))
	for _, req := range []createRequest{{CPU: 1}, {Memory: 2}, {Disk: 3}, {GPU: 1}, {Snapshot: "s", CPU: 2}} {
		require.Equal(t, "Cannot specify Sandbox resources when using a snapshot", checkCreate(req), "%+v", req)
	}
	require.Equal(t, "", checkCreate(createRequest{BuildInfo: build, CPU: 2, Memory: 4, Disk: 10}))
	require.Equal(t, "Cannot specify a snapshot when using a build info entry", checkCreate(createRequest{BuildInfo: build, Snapshot: "s"}))
}

// TestCheckAllowLists: Daytona's validation of the network lists
// (apps/api/src/sandbox/utils/network-validation.util.ts, v0.190.0), with
// its messages.
func TestCheckAllowLists(t *testing.T) {
	ok := createRequest{NetworkAllowList: "10.0.0.0/8, 192.0.2.7/32", DomainAllowList: "example.com,*.corp.example"}
	require.Equal(t, "", checkAllowLists(ok))
	require.Equal(t, `Invalid IP address: "2001:db8::1" in network "2001:db8::1/128". Must be a valid IPv4 address`,
		checkAllowLists(createRequest{NetworkAllowList: "2001:db8::1/128"}))
	require.Equal(t, `Invalid network format: "192.0.2.7". Missing CIDR prefix length (e.g., /24)`,
		checkAllowLists(createRequest{NetworkAllowList: "192.0.2.7"}))
	require.Equal(t, "Invalid CIDR prefix length: 10.0.0.0/33. Prefix must be between 0 and 32",
		checkAllowLists(createRequest{NetworkAllowList: "10.0.0.0/33"}))
	var nets, doms []string
	for i := range 11 {
		nets = append(nets, "10.0."+strconv.Itoa(i)+".0/24")
		doms = append(doms, "d"+strconv.Itoa(i)+".example.com")
	}
	require.Equal(t, "", checkAllowLists(createRequest{NetworkAllowList: strings.Join(nets[:10], ","), DomainAllowList: strings.Join(doms[:10], ",")}))
	require.Equal(t, "Network allow list cannot contain more than 10 networks", checkAllowLists(createRequest{NetworkAllowList: strings.Join(nets, ",")}))
	require.Equal(t, "Domain allow list cannot contain more than 10 domains", checkAllowLists(createRequest{DomainAllowList: strings.Join(doms, ",")}))
	require.Equal(t, `Invalid domain: "bad_domain". Must be a valid domain name`, checkAllowLists(createRequest{DomainAllowList: "bad_domain"}))
}

// TestQuotas: validateOrganizationQuotas's order and messages
// (apps/api/src/sandbox/services/sandbox.service.ts:283-299,
// apps/api/src/common/constants/error-messages.ts:6-9, v0.190.0), with
// CPU and memory counted only in the states consuming compute and disk
// also in stopped ones.
func TestQuotas(t *testing.T) {
	s := &Server{opts: Options{MaxCPU: 2, MaxMemoryGiB: 4, MaxDiskGiB: 20}, sandboxes: map[string]*sbox{}}
	running := &sbox{state: stStarted, cpu: 1, mem: 2, disk: 10}
	stopped := &sbox{state: stStopped, cpu: 1, mem: 2, disk: 5}
	archived := &sbox{state: stArchived, cpu: 4, mem: 8, disk: 50}
	s.sandboxes["a"], s.sandboxes["b"], s.sandboxes["c"] = running, stopped, archived
	require.Equal(t, "", s.quotaLocked(nil, &sbox{cpu: 1, mem: 2, disk: 5}))
	require.Equal(t, "Total CPU limit exceeded. Maximum allowed: 2.\nTo increase concurrency limits, upgrade your organization's Tier by visiting https://app.daytona.io/dashboard/limits.",
		s.quotaLocked(nil, &sbox{cpu: 2, mem: 1, disk: 1}))
	require.Equal(t, "Total memory limit exceeded. Maximum allowed: 4GiB.\nTo increase concurrency limits, upgrade your organization's Tier by visiting https://app.daytona.io/dashboard/limits.",
		s.quotaLocked(nil, &sbox{cpu: 1, mem: 3, disk: 1}))
	require.Equal(t, "Total disk limit exceeded. Maximum allowed: 20GiB.\nConsider archiving your unused Sandboxes to free up available storage.\nTo increase concurrency limits, upgrade your organization's Tier by visiting https://app.daytona.io/dashboard/limits.",
		s.quotaLocked(nil, &sbox{cpu: 1, mem: 1, disk: 6}))
	// Starting the stopped one: its own usage is not counted twice.
	require.Equal(t, "", s.quotaLocked(stopped, stopped))
}
