package sandboxapi

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestSessionSummaryNamesUserProjectRepoModeAndScope(t *testing.T) {
	edit := &WorkspaceRequest{UserID: "alice", ProjectID: "p1", RepoURL: "https://github.com/acme/app.git", Mode: ModeEdit, ConversationID: "c_42"}
	secret := *edit
	secret.RepoURL = "https://x-access-token:ghp_secret@github.com/acme/app.git"
	assert.NotContains(t, SessionSummary("ws-1", &secret)+SessionDetails("ws-1", &secret), "ghp_secret", "never a URL's credentials")
	assert.Equal(t, `alice · p1 · github.com/acme/app · edit · conversation c\_42`, SessionSummary("ws-1", edit))
	task := &WorkspaceRequest{UserID: "bob", ProjectID: "p1", RepoURL: "https://github.com/acme/app", Mode: ModeTask, TaskID: "t1"}
	assert.Equal(t, "bob · p1 · github.com/acme/app · task · task t1", SessionSummary("ws-2", task))
	ana := &WorkspaceRequest{UserID: "bob", ProjectID: "p1", RepoURL: "https://github.com/acme/app", Mode: ModeAnalysis}
	assert.Equal(t, "bob · p1 · github.com/acme/app · analysis · ref (default branch)", SessionSummary("ws-3", ana))
	assert.Equal(t, "workspace ws-4", SessionSummary("ws-4", nil))
	bad := &WorkspaceRequest{UserID: "u", ProjectID: "p", RepoURL: "not a url [x](javascript:alert(1))", Mode: ModeEdit, ConversationID: "c"}
	assert.Equal(t, "u · p · (invalid repository) · edit · conversation c", SessionSummary("ws-5", bad))

	ws := WorkspaceIDForKey(edit.Key())
	d := SessionDetails(ws, edit)
	for _, want := range []string{"**Workspace** " + ws, "**Workflow** sandbox-session/" + strings.TrimPrefix(ws, "ws-"), "**User** alice", "**Repository** github.com/acme/app", "**Branch** agent/" + TenantSegment("alice", "p1") + "/edits-c\\_42"} {
		assert.Contains(t, d, want)
	}
	assert.NotContains(t, SessionSummary("ws-1", edit), "https://")
}

func TestEscapeMarkdownKeepsValuesLiteralAndOnOneLine(t *testing.T) {
	in := "a*b_c`d[e](f)<g>|h~i\\j\nk\rl"
	out := EscapeMarkdown(in)
	assert.Equal(t, `a\*b\_c\`+"`"+`d\[e\](f)\<g\>\|h\~i\\j k l`, out)
	assert.False(t, strings.ContainsAny(out, "\n\r"))
	assert.Equal(t, "agent/edits-c1.x", EscapeMarkdown("agent/edits-c1.x"), "ordinary ids read as they are")
}

func TestRunSummaries(t *testing.T) {
	in := FanoutInput{ConversationWorkspaceID: "ws-" + strings.Repeat("a", 24), Tasks: []TaskSpec{{TaskID: "t1"}, {TaskID: "t2"}}, MaxParallel: 1}
	assert.Equal(t, "fan-out f1: 2 tasks (at most 1 at once) from workspace ws-"+strings.Repeat("a", 24), FanoutSummary("f1", in))
	assert.Equal(t, "eviction run (manual) · dry run: plans only · hosts h1, h2", EvictionRunSummary("manual", EvictionInput{DryRun: true, Hosts: []string{"h1", "h2"}}))
	assert.Equal(t, "eviction run (schedule sandbox-eviction)", EvictionRunSummary("schedule sandbox-eviction", EvictionInput{}))
}

// TestFanoutTaskTimeoutBounds: task_timeout_s is bounded in seconds, so a
// count that would overflow a time.Duration (and wrap below the bound) is
// refused like any other too large one.
func TestFanoutTaskTimeoutBounds(t *testing.T) {
	base := FanoutInput{ConversationWorkspaceID: "ws-" + strings.Repeat("a", 24), Tasks: []TaskSpec{{TaskID: "t1"}}}
	max := int(MaxTaskTimeout / time.Second)
	for _, c := range []struct {
		timeout int
		ok      bool
	}{{0, true}, {max, true}, {max + 1, false}, {-1, false}, {1 << 40, false}, {math.MaxInt64 / 1_000_000_000 * 2, false}} {
		in := base
		in.TaskTimeoutS = c.timeout
		err := in.Validate()
		if c.ok {
			assert.NoError(t, err, "task_timeout_s %d", c.timeout)
		} else {
			assert.ErrorIs(t, err, ErrInvalidArgument, "task_timeout_s %d", c.timeout)
		}
	}
}
