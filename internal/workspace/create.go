package workspace

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/volume"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// create adds a new worktree at st.wt. known is a base commit recorded by a
// previous incarnation of this workspace ("" when none). fast: entries were
// not listed (fresh); when git then reports the path registered already,
// create undoes only what it did (the branch it made) and returns
// errRegisteredElsewhere. The branch's tip and the start point are looked
// up in one git call.
func (m *Manager) create(ctx context.Context, st *ensureState, entries []wtEntry, known string, fast bool) (ws sandboxapi.Workspace, err error) {
	if err := m.volumes.Room(0); err != nil {
		return sandboxapi.Workspace{}, err
	}
	if err := clearEmptyPath(st.wt); err != nil {
		return sandboxapi.Workspace{}, err
	}
	plan, err := m.planAdd(ctx, st, entries, known)
	if err != nil {
		return sandboxapi.Workspace{}, err
	}
	base, createdBranch := plan.base, plan.createdBranch
	if err := os.MkdirAll(filepath.Dir(st.wt), 0o755); err != nil {
		return sandboxapi.Workspace{}, fsError(err, "create worktrees directory")
	}
	l := loc{bare: st.bare, wt: st.wt, name: filepath.Base(st.wt)}
	registered := false
	defer func() {
		switch {
		case err == nil:
		case registered:
			// Not ours to clean: only the branch this call made goes.
			m.dropBranch(ctx, st, createdBranch, base)
		default:
			m.cleanupFailed(ctx, st, l, createdBranch, base)
		}
	}()
	if m.volumes != nil {
		// Before the add: the worktree's files are written on its volume.
		if err := m.volumes.Attach(ctx, st.wt, m.volBytes); err != nil {
			return sandboxapi.Workspace{}, err
		}
	}
	m.crash("before-add", st.wt)
	if fast && simpleName(l.name) && (st.branch == "" || createdBranch != "") {
		// A new workspace: registered and checked out as `git worktree
		// add` does it, without its scans of every registered worktree
		// (addWorktree). An existing branch keeps git's own add, which
		// refuses a branch checked out elsewhere.
		if err := m.addWorktree(ctx, st, l, createdBranch, base); err != nil {
			return sandboxapi.Workspace{}, err
		}
	} else if _, err := st.bg.run(ctx, plan.args...); err != nil {
		registered, err = worktreeAddError(err, st.branch, fast)
		return sandboxapi.Workspace{}, err
	}
	admin := adminDir(l)
	if admin == "" {
		return sandboxapi.Workspace{}, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "git worktree add %s: registration not found afterwards", st.wt)
	}
	m.crash("added", st.wt)
	created := m.now()
	if err := writeBase(admin, base, created); err != nil {
		return sandboxapi.Workspace{}, err
	}
	m.crash("recorded", st.wt)
	m.checkoutBaseline(ctx, l, admin)
	if m.afterAdd != nil {
		if err := m.afterAdd(st.wt); err != nil {
			return sandboxapi.Workspace{}, err
		}
	}
	m.log.Info("workspace: created worktree", "path", st.wt, "branch", st.branch, "base_commit", base, "new_branch", createdBranch != "")
	if createdBranch != "" {
		m.packRefsIfDue(ctx, st)
	}
	ws = m.workspace(st, base, created)
	if f := st.cache.LastFetchedAt; !f.IsZero() {
		// The base was resolved in the mirror as fetched then (docs/API.md "acquire").
		f = f.UTC()
		ws.BaseFetchedAt = &f
	}
	return ws, nil
}

// PackRefsEvery is how many branches a bare repository's workspaces create
// between two packings of its refs (`git pack-refs --all`). Git reads every
// loose ref of a directory to list or look up any ref in it, and every
// workspace branch is a loose ref under refs/heads/agent/ (git's automatic
// packing is off for host-side calls, docs/SECURITY.md "Git hardening"), so
// without packing each new workspace's git calls cost more with every
// workspace before it (docs/BENCHMARKS.md "Scale").
const PackRefsEvery = 256

// packRefsIfDue packs the refs of st's bare repository when this call made
// its PackRefsEvery-th branch since the last packing (counted in this
// process; a restart starts the count again). It runs under the
// repository lock Ensure holds; a failure is logged, never returned: the
// refs stay loose and correct.
func (m *Manager) packRefsIfDue(ctx context.Context, st *ensureState) {
	v, _ := m.branchesMade.LoadOrStore(st.bare, new(atomic.Int64))
	n := v.(*atomic.Int64)
	every := int64(PackRefsEvery)
	if m.packEvery > 0 {
		every = m.packEvery
	}
	if n.Add(1) < every {
		return
	}
	n.Store(0)
	started := m.now()
	if _, err := st.bg.run(ctx, "pack-refs", "--all"); err != nil {
		m.log.Warn("workspace: cannot pack the repository's refs", "repo", st.bare, "err", err)
		return
	}
	m.log.Info("workspace: packed the repository's refs", "repo", st.bare, "took", m.now().Sub(started))
}

// clearEmptyPath removes an empty directory at wt (left by an earlier
// attempt) so that a worktree can be added there; anything else at wt is
// never overwritten. An empty mounted volume stays: the add uses it.
// Errors: ErrConflict (a file, or a directory holding anything),
// ErrWorkspaceUnavailable.
func clearEmptyPath(wt string) error {
	fi, err := os.Lstat(wt)
	if err != nil {
		return nil
	}
	if !fi.IsDir() || !volume.Empty(wt) {
		return sandboxapi.Errorf(sandboxapi.ErrConflict, "workspace path %s exists but is not a registered worktree; refusing to overwrite it", wt)
	}
	if volume.Mounted(wt) {
		return nil
	}
	if err := os.Remove(wt); err != nil {
		return fsError(err, "remove empty directory")
	}
	return nil
}

// addPlan is how create adds a worktree: the `git worktree add` arguments,
// the base commit, and the branch it creates ("" when none).
type addPlan struct {
	args          []string
	base          string
	createdBranch string
}

// planAdd decides how st's worktree is added. known (a base recorded by a
// previous incarnation) counts only while the mirror has it. Analysis
// (no branch): detached at known or at the resolved base ref. A branch
// that exists (Remove keeps it, or a repair) is checked out as it is,
// never reset, its base known or fallbackBase. Otherwise the branch is
// created at the start point, after the collision check. The branch's tip
// and the start point are resolved in one git call; when the start point's
// names are invalid, the tip alone (an existing branch needs no start
// point, so that error counts only without one). Errors: ErrConflict (the
// branch is checked out in another worktree of entries, or collides),
// ErrRefNotFound, ErrInvalidArgument, ErrWorkspaceUnavailable.
func (m *Manager) planAdd(ctx context.Context, st *ensureState, entries []wtEntry, known string) (addPlan, error) {
	if known != "" {
		if c, _ := m.firstCommit(ctx, st.bg, known); c == "" {
			known = ""
		}
	}
	if st.branch == "" { // analysis: detached
		base := known
		if base == "" {
			var err error
			if base, err = m.resolveBase(ctx, st.bg, st.baseRef); err != nil {
				return addPlan{}, err
			}
		}
		return addPlan{args: []string{"worktree", "add", "--detach", "--end-of-options", st.wt, base}, base: base}, nil
	}
	names := []string{"refs/heads/" + st.branch}
	startNames, startErr := m.startNames(st)
	if startErr == nil {
		names = append(names, startNames...)
	}
	// The prefixes branchCollision needs ride on the same lookup.
	prefixes := collisionPrefixes(st.branch)
	res, found, err := m.lookup(ctx, st.bg, names, prefixes)
	if err != nil {
		return addPlan{}, err
	}
	tip := res[0]
	for _, e := range entries {
		if e.Branch == "refs/heads/"+st.branch && e.Path != st.wt {
			// Never the other worktree's path: it names another workspace's
			// user and ids (docs/SECURITY.md "Tenant isolation").
			return addPlan{}, sandboxapi.Errorf(sandboxapi.ErrConflict, "branch %s is already checked out by another workspace; acquire with another branch_name", st.branch)
		}
	}
	if tip != "" {
		base := known
		if base == "" {
			base = m.fallbackBase(ctx, st, tip)
		}
		return addPlan{args: []string{"worktree", "add", "--end-of-options", st.wt, st.branch}, base: base}, nil
	}
	if startErr != nil {
		return addPlan{}, startErr
	}
	if err := m.branchCollision(ctx, st.bg, st.branch, prefixes, found); err != nil {
		return addPlan{}, err
	}
	from, err := m.startFrom(st, res[1:])
	if err != nil {
		return addPlan{}, err
	}
	return addPlan{args: []string{"worktree", "add", "--no-track", "-b", st.branch, "--end-of-options", st.wt, from}, base: from, createdBranch: st.branch}, nil
}

// worktreeAddError translates a failed `git worktree add` of branch:
// with fast (the worktrees were not listed), a path git says is registered
// already is errRegisteredElsewhere and registered (the caller must not
// clean up the worktree: it is not ours); a branch checked out elsewhere is
// ErrConflict, without git's text (it names the other worktree's path);
// anything else is classified (ErrWorkspaceUnavailable).
func worktreeAddError(err error, branch string, fast bool) (registered bool, _ error) {
	ge := gitStderr(err)
	if fast && (strings.Contains(ge, "already registered") || strings.Contains(ge, "missing but locked")) {
		return true, errRegisteredElsewhere
	}
	if strings.Contains(ge, "already checked out") || strings.Contains(ge, "already used by worktree") {
		return false, sandboxapi.Errorf(sandboxapi.ErrConflict, "branch %s is already checked out by another workspace; acquire with another branch_name", branch)
	}
	return false, gitx.Classify(err, "git worktree add", sandboxapi.ErrWorkspaceUnavailable)
}

// checkoutBaseline records the new worktree's checkout baseline
// (recordBaseline); a failure is logged, not returned: without it, files
// git would normalise show as changed.
func (m *Manager) checkoutBaseline(ctx context.Context, l loc, admin string) {
	if w, err := m.worktreeAt(ctx, l, admin); err != nil {
		m.log.Warn("workspace: cannot record the checkout baseline", "path", l.wt, "err", err)
	} else if err := m.recordBaseline(ctx, w); err != nil {
		m.log.Warn("workspace: cannot record the checkout baseline", "path", l.wt, "err", err)
	}
}

// simpleName reports whether git keeps name as the administrative
// directory's name of a worktree added at .../name (git sanitizes a name as
// a ref component: dots, among others, may change it).
func simpleName(name string) bool {
	if name == "" || len(name) > 200 {
		return false
	}
	for _, c := range name {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

// addWorktree registers l.wt as a linked worktree of the bare repository and
// checks it out, step by step as `git worktree add` does (git-worktree(1);
// gitrepository-layout(5) "worktrees/<id>"): the administrative directory
// <bare>/worktrees/<name> locked "initializing", its gitdir file (the real
// path of <wt>/.git), the worktree's .git file, a placeholder HEAD and
// commondir; then, in the new worktree, `git symbolic-ref HEAD
// refs/heads/<branch>` (branch made first with `git branch --no-track` from
// commit) or `git update-ref HEAD <commit>` (detached, branch ""), `git
// reset --hard --no-recurse-submodules`, and the lock removed. git's add
// reads every registered worktree's files several times to check the path
// and branch are not in use, so its cost grows with the repository's
// workspaces (≈ 0.3 s per add at 2,000 worktrees, docs/BENCHMARKS.md); here
// the path is known to be free (Ensure's fresh check, under the repository
// lock) and the branch new. Errors: ErrWorkspaceUnavailable,
// ErrInsufficientDisk; the caller cleans up what was made.
func (m *Manager) addWorktree(ctx context.Context, st *ensureState, l loc, branch, commit string) error {
	if !isHex(commit) {
		return sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "worktree %s: start commit %q is not an object id", l.wt, commit)
	}
	if branch != "" {
		if _, err := st.bg.run(ctx, "branch", "--quiet", "--no-track", "--end-of-options", branch, commit); err != nil {
			return gitx.Classify(err, "git branch "+branch, sandboxapi.ErrWorkspaceUnavailable)
		}
	}
	admins := filepath.Join(st.bare, WorktreesDir)
	if err := os.MkdirAll(admins, 0o755); err != nil {
		return fsError(err, "create the worktrees' administrative directory")
	}
	admin := filepath.Join(admins, l.name)
	if err := os.Mkdir(admin, 0o755); err != nil {
		return fsError(err, "create the administrative directory of "+l.wt)
	}
	write := func(p, content string) error {
		if err := os.WriteFile(p, []byte(content+"\n"), 0o644); err != nil {
			return fsError(err, "write "+p)
		}
		return nil
	}
	if err := write(filepath.Join(admin, "locked"), "initializing"); err != nil {
		return err
	}
	if err := os.Mkdir(l.wt, 0o777); err != nil && !(errors.Is(err, fs.ErrExist) && volume.Mounted(l.wt) && volume.Empty(l.wt)) {
		return fsError(err, "create worktree "+l.wt)
	}
	real, err := filepath.EvalSymlinks(l.wt)
	if err != nil {
		return fsError(err, "resolve worktree "+l.wt)
	}
	for _, f := range []struct{ path, content string }{
		{filepath.Join(admin, "gitdir"), filepath.Join(real, ".git")},
		{filepath.Join(l.wt, ".git"), "gitdir: " + admin},
		{filepath.Join(admin, "HEAD"), strings.Repeat("0", len(commit))},
		{filepath.Join(admin, "commondir"), "../.."},
	} {
		if err := write(f.path, f.content); err != nil {
			return err
		}
	}
	g := gitCtx{m: m, dir: l.wt, ins: st.bg.ins, env: []string{
		"GIT_DIR=" + admin, "GIT_WORK_TREE=" + l.wt,
		"GIT_AUTHOR_NAME=" + DefaultAuthorName, "GIT_AUTHOR_EMAIL=" + DefaultAuthorEmail,
		"GIT_COMMITTER_NAME=" + DefaultAuthorName, "GIT_COMMITTER_EMAIL=" + DefaultAuthorEmail,
	}}
	head := []string{"update-ref", "HEAD", commit}
	if branch != "" {
		head = []string{"symbolic-ref", "HEAD", "refs/heads/" + branch}
	}
	if _, err := g.run(ctx, head...); err != nil {
		return gitx.Classify(err, "git "+head[0]+" HEAD", sandboxapi.ErrWorkspaceUnavailable)
	}
	if _, err := g.run(ctx, "reset", "--hard", "--no-recurse-submodules", "--quiet"); err != nil {
		return gitx.Classify(err, "git reset --hard", sandboxapi.ErrWorkspaceUnavailable)
	}
	if err := os.Remove(filepath.Join(admin, "locked")); err != nil {
		return fsError(err, "unlock worktree "+l.wt)
	}
	return nil
}

// startPoint is the commit a new branch starts from: the tip of
// refs/heads/<FromBranch> for a task with FromBranch, else the resolved base.
func (m *Manager) startPoint(ctx context.Context, st *ensureState) (string, error) {
	names, err := m.startNames(st)
	if err != nil {
		return "", err
	}
	res, err := m.resolveAll(ctx, st.bg, names...)
	if err != nil {
		return "", err
	}
	return m.startFrom(st, res)
}

// startNames are the names startPoint resolves, in order of preference.
// Errors: ErrInvalidArgument, ErrRefNotFound (no base ref): baseCandidates.
func (m *Manager) startNames(st *ensureState) ([]string, error) {
	if st.req.FromBranch != "" {
		return []string{"refs/heads/" + st.req.FromBranch}, nil
	}
	return baseCandidates(st.baseRef)
}

// startFrom picks the start point from the resolution of startNames.
func (m *Manager) startFrom(st *ensureState, res []string) (string, error) {
	for _, c := range res {
		if c != "" {
			return c, nil
		}
	}
	if st.req.FromBranch != "" {
		return "", sandboxapi.Errorf(sandboxapi.ErrRefNotFound, "from_branch %q: no such local branch", st.req.FromBranch)
	}
	return "", sandboxapi.Errorf(sandboxapi.ErrRefNotFound, "base ref %q is not a branch, tag or commit of the repository", st.baseRef)
}

// fallbackBase guesses the base commit of an existing branch whose record is
// lost: the merge base of its tip with the start point, else the tip itself.
func (m *Manager) fallbackBase(ctx context.Context, st *ensureState, tip string) string {
	from, err := m.startPoint(ctx, st)
	if err != nil || from == "" {
		m.log.Warn("workspace: base commit unknown; using the branch tip", "path", st.wt, "err", err)
		return tip
	}
	out, err := st.bg.run(ctx, "merge-base", "--end-of-options", from, tip)
	if mb := strings.TrimSpace(string(out)); err == nil && isHex(mb) {
		return mb
	}
	return tip
}

// cleanupFailed undoes a failed creation: the registration, the directory and
// a branch created by this call (only while it still points at start).
func (m *Manager) cleanupFailed(ctx context.Context, st *ensureState, l loc, branch, start string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := m.unregister(ctx, st.bg, l); err != nil {
		m.log.Warn("workspace: cleanup: unregister", "path", l.wt, "err", err)
	}
	if err := m.removeTree(l.wt); err != nil {
		m.log.Warn("workspace: cleanup: remove directory", "path", l.wt, "err", err)
	}
	m.dropBranch(ctx, st, branch, start)
}

// dropBranch deletes a branch this call created, while it still points at start.
func (m *Manager) dropBranch(ctx context.Context, st *ensureState, branch, start string) {
	if branch == "" || !isHex(start) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if _, err := st.bg.run(ctx, "update-ref", "-d", "refs/heads/"+branch, start); err != nil {
		m.log.Warn("workspace: cleanup: delete branch", "branch", branch, "err", err)
	}
}

// unregister removes the worktree registration of l (and its directory, when
// present), falling back to `git worktree prune` and then to deleting the
// verified administrative directory.
func (m *Manager) unregister(ctx context.Context, bg gitCtx, l loc) error {
	// Run even when adminDir finds nothing: git may list the path under a
	// spelling the gitdir file does not match. An unregistered path is an error
	// git reports and this ignores; git never deletes an unregistered directory.
	_, err := bg.run(ctx, "worktree", "remove", "--force", "--force", "--end-of-options", l.wt)
	if adminDir(l) == "" {
		return nil
	}
	if !isDir(l.wt) {
		_, _ = bg.run(ctx, "worktree", "prune")
	}
	if admin := adminDir(l); admin != "" {
		if rerr := os.RemoveAll(admin); rerr != nil {
			return sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "remove registration of %s: %v (git: %v)", l.wt, rerr, err)
		}
	}
	return nil
}

// workspace assembles the returned row.
func (m *Manager) workspace(st *ensureState, base string, created time.Time) sandboxapi.Workspace {
	now := m.now()
	req := st.req
	return sandboxapi.Workspace{
		ID:             sandboxapi.WorkspaceIDForKey(req.Key()),
		Key:            req.Key(),
		RepoCacheID:    st.cache.ID,
		Repo:           st.repo,
		ProjectID:      req.ProjectID,
		UserID:         req.UserID,
		Mode:           req.Mode,
		ConversationID: req.ConversationID,
		TaskID:         req.TaskID,
		BaseRef:        st.baseRef,
		BaseCommit:     base,
		BranchName:     st.branch,
		LocalPath:      st.wt,
		HostID:         m.hostID,
		State:          sandboxapi.WorkspaceReady,
		Capabilities:   sandboxapi.CapabilitiesFromMode(req.Mode, m.isolated),
		LastUsedAt:     now,
		CreatedAt:      created,
		UpdatedAt:      now,
	}
}

// readBase returns the recorded base commit of an administrative directory, or "".
func readBase(admin string) string {
	b, err := os.ReadFile(filepath.Join(admin, BaseCommitFile))
	if err != nil {
		return ""
	}
	s := strings.TrimSpace(string(b))
	if !isHex(s) {
		return ""
	}
	return s
}

// writeBase records base atomically, with mtime = created.
func writeBase(admin, base string, created time.Time) error {
	tmp, err := os.CreateTemp(admin, BaseCommitFile+".tmp-*")
	if err != nil {
		return fsError(err, "record base commit")
	}
	_, werr := tmp.WriteString(base + "\n")
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return fsError(err, "record base commit")
	}
	_ = os.Chtimes(tmp.Name(), created, created)
	if err := os.Rename(tmp.Name(), filepath.Join(admin, BaseCommitFile)); err != nil {
		_ = os.Remove(tmp.Name())
		return fsError(err, "record base commit")
	}
	return nil
}
