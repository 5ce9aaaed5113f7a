package fake

import (
	"fmt"
	"slices"
)

// The organization's quotas as Daytona's validateOrganizationQuotas
// applies them to a create and to a start
// (apps/api/src/sandbox/services/sandbox.service.ts:170-325 of
// daytonaio/daytona v0.190.0): the usage of the other sandboxes plus the
// sandbox's own, checked CPU first, then memory, then disk, each refused
// with its message (lines 283-299; the messages' constants:
// apps/api/src/common/constants/error-messages.ts:6-9).

// dashboardURL is the dashboard Daytona's messages send users to
// (configuration dashboardUrl; Daytona's cloud serves it there).
const dashboardURL = "https://app.daytona.io/dashboard"

// computeStates are the states in which a sandbox's CPU and memory count
// (organization/constants/sandbox-states-consuming-compute.constant.ts,
// those the fake uses); diskStates those in which its disk counts: those
// and stopped and archiving (sandbox-states-consuming-disk.constant.ts).
var (
	computeStates = []string{stCreating, stRestoring, stStarted, stStarting, stStopping}
	diskStates    = append(slices.Clone(computeStates), stStopped, stArchiving)
)

// quotaLocked returns Daytona's refusal of b about to start consuming
// (created or started; exclude, when set, is not counted among the others:
// b itself on a start), "" when the quotas allow it. Called with s.mu held.
func (s *Server) quotaLocked(exclude, b *sbox) string {
	cpu, mem, disk := b.cpu, b.mem, b.disk
	for _, o := range s.sandboxes {
		if o == exclude || o == b {
			continue
		}
		if slices.Contains(computeStates, o.state) {
			cpu += o.cpu
			mem += o.mem
		}
		if slices.Contains(diskStates, o.state) {
			disk += o.disk
		}
	}
	upgrade := "To increase concurrency limits, upgrade your organization's Tier by visiting " + dashboardURL + "/limits."
	switch {
	case s.opts.MaxCPU > 0 && cpu > s.opts.MaxCPU:
		return fmt.Sprintf("Total CPU limit exceeded. Maximum allowed: %d.\n%s", s.opts.MaxCPU, upgrade)
	case s.opts.MaxMemoryGiB > 0 && mem > s.opts.MaxMemoryGiB:
		return fmt.Sprintf("Total memory limit exceeded. Maximum allowed: %dGiB.\n%s", s.opts.MaxMemoryGiB, upgrade)
	case s.opts.MaxDiskGiB > 0 && disk > s.opts.MaxDiskGiB:
		return fmt.Sprintf("Total disk limit exceeded. Maximum allowed: %dGiB.\n%s\n%s", s.opts.MaxDiskGiB,
			"Consider archiving your unused Sandboxes to free up available storage.", upgrade)
	}
	return ""
}
