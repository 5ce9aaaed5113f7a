// Package workspace implements sandbox.WorkspaceProvider with local git
// worktrees of the bare repo caches (DESIGN.md "The three things": Workspace;
// docs/DESIGN.md "The three things").
//
// On-disk layout (DESIGN.md): the repo cache's bare repository is
// <Root>/repos/<host>/<owner>/<repo>/.bare and every workspace of it is the
// linked worktree <Root>/repos/<host>/<owner>/<repo>/worktrees/<name>, where
// <name> is sandboxapi.WorkspaceRequest.WorktreeDirName. Git's administrative
// directory of a worktree is <bare>/worktrees/<name>; the base commit of the
// workspace is recorded there in the file BaseCommitFile.
//
// Host-side git never trusts anything an agent can change inside a worktree:
// every call names the administrative directory and the work tree explicitly
// (GIT_DIR, GIT_WORK_TREE) so a rewritten ".git" file cannot redirect it; the
// gitx runner neutralizes hooks, fsmonitor, external diff, pagers and every
// clean/smudge/process filter, diff and merge driver found in the
// repository's configuration (DESIGN.md "Non-negotiables: git": no filters on
// host-side calls; docs/SECURITY.md), and this package logs the poisoned
// variables it reports. Every file operation goes through os.Root
// (DESIGN.md "Non-negotiables: Paths").
package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Layout and policy constants.
const (
	// WorktreesDir is the directory, sibling of the bare repository ".bare",
	// that holds a repository's worktrees (DESIGN.md "The three things").
	// sandboxapi.ParseRepoURL refuses it as a repository path's third or
	// later segment, so no repository's directory lands inside it.
	WorktreesDir = "worktrees"
	// BareDirName is the required base name of RepoCache.LocalPath (DESIGN.md
	// "The three things": <root>/repos/<host>/<owner>/<repo>/.bare).
	BareDirName = ".bare"
	// BaseCommitFile is the name of the file, inside a worktree's git
	// administrative directory (<bare>/worktrees/<name>/), that records the
	// workspace's base commit as lowercase hex followed by a newline. Its
	// modification time is the workspace's creation time.
	BaseCommitFile = "sandboxcore-base"
	// DefaultAuthorName and DefaultAuthorEmail are the commit identity used
	// when a CommitRequest names none (and always for the committer of
	// reflog entries written by worktree creation).
	DefaultAuthorName  = "sandboxcore agent"
	DefaultAuthorEmail = "agent@sandboxcore.invalid"
	// MaxCommitMessageBytes bounds CommitRequest.Message, in bytes.
	MaxCommitMessageBytes = 64 << 10
	// MaxIdentityBytes bounds CommitRequest.AuthorName and AuthorEmail, in bytes.
	MaxIdentityBytes = 256
	// MaxStatusFiles caps WorkspaceStatus.Files (Dirty still tells the truth);
	// it keeps the result well under Temporal's 2 MB payload limit (DESIGN.md
	// "Payload discipline").
	MaxStatusFiles = 10000
	// MaxDiffFiles caps Diff.Files; when hit, Diff.Truncated is set.
	MaxDiffFiles = 10000
	// MaxListEntries caps ListDir's result: the first entries by name are kept.
	MaxListEntries = 10000
	// MaxSearchFiles caps how many files one Search reads; when hit,
	// SearchResult.Truncated is set.
	MaxSearchFiles = 20000
	// MaxSearchFileBytes: Search skips files larger than this many bytes.
	MaxSearchFileBytes = 4 << 20
	// MaxSearchTotalBytes caps the bytes one Search reads; when hit,
	// SearchResult.Truncated is set.
	MaxSearchTotalBytes = 256 << 20
	// MaxSearchPatternBytes bounds SearchRequest.Pattern, in bytes.
	MaxSearchPatternBytes = sandboxapi.MaxSearchPatternBytes
)

// Options configure a Manager.
type Options struct {
	// Git is the one git runner (DESIGN.md "Non-negotiables: git"). Required.
	Git *gitx.Runner
	// Locker takes the per-repository lock that serializes worktree creation
	// and removal with clone and fetch (docs/DESIGN.md "Rules").
	// Required; normally the repo cache provider.
	Locker sandbox.RepoLocker
	// HostID is recorded as Workspace.HostID (DESIGN.md "Host affinity");
	// "" means os.Hostname().
	HostID string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives lifecycle events (create, repair, remove); nil discards.
	Logger *slog.Logger
	// Isolated is copied into every workspace's Capabilities.Isolated: it is
	// the runtime provider's RuntimeCapabilities.Isolated (sandboxapi.CapabilitiesFromMode).
	Isolated bool
	// LFS configures how Git LFS content is fetched (lfs.go).
	LFS LFSOptions
}

// Manager is the local-worktree sandbox.WorkspaceProvider. It is safe for
// concurrent use; worktree creation and removal are serialized per repository
// by Options.Locker, and per-workspace serialization of mutating calls is the
// caller's (the SessionWorkflow's, DESIGN.md "Temporal shape").
type Manager struct {
	git      *gitx.Runner
	locker   sandbox.RepoLocker
	hostID   string
	now      func() time.Time
	log      *slog.Logger
	isolated bool
	lfs      LFSOptions

	// afterAdd, when set (tests only), runs after a successful `git worktree
	// add`; an error simulates a failure in the middle of creation.
	afterAdd func(path string) error
	// crashPoint, when set (tests only), is called at named points of
	// worktree creation ("before-add", "added" — registered and checked out,
	// base commit not yet recorded — and "recorded"), and of a rollback
	// ("rollback-moved": HEAD and index moved, files not yet written); a
	// test kills its process (or panics) there to simulate a crash.
	crashPoint func(point, path string)
	// packEvery, when set (tests only), replaces PackRefsEvery.
	packEvery int64

	// reported remembers, per repository directory, the poisoned
	// configuration last logged (inspected), so a warning is logged once.
	reported sync.Map
	// branchesMade counts, per bare repository, the branches created since
	// its refs were last packed (packRefsIfDue).
	branchesMade sync.Map // bare path → *atomic.Int64
}

var _ sandbox.WorkspaceProvider = (*Manager)(nil)

// New returns a Manager. It fails (plain error) when Git or Locker is nil or
// when HostID is "" and the host name cannot be read.
func New(opts Options) (*Manager, error) {
	if opts.Git == nil {
		return nil, errors.New("workspace: Options.Git is required")
	}
	if opts.Locker == nil {
		return nil, errors.New("workspace: Options.Locker is required")
	}
	host := opts.HostID
	if host == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			return nil, fmt.Errorf("workspace: Options.HostID is empty and the host name is unknown: %v", err)
		}
		host = h
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Manager{git: opts.Git, locker: opts.Locker, hostID: host, now: now, log: log, isolated: opts.Isolated, lfs: opts.LFS}, nil
}

// crash calls the crashPoint test hook, if any.
func (m *Manager) crash(point, path string) {
	if m.crashPoint != nil {
		m.crashPoint(point, path)
	}
}

// ---------------------------------------------------------------------------
// Layout

// loc is where one workspace lives on disk.
type loc struct {
	bare string // <repoDir>/.bare
	wt   string // <repoDir>/worktrees/<name>
	name string // <name>
}

// barePath validates cache.LocalPath and returns it with its parent
// directories' symlinks resolved (git records worktree paths resolved).
func barePath(cache sandbox.RepoCache) (string, error) {
	p := cache.LocalPath
	if p == "" || !filepath.IsAbs(p) || filepath.Clean(p) != p || filepath.Base(p) != BareDirName {
		return "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "repo cache %s: local path %q is not an absolute <repo>/%s path", cache.ID, p, BareDirName)
	}
	parent, err := filepath.EvalSymlinks(filepath.Dir(p))
	if err != nil {
		return "", sandboxapi.Errorf(sandboxapi.ErrRepoCacheUnavailable, "repo cache %s: %v", cache.ID, err)
	}
	bare := filepath.Join(parent, BareDirName)
	fi, err := os.Lstat(bare)
	if err != nil || !fi.IsDir() {
		return "", sandboxapi.Errorf(sandboxapi.ErrRepoCacheUnavailable, "repo cache %s: bare repository %s is missing", cache.ID, bare)
	}
	return bare, nil
}

// locate derives the layout of a workspace from its LocalPath, which must be
// an absolute clean <repoDir>/worktrees/<name>. Returns ErrInvalidArgument.
func locate(ws sandboxapi.Workspace) (loc, error) {
	p := ws.LocalPath
	name := filepath.Base(p)
	if p == "" || !filepath.IsAbs(p) || filepath.Clean(p) != p || filepath.Base(filepath.Dir(p)) != WorktreesDir ||
		name == "." || name == ".." || name == "/" {
		return loc{}, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "workspace %s: local path %q is not an absolute <repo>/%s/<name> path", ws.ID, p, WorktreesDir)
	}
	repoDir := filepath.Dir(filepath.Dir(p))
	return loc{bare: filepath.Join(repoDir, BareDirName), wt: p, name: name}, nil
}

// adminMatches reports whether admin is an administrative directory whose
// gitdir file points at wt's .git.
func adminMatches(admin, wt string) bool {
	b, err := os.ReadFile(filepath.Join(admin, "gitdir"))
	return err == nil && filepath.Clean(strings.TrimSpace(string(b))) == filepath.Join(wt, ".git")
}

// adminDir returns the git administrative directory registered for l.wt, found
// by its "gitdir" file pointing back at <wt>/.git ("" when not registered).
func adminDir(l loc) string {
	root := filepath.Join(l.bare, WorktreesDir)
	matches := func(admin string) bool { return adminMatches(admin, l.wt) }
	if cand := filepath.Join(root, l.name); matches(cand) {
		return cand
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return ""
	}
	for _, e := range entries {
		if e.IsDir() && e.Name() != l.name && matches(filepath.Join(root, e.Name())) {
			return filepath.Join(root, e.Name())
		}
	}
	return ""
}

func isDir(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.IsDir()
}

// repoFromCache derives the repository identity from the cache row: Host from
// ProviderHost, Owner/Name from RepoName ("owner/name"), URL from RepoURL.
func repoFromCache(cache sandbox.RepoCache) (sandboxapi.RepoIdentity, error) {
	i := strings.LastIndexByte(cache.RepoName, '/')
	if i <= 0 || i == len(cache.RepoName)-1 {
		return sandboxapi.RepoIdentity{}, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "repo cache %s: repo name %q is not owner/name", cache.ID, cache.RepoName)
	}
	return sandboxapi.RepoIdentity{Host: cache.ProviderHost, Owner: cache.RepoName[:i], Name: cache.RepoName[i+1:], URL: cache.RepoURL}, nil
}

// ---------------------------------------------------------------------------
// Ensure

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
		if err := forceRemoveAll(st.wt); err != nil {
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

// create adds a new worktree at st.wt. known is a base commit recorded by a
// previous incarnation of this workspace ("" when none). fast: entries were
// not listed (fresh); when git then reports the path registered already,
// create undoes only what it did (the branch it made) and returns
// errRegisteredElsewhere. The branch's tip and the start point are looked
// up in one git call.
func (m *Manager) create(ctx context.Context, st *ensureState, entries []wtEntry, known string, fast bool) (ws sandboxapi.Workspace, err error) {
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
// never overwritten. Errors: ErrConflict (a file, or a directory holding
// anything), ErrWorkspaceUnavailable.
func clearEmptyPath(wt string) error {
	fi, err := os.Lstat(wt)
	if err != nil {
		return nil
	}
	if !fi.IsDir() || !emptyDir(wt) {
		return sandboxapi.Errorf(sandboxapi.ErrConflict, "workspace path %s exists but is not a registered worktree; refusing to overwrite it", wt)
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
	if err := os.Mkdir(l.wt, 0o777); err != nil {
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
	if err := forceRemoveAll(l.wt); err != nil {
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

// ---------------------------------------------------------------------------
// Exists and Remove

// Exists reports whether the workspace's directory is present and registered
// as a worktree of its repository (sandbox.WorkspaceProvider). Errors:
// ErrInvalidArgument when ws.LocalPath is not a worktree path of this layout.
func (m *Manager) Exists(ctx context.Context, ws sandboxapi.Workspace) (bool, error) {
	l, err := locate(ws)
	if err != nil {
		return false, err
	}
	return isDir(l.wt) && adminDir(l) != "", nil
}

// Remove deletes the worktree directory and its registration under the
// repository lock, keeping the branch and its commits (sandbox.WorkspaceProvider;
// docs/DESIGN.md "Eviction policy" saves work before calling it). A missing worktree
// is success. The directory goes first (read-only subdirectories are made
// writable), then the registration (`git worktree remove --force --force`, with
// `git worktree prune` as fallback). Errors: ErrInvalidArgument (bad
// LocalPath), ErrRepoLocked, ErrWorkspaceUnavailable or ErrInsufficientDisk
// when the directory or registration cannot be deleted. ws.Repo (as Ensure
// returned it) names the repository lock to take.
func (m *Manager) Remove(ctx context.Context, ws sandboxapi.Workspace) error {
	l, err := locate(ws)
	if err != nil {
		return err
	}
	unlock, err := m.locker.LockRepo(ctx, ws.Repo)
	if err != nil {
		if sandboxapi.KindOf(err) == nil {
			err = sandboxapi.Errorf(sandboxapi.ErrRepoLocked, "lock repository %s: %w", ws.Repo.Key(), err)
		}
		return err
	}
	defer unlock()
	if err := forceRemoveAll(l.wt); err != nil {
		return fsError(err, "remove worktree "+ws.ID)
	}
	if !isDir(l.bare) {
		return nil
	}
	if admin := filepath.Join(l.bare, WorktreesDir, l.name); adminMatches(admin, l.wt) {
		// The directory is gone and its registration is the one of its
		// name: deleting it is what `git worktree remove --force --force`
		// would do, without git's scan of every registered worktree.
		if err := os.RemoveAll(admin); err != nil {
			return fsError(err, "remove the registration of "+ws.ID)
		}
	} else if err := m.unregister(ctx, m.bareGit(l.bare), l); err != nil {
		return err
	}
	m.log.Info("workspace: removed worktree", "workspace_id", ws.ID, "path", l.wt, "branch", ws.BranchName)
	return nil
}

// forceRemoveAll deletes dir without following symlinks; when that fails
// (read-only directories, e.g. a Go module cache), it makes every directory
// writable through an os.Root and retries.
func forceRemoveAll(dir string) error {
	err := os.RemoveAll(dir)
	if err == nil {
		return nil
	}
	r, rerr := os.OpenRoot(dir)
	if rerr != nil {
		return err
	}
	_ = fs.WalkDir(r.FS(), ".", func(p string, d fs.DirEntry, werr error) error {
		if d != nil && d.IsDir() {
			_ = r.Chmod(p, 0o700)
		}
		return nil
	})
	_ = r.Close()
	return os.RemoveAll(dir)
}

func emptyDir(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	names, _ := f.Readdirnames(1)
	return len(names) == 0
}
