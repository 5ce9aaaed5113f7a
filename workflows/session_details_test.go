package workflows

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func TestGitDetails(t *testing.T) {
	assert.Equal(t, "**Detached at** 0123456789ab · **Head** unknown (send status) · **Dirty** unknown · **Unpushed** unknown",
		gitDetails("", "0123456789abcdef", wire.SessionFacts{}))
	dirty, unpushed := true, 2
	got := gitDetails("agent/x_y", "", wire.SessionFacts{Head: "fedcba9876543210", HeadFrom: "commit", Dirty: &dirty, DirtyFrom: "status",
		Unpushed: &unpushed, UnpushedFrom: "status", Stale: "exec"})
	assert.Equal(t, "**Branch** "+sandboxapi.EscapeMarkdown("agent/x_y")+" · **Head** fedcba987654 (commit) · **Dirty** yes (status) · **Unpushed** 2 (status)"+
		" — exec ran since: send status for fresh values", got)
}

func TestDetailsNextIdle(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s := &session{lastActivity: at}
	s.settings.IdleStop, s.settings.IdleClose = 20*time.Minute, 6*time.Hour
	assert.Empty(t, s.detailsNextIdle(), "no workspace yet")
	s.ws = &sandboxapi.Workspace{}
	assert.Equal(t, "**Next idle deadline** session closes at 2026-12-01T16:00:00Z (unless an operation comes first)", s.detailsNextIdle())
	s.runtimeRunning = true
	assert.True(t, strings.HasPrefix(s.detailsNextIdle(), "**Next idle deadline** runtime hibernates at 2026-12-01T10:20:00Z · session closes at"))
	s.phase = phaseDormant
	assert.Empty(t, s.detailsNextIdle(), "a dormant session has no deadline")
	s.phase, s.ending = phaseActive, true
	assert.Empty(t, s.detailsNextIdle(), "nor a released one")
}

func TestDetailsStateLine(t *testing.T) {
	s := &session{state: sandboxapi.StateReleased, phase: phaseDormant, inFlight: 2}
	s.settings.RuntimeKind = "docker"
	s.ws = &sandboxapi.Workspace{HostID: "h1"}
	assert.Equal(t, "**State** released (dormant: the next operation resumes the workspace) · **Runtime** docker, stopped · **Host** h1 · **In flight** 2", s.detailsState())
}
