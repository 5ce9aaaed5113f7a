package tests

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// lines20 is "line 1\n" … "line 20\n" with the given lines replaced.
func lines20(repl map[int]string) string {
	var b strings.Builder
	for i := 1; i <= 20; i++ {
		if s, ok := repl[i]; ok {
			b.WriteString(s + "\n")
			continue
		}
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

// overlapUpstream is a repository whose trunk holds big.txt and mv.txt (20 lines each).
func overlapUpstream(t *testing.T) string {
	up := gittest.NewRepo(t, "trunk")
	gittest.Commit(t, up, "big.txt", lines20(nil), "big")
	gittest.Commit(t, up, "mv.txt", lines20(nil), "mv")
	return gittest.FileURL(up)
}

func taskRequest(user, project, task, url string) sandboxapi.WorkspaceRequest {
	return sandboxapi.WorkspaceRequest{UserID: user, ProjectID: project, RepoURL: url, Mode: sandboxapi.ModeTask, TaskID: task}
}

// Three workspaces of one user and project edit the same file in
// intersecting and disjoint ranges, one renames a file the first edits;
// another user's workspace on the same repository edits the same lines and
// is never listed. Through the Go SDK, then the CLI (--json and text).
func TestOverlapsOfWorkspacesOfOneRepository(t *testing.T) {
	h := startHost(t, "overlaps")
	url := overlapUpstream(t)
	ctx := ctxFor(t, 3*time.Minute)
	user, other := uniq(t, "u"), uniq(t, "v")
	acquire := func(req sandboxapi.WorkspaceRequest) (*sandboxclient.Session, sandboxapi.Handle) {
		s, hd, err := h.client.Acquire(ctx, req)
		require.NoError(t, err)
		return s, hd
	}
	a, ha := acquire(editRequest(user, "p", "conv-a", url))
	b, hb := acquire(taskRequest(user, "p", "b", url))
	c, hc := acquire(taskRequest(user, "p", "c", url))
	d, _ := acquire(editRequest(other, "p", "conv-d", url))
	e, _ := acquire(editRequest(user, "another-project", "conv-e", url))

	write := func(s *sandboxclient.Session, path, content string) {
		require.NoError(t, s.WriteFile(ctx, path, []byte(content), 0))
	}
	write(a, "big.txt", lines20(map[int]string{2: "a2", 3: "a3"}))
	write(a, "mv.txt", lines20(map[int]string{2: "a2"}))
	_, err := a.Commit(ctx, sandboxapi.CommitRequest{Message: "a's committed part", Paths: []string{"mv.txt"}})
	require.NoError(t, err)
	write(b, "big.txt", lines20(map[int]string{15: "b15"}))
	res, err := b.Exec(ctx, sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "mkdir -p moved && mv mv.txt moved/mv.txt && sed -i 's/^line 18$/b18/' moved/mv.txt"}})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, string(res.Stderr))
	write(c, "big.txt", lines20(map[int]string{4: "c4"}))
	write(d, "big.txt", lines20(map[int]string{3: "d3"}))
	write(e, "big.txt", lines20(map[int]string{3: "e3"}))

	got, err := a.Overlaps(ctx)
	require.NoError(t, err)
	assert.Equal(t, ha.WorkspaceID, got.WorkspaceID)
	assert.Equal(t, 2, got.Changed)
	assert.Equal(t, 2, got.Checked, "b and c; never the other user's or project's")
	assert.Empty(t, got.NotChecked)
	require.Len(t, got.Overlaps, 2, "%+v", got.Overlaps)
	high, medium := got.Overlaps[0], got.Overlaps[1]
	assert.Equal(t, hc.WorkspaceID, high.WorkspaceID)
	assert.Equal(t, sandboxapi.RiskHigh, high.Risk)
	assert.Equal(t, 1, high.Intersecting)
	require.Len(t, high.Files, 1)
	assert.Equal(t, sandboxapi.OverlapFile{Path: "big.txt", ThisChange: "modified", OtherChange: "modified", RangesIntersect: true, Comparable: true,
		ThisRanges: []sandboxapi.LineRange{{Start: 2, Count: 2}}, OtherRanges: []sandboxapi.LineRange{{Start: 4, Count: 1}}}, high.Files[0])
	assert.Equal(t, hb.WorkspaceID, medium.WorkspaceID)
	assert.Equal(t, sandboxapi.RiskMedium, medium.Risk)
	assert.Equal(t, "task", string(medium.Mode))
	assert.Equal(t, "b", medium.TaskID)
	require.Len(t, medium.Files, 2)
	assert.Equal(t, "big.txt", medium.Files[0].Path)
	assert.False(t, medium.Files[0].RangesIntersect)
	assert.Equal(t, sandboxapi.OverlapFile{Path: "mv.txt", OtherPath: "moved/mv.txt", ThisChange: "modified", OtherChange: "renamed", Comparable: true,
		ThisRanges: []sandboxapi.LineRange{{Start: 2, Count: 1}}, OtherRanges: []sandboxapi.LineRange{{Start: 18, Count: 1}}}, medium.Files[1])
	for _, o := range got.Overlaps {
		assert.False(t, o.CheckedAt.IsZero())
	}

	// A change to c is seen at once (the summary kept of it is not reused).
	write(c, "big.txt", lines20(nil))
	again, err := a.Overlaps(ctx)
	require.NoError(t, err)
	require.Len(t, again.Overlaps, 1)
	assert.Equal(t, hb.WorkspaceID, again.Overlaps[0].WorkspaceID)

	// The session's current details count them.
	assert.Eventually(t, func() bool {
		return strings.Contains(currentDetails(t, a.WorkflowID()), "**SandboxOverlaps** 1 (0 high risk)")
	}, 10*time.Second, 100*time.Millisecond, currentDetails(t, a.WorkflowID()))

	// The CLI: JSON is the result, text one line per overlap and file.
	bin := buildCLI(t)
	r := runCLI(t, bin, h.Config.TaskQueue, "", "overlaps", ha.WorkspaceID, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var fromCLI sandboxapi.OverlapsResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &fromCLI))
	require.Len(t, fromCLI.Overlaps, 1)
	assert.Equal(t, hb.WorkspaceID, fromCLI.Overlaps[0].WorkspaceID)
	r = runCLI(t, bin, h.Config.TaskQueue, "", "overlaps", ha.WorkspaceID)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "medium "+hb.WorkspaceID)
	assert.Contains(t, r.stdout, "disjoint mv.txt (this: modified, other: renamed)")
}

// A merge preview through the session equals what the merge then does, for
// branches and workspaces; another user's branch or workspace is missing.
func TestMergePreviewThroughTheSessionEqualsTheMerge(t *testing.T) {
	h := startHost(t, "mergepreview")
	url := overlapUpstream(t)
	ctx := ctxFor(t, 3*time.Minute)
	user, other := uniq(t, "u"), uniq(t, "v")
	conv, hconv, err := h.client.Acquire(ctx, editRequest(user, "p", "conv", url))
	require.NoError(t, err)
	task := func(req sandboxapi.WorkspaceRequest, content string) sandboxapi.Handle {
		s, hd, err := h.client.Acquire(ctx, req)
		require.NoError(t, err)
		require.NoError(t, s.WriteFile(ctx, "big.txt", []byte(content), 0))
		_, err = s.Commit(ctx, sandboxapi.CommitRequest{Message: "task"})
		require.NoError(t, err)
		return hd
	}
	x := task(taskRequest(user, "p", "x", url), lines20(map[int]string{2: "x2", 3: "x3", 17: "x17"}))
	y := task(taskRequest(user, "p", "y", url), lines20(map[int]string{3: "y3"}))
	z := task(taskRequest(user, "p", "z", url), lines20(map[int]string{17: "z17"}))
	foreign := task(taskRequest(other, "p", "w", url), lines20(map[int]string{10: "w10"}))
	before, err := conv.Status(ctx)
	require.NoError(t, err)

	req := sandboxapi.MergeRequest{Branches: []string{foreign.Branch}, Workspaces: []string{x.WorkspaceID, y.WorkspaceID, z.WorkspaceID, foreign.WorkspaceID}}
	preview, err := conv.PreviewMerge(ctx, req)
	require.NoError(t, err)
	assert.True(t, preview.DryRun)
	assert.Equal(t, before.Head, preview.Head)
	type row struct{ ws, branch, status string }
	rows := func(r sandboxapi.MergeResult) []row {
		var out []row
		for _, b := range r.Branches {
			out = append(out, row{b.WorkspaceID, b.Branch, b.Status})
		}
		return out
	}
	assert.Equal(t, []row{
		{x.WorkspaceID, x.Branch, sandboxapi.MergeClean}, {y.WorkspaceID, y.Branch, sandboxapi.MergeConflict},
		{z.WorkspaceID, z.Branch, sandboxapi.MergeConflict},
		{"", foreign.Branch, sandboxapi.MergeMissing}, {foreign.WorkspaceID, "", sandboxapi.MergeMissing},
	}, rows(preview))
	after, err := conv.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, before, after, "a preview changes nothing")

	// least_conflicts: y and z merge, x (which conflicts with both) is left out.
	req.Order = sandboxapi.MergeOrderLeastConflicts
	least, err := conv.PreviewMerge(ctx, req)
	require.NoError(t, err)
	merged, err := conv.MergeBranches(ctx, req)
	require.NoError(t, err)
	assert.False(t, merged.DryRun)
	require.Equal(t, len(least.Branches), len(merged.Branches))
	for i, p := range least.Branches {
		m := merged.Branches[i]
		if p.Status == sandboxapi.MergeClean {
			p.Status = sandboxapi.MergeMerged
		}
		assert.Equal(t, p, m, "source %d", i)
	}
	assert.Equal(t, []row{
		{y.WorkspaceID, y.Branch, sandboxapi.MergeMerged}, {z.WorkspaceID, z.Branch, sandboxapi.MergeMerged},
		{x.WorkspaceID, x.Branch, sandboxapi.MergeConflict},
		{"", foreign.Branch, sandboxapi.MergeMissing}, {foreign.WorkspaceID, "", sandboxapi.MergeMissing},
	}, rows(merged))
	got, err := conv.ReadFile(ctx, "big.txt")
	require.NoError(t, err)
	assert.Equal(t, lines20(map[int]string{3: "y3", 17: "z17"}), string(got))
	assert.NotContains(t, gittest.Git(t, hconv.LocalPath, "log", "--format=%s"), "w10")

	// The CLI's dry run: exit 1 when a source would conflict, JSON as the result.
	bin := buildCLI(t)
	r := runCLI(t, bin, h.Config.TaskQueue, "", "merge", hconv.WorkspaceID, "--from", x.WorkspaceID, "--dry-run")
	assert.Equal(t, 1, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "conflict "+x.WorkspaceID+" "+x.Branch)
	assert.Contains(t, r.stdout, "  conflict big.txt")
	r = runCLI(t, bin, h.Config.TaskQueue, "", "merge", hconv.WorkspaceID, "--from", x.WorkspaceID, "--dry-run", "--json")
	assert.Equal(t, 1, r.code, "the same exit status with --json: %s", r.stdout+r.stderr)
	assert.Contains(t, r.stdout, `"conflict"`)
	r = runCLI(t, bin, h.Config.TaskQueue, "", "merge", hconv.WorkspaceID, "--from", y.Branch, "--dry-run", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var res sandboxapi.MergeResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
	assert.Equal(t, sandboxapi.MergeMerged, res.Branches[0].Status, "already merged")
	r = runCLI(t, bin, h.Config.TaskQueue, "", "merge", hconv.WorkspaceID, "--from", y.Branch, "--dry-run")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "up to date (already merged) "+y.Branch, "a preview never says merged")
}
