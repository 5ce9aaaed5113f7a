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
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/internal/volume"
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
	// Volumes, when set, gives every new worktree a file system of its own
	// of VolumeBytes bytes, so that the kernel bounds what it holds
	// (package volume; docs/SECURITY.md "Disk volumes"). Worktrees made
	// without one keep working without one.
	Volumes *volume.Manager
	// VolumeBytes is the size of each new worktree's volume in bytes (the
	// runtimes' disk quota); at least volume.MinBytes.
	VolumeBytes int64
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
	volumes  *volume.Manager
	volBytes int64

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
	return &Manager{git: opts.Git, locker: opts.Locker, hostID: host, now: now, log: log, isolated: opts.Isolated, lfs: opts.LFS,
		volumes: opts.Volumes, volBytes: opts.VolumeBytes}, nil
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

// ---------------------------------------------------------------------------
// Exists and Remove
