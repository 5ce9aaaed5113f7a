package activities

import (
	"context"
	"slices"
	"strings"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/wire"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// MergeBranches merges local branches into the workspace's branch (the
// merge_branches update), or previews the merge (DryRun: docs/API.md "Merge
// preview"), through the workspace provider's sandbox.BranchMerger,
// heartbeating meanwhile, and records the workspace clean after a merge.
//
// Sources are checked against the store first: a workspace given by id
// (in.Request.Workspaces) is merged by its branch only when it is a workspace
// of the same repository, user and project; a branch that is another user's
// or project's workspace branch, and any such workspace, are reported
// sandboxapi.MergeMissing (never merged, never revealed), after the others.
// Errors: ErrCommandRejected (read-only workspace, or a provider that
// cannot merge), ErrWorkspaceDirty, ErrInvalidArgument, ErrRepoLocked,
// ErrWorkspaceUnavailable (see sandbox.BranchMerger).
func (a *Activities) MergeBranches(ctx context.Context, in wire.OpInput[sandboxapi.MergeRequest]) (sandboxapi.MergeResult, error) {
	ws, err := a.workspace(ctx, in.WorkspaceID)
	if err != nil {
		return sandboxapi.MergeResult{}, err
	}
	merger, ok := a.Workspaces.(sandbox.BranchMerger)
	if !ok {
		return sandboxapi.MergeResult{}, sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "this host's workspace provider cannot merge branches")
	}
	if !ws.Capabilities.Writable {
		return sandboxapi.MergeResult{}, sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "workspace %s is read-only (%s)", ws.ID, ws.Mode)
	}
	req, fromWorkspace, refused, err := a.mergeSources(ctx, ws, in.Request)
	if err != nil {
		return sandboxapi.MergeResult{}, err
	}
	var res sandboxapi.MergeResult
	if len(req.Branches) > 0 {
		res, err = whileHeartbeating(ctx, func() (sandboxapi.MergeResult, error) { return merger.Merge(ctx, ws, req) })
		if err != nil {
			return sandboxapi.MergeResult{}, err
		}
	} else {
		// Every source was refused: nothing to merge, the workspace as it is.
		res = sandboxapi.MergeResult{DryRun: req.DryRun, Branch: ws.BranchName, Branches: []sandboxapi.BranchMerge{}}
		if st, err := a.Workspaces.Status(ctx, ws); err == nil {
			res.Head, res.Dirty = st.Head, st.Dirty && req.DryRun
		}
	}
	for i := range res.Branches {
		res.Branches[i].WorkspaceID = fromWorkspace[res.Branches[i].Branch]
	}
	res.Branches = append(res.Branches, refused...)
	if !req.DryRun {
		a.setDirty(ctx, ws, false)
	}
	a.touch(ctx, ws.ID, !req.DryRun)
	return res, nil
}

// mergeSources resolves req's workspaces into branches and leaves out the
// sources that are not the caller's to merge (see MergeBranches): it
// returns the request with only branches, the workspace id of each branch
// that came from one, and the refused sources as MergeMissing outcomes.
func (a *Activities) mergeSources(ctx context.Context, ws sandboxapi.Workspace, req sandboxapi.MergeRequest) (sandboxapi.MergeRequest, map[string]string, []sandboxapi.BranchMerge, error) {
	rows, err := a.Store.ListWorkspaces(ctx, sandbox.WorkspaceFilter{RepoCacheID: ws.RepoCacheID})
	if err != nil {
		return req, nil, nil, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "list the workspaces of the repository: %v", err)
	}
	mine := func(o sandboxapi.Workspace) bool {
		return o.UserID == ws.UserID && o.ProjectID == ws.ProjectID && o.Repo.Key() == ws.Repo.Key()
	}
	owner := map[string]sandboxapi.Workspace{} // branch → its workspace
	byID := map[string]sandboxapi.Workspace{}
	for _, o := range rows {
		byID[o.ID] = o
		if o.BranchName != "" && o.State != sandboxapi.WorkspaceRemoved {
			owner[o.BranchName] = o
		}
	}
	tenantPrefix := "agent/" + sandboxapi.TenantSegment(ws.UserID, ws.ProjectID) + "/"
	var refused []sandboxapi.BranchMerge
	out := req
	out.Branches, out.Workspaces = nil, nil
	for _, b := range req.Branches {
		o, owned := owner[b]
		foreign := (owned && !mine(o)) || (!owned && strings.HasPrefix(b, "agent/") && !strings.HasPrefix(b, tenantPrefix) && strings.Count(b, "/") >= 2)
		if foreign {
			refused = append(refused, sandboxapi.BranchMerge{Branch: b, Status: sandboxapi.MergeMissing})
			continue
		}
		out.Branches = append(out.Branches, b)
	}
	from := map[string]string{}
	for _, id := range req.Workspaces {
		o, ok := byID[id]
		if !ok {
			if got, err := a.Store.GetWorkspace(ctx, id); err == nil {
				o, ok = got, true
			}
		}
		if !ok || !mine(o) || o.ID == ws.ID || o.BranchName == "" || o.State == sandboxapi.WorkspaceRemoved || o.HostID != a.HostID {
			refused = append(refused, sandboxapi.BranchMerge{WorkspaceID: id, Status: sandboxapi.MergeMissing})
			continue
		}
		if slices.Contains(out.Branches, o.BranchName) {
			return req, nil, nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "workspace %s's branch %s is also listed as a branch", id, o.BranchName)
		}
		out.Branches = append(out.Branches, o.BranchName)
		from[o.BranchName] = id
	}
	return out, from, refused, nil
}
