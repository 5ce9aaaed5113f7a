package workspace

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// ensureState carries one Ensure call.
type ensureState struct {
	cache   sandbox.RepoCache
	repo    sandboxapi.RepoIdentity
	req     sandboxapi.WorkspaceRequest
	bare    string
	wt      string
	baseRef string // requested, or the cache's default branch
	branch  string // "" for analysis
	bg      gitCtx // git in the bare repository
}

// Ensure creates the worktree for req on cache, or returns the existing one
// (sandbox.WorkspaceProvider; docs/DESIGN.md "Workspace lifecycle"). Under the
// repository lock (Options.Locker) it:
//
//   - validates req (sandboxapi.WorkspaceRequest.Validate; the URL must name the
//     cache's repository, its scheme policy is the repo cache's concern) and
//     cache.LocalPath (<repo>/.bare);
//   - returns the registered worktree at <repo>/worktrees/<name> when its
//     directory exists (same key → same path, branch and recorded base
//     commit); a missing or wrong ".git" file is rewritten, and the
//     directory of a ready stored workspace that is no longer registered
//     (a `git worktree prune` after its .git file went) is registered
//     again with its files as they are (repair.go). <name> and the branch are
//     stored's (the recorded row of an existing workspace: kept, never
//     derived again) or, for a new workspace (stored nil),
//     req.WorktreeDirName() and req.Branch();
//   - repairs a registration whose directory vanished, or a creation that died
//     half-way (locked "initializing", no recorded base): the registration is
//     removed and the worktree re-added on the same branch (its commits kept) or,
//     for analysis, at the same recorded commit;
//   - otherwise creates it: analysis → detached at the resolved base commit;
//     edit/task → the branch (req.Branch(): agent/<tenant>/edits-<conversation_id>,
//     agent/<tenant>/task-<task_id>, or branch_name) created with --no-track from the base commit (task
//     with FromBranch: from that local branch's tip, which is then the base
//     commit), or checked out as is when it already exists (never reset).
//
// The base ref is req.BaseRef or cache.DefaultBranch, looked up in order as
// refs/remotes/origin/<ref>, refs/tags/<ref>, refs/heads/<ref>, a full ref
// name, then a hex commit id. The base commit is recorded in BaseCommitFile;
// a created worktree's Workspace.BaseFetchedAt is cache.LastFetchedAt (a
// reused one's is nil: the caller keeps what it recorded).
// On failure nothing is left behind: no directory, no registration, no branch
// created by this call.
//
// Workspace.Dirty is not computed (use Status). Errors: ErrInvalidArgument
// (request, cache row, a stored row of another key, a new branch that is the
// repository's default branch), ErrRefNotFound (base ref, from_branch), ErrConflict
// (the branch is checked out in another worktree, a new branch collides with
// an existing local or upstream ref (branchCollision), or a non-empty
// unregistered directory occupies the path), ErrRepoLocked, ErrInsufficientDisk,
// ErrRepoCacheUnavailable (bare repository missing), ErrWorkspaceUnavailable
// (any other git failure).
func (m *Manager) Ensure(ctx context.Context, cache sandbox.RepoCache, req sandboxapi.WorkspaceRequest, stored *sandboxapi.Workspace) (sandboxapi.Workspace, error) {
	st, err := m.newEnsureState(cache, req, stored)
	if err != nil {
		return sandboxapi.Workspace{}, err
	}
	unlock, err := m.locker.LockRepo(ctx, st.repo)
	if err != nil {
		if sandboxapi.KindOf(err) == nil {
			err = sandboxapi.Errorf(sandboxapi.ErrRepoLocked, "lock repository %s: %w", st.repo.Key(), err)
		}
		return sandboxapi.Workspace{}, err
	}
	defer unlock()
	if err := m.onVolume(ctx, st.wt); err != nil {
		return sandboxapi.Workspace{}, err
	}
	if st.bg, err = m.inspected(ctx, st.bg); err != nil {
		return sandboxapi.Workspace{}, err
	}
	if fresh(st) {
		// Nothing of this workspace is on disk: no directory and no
		// administrative directory of its name. Listing every worktree
		// (which grows with the repository's workspaces) is skipped; the
		// rare registration under another name is found by git itself,
		// which refuses the add, and then handled below as a repair.
		ws, err := m.create(ctx, st, nil, "", true)
		if !errors.Is(err, errRegisteredElsewhere) {
			return ws, err
		}
	}

	entries, err := m.listWorktrees(ctx, st.bg)
	if err != nil {
		return sandboxapi.Workspace{}, err
	}
	known := ""
	e := findEntry(entries, st.wt)
	if e == nil && stored != nil && stored.State == sandboxapi.WorkspaceReady && stored.LocalPath == st.wt && isDir(st.wt) {
		// The workspace's worktree is there but no longer registered (a
		// `git worktree prune` after its .git file went): registered again
		// with its files as they are (repair.go), never replaced.
		ws := *stored
		ws.BranchName = st.branch
		if _, err := m.reregister(ctx, loc{bare: st.bare, wt: st.wt, name: filepath.Base(st.wt)}, ws); err != nil {
			return sandboxapi.Workspace{}, err
		}
		if entries, err = m.listWorktrees(ctx, st.bg); err != nil {
			return sandboxapi.Workspace{}, err
		}
		e = findEntry(entries, st.wt)
	}
	if e != nil {
		admin := adminDir(loc{bare: st.bare, wt: st.wt, name: filepath.Base(st.wt)})
		crashed := crashedAdd(e, admin)
		if !crashed && isDir(st.wt) {
			if admin == "" { // never delete a directory that may hold work
				return sandboxapi.Workspace{}, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "worktree %s is registered but its administrative directory cannot be identified", st.wt)
			}
			return m.reuse(ctx, st, e, admin)
		}
		if known, entries, err = m.repair(ctx, st, e, admin, crashed); err != nil {
			return sandboxapi.Workspace{}, err
		}
	}
	return m.create(ctx, st, entries, known, false)
}

// newEnsureState validates req against the repo cache row (the request's
// repository must be the cache's: name and, when recorded, host) and
// returns where and how its worktree lives: the bare repository, the
// worktree path under WorktreesDir, the base ref (req's, or the cache's
// default branch) and the branch — stored's directory name and branch for
// an existing workspace, req.WorktreeDirName and req.Branch for a new one.
// Errors: ErrInvalidArgument (request, cache row, mismatch, a stored row
// of another key or with an unusable path or branch, a new branch that is
// the cache's default branch), as barePath.
func (m *Manager) newEnsureState(cache sandbox.RepoCache, req sandboxapi.WorkspaceRequest, stored *sandboxapi.Workspace) (*ensureState, error) {
	id, err := req.Validate(sandboxapi.URLPolicy{AllowFile: true, AllowHTTP: true})
	if err != nil {
		return nil, err
	}
	repo, err := repoFromCache(cache)
	if err != nil {
		return nil, err
	}
	if id.FullName() != cache.RepoName || (cache.ProviderHost != "" && id.Host != cache.ProviderHost) {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "request repository %s/%s does not match repo cache %s (%s/%s)",
			id.Host, id.FullName(), cache.ID, cache.ProviderHost, cache.RepoName)
	}
	bare, err := barePath(cache)
	if err != nil {
		return nil, err
	}
	baseRef := req.BaseRef
	if baseRef == "" {
		baseRef = cache.DefaultBranch
	}
	name, branch, err := placement(cache, req, stored)
	if err != nil {
		return nil, err
	}
	return &ensureState{
		cache: cache, repo: repo, req: req, bare: bare,
		wt:      filepath.Join(filepath.Dir(bare), WorktreesDir, name),
		baseRef: baseRef, branch: branch,
		bg: m.bareGit(bare),
	}, nil
}

// placement returns the worktree directory name and the branch of req's
// workspace: stored's when it has a row (an existing workspace keeps the
// names it was created with, whatever the derivation is today: docs/API.md
// "Identity"), else the request's derivation. A new branch may not be the
// repository's default branch (what the remote's HEAD names). Errors:
// ErrInvalidArgument.
func placement(cache sandbox.RepoCache, req sandboxapi.WorkspaceRequest, stored *sandboxapi.Workspace) (name, branch string, _ error) {
	if stored == nil {
		branch = req.Branch()
		if branch != "" && branch == cache.DefaultBranch {
			return "", "", sandboxapi.FieldError("request.branch_name", "branch %s is the repository's default branch: a workspace never checks it out", branch)
		}
		return req.WorktreeDirName(), branch, nil
	}
	if stored.ID != sandboxapi.WorkspaceIDForKey(req.Key()) {
		return "", "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "the stored workspace %s is not the request's", stored.ID)
	}
	name = filepath.Base(stored.LocalPath)
	if stored.LocalPath == "" || !simpleName(strings.ReplaceAll(name, ".", "-")) {
		return "", "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "workspace %s: its recorded path has no usable directory name", stored.ID)
	}
	if req.Mode == sandboxapi.ModeAnalysis {
		return name, "", nil
	}
	branch = stored.BranchName
	if branch == "" {
		// A row without a branch (never written so): the derivation.
		branch = req.Branch()
	}
	if err := sandboxapi.ValidateRef(branch); err != nil {
		return "", "", err
	}
	return name, branch, nil
}

// crashedAdd reports whether the registered worktree e (administrative
// directory admin, "" when unidentified) is a creation that died half-way:
// git locks a worktree "initializing" until `worktree add` finishes and
// this package records the base right after; both together mean a crash
// (the repository lock excludes a live creation).
func crashedAdd(e *wtEntry, admin string) bool {
	return e.Locked && strings.Contains(e.LockReason, "initializing") && (admin == "" || readBase(admin) == "")
}

// repair unregisters st's worktree whose directory vanished (or whose
// creation crashed: its directory is removed too) so that create can add
// it again, and returns the base commit to keep (the recorded one; an
// analysis worktree's registered HEAD unless crashed) and the worktrees
// listed afresh. Errors: ErrWorkspaceUnavailable, ErrInsufficientDisk.
func (m *Manager) repair(ctx context.Context, st *ensureState, e *wtEntry, admin string, crashed bool) (string, []wtEntry, error) {
	known := ""
	if admin != "" {
		known = readBase(admin)
	}
	if known == "" && st.branch == "" && !crashed {
		known = e.Head
	}
	m.log.Info("workspace: repairing worktree", "path", st.wt, "branch", st.branch, "crashed_add", crashed)
	if err := m.unregister(ctx, st.bg, loc{bare: st.bare, wt: st.wt, name: filepath.Base(st.wt)}); err != nil {
		return "", nil, err
	}
	if crashed {
		if err := m.removeTree(st.wt); err != nil {
			return "", nil, fsError(err, "remove half-created worktree")
		}
	}
	entries, err := m.listWorktrees(ctx, st.bg)
	if err != nil {
		return "", nil, err
	}
	return known, entries, nil
}

// errRegisteredElsewhere: a fast create found the path registered already
// (under an administrative directory of another name): Ensure lists the
// worktrees and repairs it.
var errRegisteredElsewhere = errors.New("worktree path is registered under another name")

// fresh reports whether neither st's worktree directory nor an
// administrative directory of its name exists (a new workspace), nor one
// of the names git gives a worktree of the same base name when that one is
// taken (<name>1, <name>2 …) registering st's path.
func fresh(st *ensureState) bool {
	name := filepath.Base(st.wt)
	admins := filepath.Join(st.bare, WorktreesDir)
	for _, p := range []string{st.wt, filepath.Join(admins, name)} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			return false
		}
	}
	d, err := os.Open(admins)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	if err != nil {
		return false
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return false
	}
	want := filepath.Join(st.wt, ".git")
	for _, n := range names {
		rest, ok := strings.CutPrefix(n, name)
		if !ok || rest == "" || strings.Trim(rest, "0123456789") != "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(admins, n, "gitdir"))
		if err != nil || filepath.Clean(strings.TrimSpace(string(b))) == want {
			return false // unreadable: let git and the repair path decide
		}
	}
	return true
}

// reuse returns the existing, registered worktree.
func (m *Manager) reuse(ctx context.Context, st *ensureState, e *wtEntry, admin string) (sandboxapi.Workspace, error) {
	// The agent may have deleted or overwritten the link; host-side git does
	// not need it (GIT_DIR), the agent's own git does (repair.go).
	if err := m.fixGitFile(st.wt, admin); err != nil {
		return sandboxapi.Workspace{}, err
	}
	base := readBase(admin)
	created := m.now()
	if base == "" {
		head := e.Head
		base = head
		if st.branch != "" && head != "" {
			if b := m.fallbackBase(ctx, st, head); b != "" {
				base = b
			}
		}
		if !isHex(base) {
			return sandboxapi.Workspace{}, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "worktree %s has no recorded base commit and no HEAD", st.wt)
		}
		if err := writeBase(admin, base, created); err != nil {
			return sandboxapi.Workspace{}, err
		}
	} else if fi, err := os.Stat(filepath.Join(admin, BaseCommitFile)); err == nil {
		created = fi.ModTime()
	}
	if st.branch != "" && e.Branch != "refs/heads/"+st.branch {
		m.log.Warn("workspace: worktree is not on its branch", "path", st.wt, "want", st.branch, "head", e.Branch)
	}
	return m.workspace(st, base, created), nil
}
