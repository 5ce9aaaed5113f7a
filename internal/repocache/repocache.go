// Package repocache is the local RepoCache of sandboxcore: one durable bare
// mirror per repository under the data root, cloned once and fetched when
// stale (docs/DESIGN.md "The three things", DESIGN.md "The three things").
//
// Layout under Options.Root (DESIGN.md):
//
//	repos/<host>/<owner>/<repo>/.bare      the bare mirror (Cache.Path)
//	repos/<host>/<owner>/<repo>.lock       the per-repository flock (Cache.LockRepo)
//	repos/.staging/<cache-id>-<random>/    a clone in progress (never trusted after a crash)
//	repos/.trash/<cache-id>-<random>/      a mirror being deleted
//	repos/.broken/<cache-id>-<time>-<rnd>/ an incomplete mirror that held agent work, kept for an operator
//
// <host> is the repository host with its ':' port separator replaced by '_'
// (sandboxapi.FileHost for file:// URLs); hosts never contain '_' (sandboxapi.ParseRepoURL), so
// the mapping is injective.
//
// Ref layout inside the mirror: the remote's branches live in
// refs/remotes/origin/*, its tags in refs/tags/*, and refs/remotes/origin/HEAD
// is a symref to the remote's default branch. refs/heads/* belongs to the
// agents (workspace branches, docs/DESIGN.md "Workspace lifecycle") and is never written,
// moved or pruned by a fetch: no mirror refspec is ever used.
//
// Files the cache writes inside the bare directory:
//
//	sandboxcore-ready       written last before the staged clone is renamed into place;
//	                        holds the creation time (decimal Unix nanoseconds)
//	sandboxcore-fetched     start time of the last successful fetch (decimal Unix nanoseconds):
//	                        the mirror holds what the remote had then
//	sandboxcore-auth-scope  AuthScopeHash of the credential used by that fetch ("" when none)
//	sandboxcore-location    the URL that fetch read from, when the repository had moved (moves.go)
//
// and under repos/.moves/ one file per repository that another one moved
// to (moves.go), naming the old repository's URL.
//
// No credential is ever written anywhere: it goes per call through gitx
// (docs/DESIGN.md "Rules": keep git credentials out of remotes after clone/fetch).
package repocache

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// DefaultFreshFor is the freshness window used when Options.FreshFor is zero:
// Ensure calls within it after a fetch do not fetch again, so a burst of
// sessions on one repository costs one fetch.
const DefaultFreshFor = 30 * time.Second

// DefaultNetworkTimeout bounds each network git call (ls-remote, fetch) and
// the clone's connectivity check when Options.NetworkTimeout is zero.
const DefaultNetworkTimeout = 30 * time.Minute

// ProviderLocal is RepoCache.Provider for caches made by this package.
const ProviderLocal = "local"

// Names of the marker files this package writes inside a bare mirror.
const (
	// ReadyMarker is written last, before the staged clone is renamed into
	// place; a bare directory without it is incomplete and is recloned.
	ReadyMarker = "sandboxcore-ready"
	// FetchedMarker holds the time of the last successful fetch.
	FetchedMarker = "sandboxcore-fetched"
	// AuthScopeMarker holds the AuthScopeHash of the credential of that fetch.
	AuthScopeMarker = "sandboxcore-auth-scope"
	// SizeMarker holds the mirror's size in bytes as measured after its last
	// clone or fetch, so an Ensure inside the freshness window does not walk
	// the object store again (host-side diffs and commits add a little in between).
	SizeMarker = "sandboxcore-size"
	// LocationMarker holds the URL the last fetch actually read from when
	// the repository had moved on its host (absent otherwise).
	LocationMarker = "sandboxcore-location"
)

// Refspec and symref names used in the mirror.
const (
	// BranchRefspec maps the remote's branches to remote-tracking refs. It is
	// the only refspec ever pruned (git-fetch(1) "PRUNING").
	BranchRefspec = "+refs/heads/*:refs/remotes/origin/*"
	// OriginHEAD is the symref naming the remote's default branch.
	OriginHEAD = "refs/remotes/origin/HEAD"
	// RemoteRefPrefix is the prefix of the remote-tracking branches.
	RemoteRefPrefix = "refs/remotes/origin/"
)

const (
	reposDirName   = "repos"
	stagingDirName = ".staging"
	trashDirName   = ".trash"
	brokenDirName  = ".broken"
	bareDirName    = ".bare"
	localTimeout   = 2 * time.Minute
	lockPollDelay  = 50 * time.Millisecond
)

// Options configure a Cache.
type Options struct {
	// Root is the data directory; caches live under <Root>/repos. Required.
	// It is made absolute, and created when missing.
	Root string
	// Git is the one git runner (DESIGN.md "Non-negotiables: git"). Required.
	// It must allow the protocols of the URLs passed to Ensure (file:// needs
	// gitx.Options.AllowFile, http:// needs AllowHTTP).
	Git *gitx.Runner
	// FreshFor is the freshness window: Ensure does not fetch when the last
	// fetch (recorded in the mirror, so it holds across processes) is younger.
	// 0 means DefaultFreshFor; a negative value makes every Ensure fetch.
	FreshFor time.Duration
	// NetworkTimeout bounds each network git call; 0 means DefaultNetworkTimeout.
	NetworkTimeout time.Duration
	// HostID is reported as RepoCache.HostID (DESIGN.md "Host affinity");
	// "" means os.Hostname().
	HostID string
	// Now returns the current time (tests inject a fake clock); nil means time.Now.
	Now func() time.Time
	// Logger receives one line per clone, fetch and removal; nil discards.
	// Credentials are never logged.
	Logger *slog.Logger
	// OnTransfer, when set, is called after every clone and fetch Ensure
	// makes (op "clone" or "fetch"), with its wall-clock duration, the bytes
	// it added to the mirror on disk (its growth; 0 after a failure) and its
	// error (docs/OPERATIONS.md "Metrics"). It must not block.
	OnTransfer func(op string, took time.Duration, bytes int64, err error)
}

// Cache is the local RepoCacheProvider (sandbox.RepoCacheProvider). It is safe
// for concurrent use by many goroutines and by many processes sharing Root:
// clone, fetch and removal run under LockRepo.
type Cache struct {
	root       string
	reposDir   string
	git        *gitx.Runner
	freshFor   time.Duration
	netTimeout time.Duration
	hostID     string
	now        func() time.Time
	log        *slog.Logger
	onTransfer func(op string, took time.Duration, bytes int64, err error)

	mu   sync.Mutex
	sems map[string]chan struct{} // repo.Key() → in-process lock (capacity 1)
}

var _ sandbox.RepoCacheProvider = (*Cache)(nil)

// New returns a Cache rooted at opts.Root. It fails with ErrInvalidArgument
// when Root or Git is missing, and with ErrRepoCacheUnavailable (or
// ErrInsufficientDisk) when <Root>/repos cannot be created.
func New(opts Options) (*Cache, error) {
	if opts.Root == "" {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "repocache: Options.Root is required")
	}
	if opts.Git == nil {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "repocache: Options.Git is required")
	}
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "repocache: root %q: %v", opts.Root, err)
	}
	c := &Cache{
		root:       root,
		reposDir:   filepath.Join(root, reposDirName),
		git:        opts.Git,
		freshFor:   opts.FreshFor,
		netTimeout: opts.NetworkTimeout,
		hostID:     opts.HostID,
		now:        opts.Now,
		log:        opts.Logger,
		onTransfer: opts.OnTransfer,
		sems:       map[string]chan struct{}{},
	}
	if c.freshFor == 0 {
		c.freshFor = DefaultFreshFor
	}
	if c.netTimeout <= 0 {
		c.netTimeout = DefaultNetworkTimeout
	}
	if c.hostID == "" {
		if h, err := os.Hostname(); err == nil {
			c.hostID = h
		}
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(c.reposDir, 0o755); err != nil {
		return nil, fsError(err, "repocache: create "+c.reposDir)
	}
	return c, nil
}

// Root returns the absolute data directory.
func (c *Cache) Root() string { return c.root }

// identity re-derives repo from its URL and checks that Host, Owner and Name
// agree, so that no hand-built identity can steer a path outside the root
// (docs/DESIGN.md "Rules": treat repo names as untrusted). The returned URL is
// the validated one. Returns ErrInvalidArgument.
func identity(repo sandboxapi.RepoIdentity) (sandboxapi.RepoIdentity, error) {
	// Protocol policy is gitx's business; here any scheme ParseRepoURL knows is fine.
	id, err := sandboxapi.ParseRepoURL(repo.URL, sandboxapi.URLPolicy{AllowFile: true, AllowHTTP: true})
	if err != nil {
		return sandboxapi.RepoIdentity{}, err
	}
	if id.Host != repo.Host || id.Owner != repo.Owner || id.Name != repo.Name {
		return sandboxapi.RepoIdentity{}, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument,
			"repository identity %q does not match its URL's %q", repo.Key(), id.Key())
	}
	return id, nil
}

// hostDir maps a host[:port] to a path component: ':' becomes '_'.
func hostDir(host string) string { return strings.ReplaceAll(host, ":", "_") }

// repoDir is <Root>/repos/<host>/<owner>/<repo> for a validated identity.
func (c *Cache) repoDir(id sandboxapi.RepoIdentity) string {
	return filepath.Join(c.reposDir, hostDir(id.Host), filepath.FromSlash(id.Owner), id.Name)
}

// Path returns the absolute path of repo's bare mirror,
// <Root>/repos/<host>/<owner>/<repo>/.bare (DESIGN.md "The three things"),
// whether or not it exists. It returns "" when repo is not a valid identity
// (its Host, Owner and Name must be what sandboxapi.ParseRepoURL derives from its URL).
func (c *Cache) Path(repo sandboxapi.RepoIdentity) string {
	id, err := identity(repo)
	if err != nil {
		return ""
	}
	return filepath.Join(c.repoDir(id), bareDirName)
}

func (c *Cache) lockPath(id sandboxapi.RepoIdentity) string { return c.repoDir(id) + ".lock" }
func (c *Cache) stagingDir() string                         { return filepath.Join(c.reposDir, stagingDirName) }
func (c *Cache) trashDir() string                           { return filepath.Join(c.reposDir, trashDirName) }

// Ensure returns a ready cache for repo (sandbox.RepoCacheProvider.Ensure):
//
//   - missing: cloned once into <Root>/repos/.staging/<id>-<random> (git init
//     --bare, ls-remote --symref for the default branch, fetch with the
//     explicit refspec BranchRefspec plus --tags --force (tags as with
//     +refs/tags/*:refs/tags/*, but never pruned), git fsck
//     --connectivity-only, ReadyMarker written last), then renamed into
//     place atomically (rename(2) on one filesystem);
//   - present but incomplete (no ReadyMarker, or not a bare repository): moved
//     aside, deleted and recloned; stale staging directories of repo are deleted.
//     An incomplete directory that holds agent branches (refs/heads/*), saved
//     workspace states (refs/sandbox/*) or worktree registrations is moved to <Root>/repos/.broken and kept, not
//     deleted ("Eviction never loses work");
//   - ready: fetched when forceFetch or when the last fetch is at least
//     FreshFor old, otherwise returned as is (no network). A failed fetch is
//     an error even though the older mirror stays usable on disk.
//
// Within the freshness window no git call reaches the remote, so cred is not
// checked against it: deciding whether a user may read the repository is the
// caller's business (use forceFetch to make the remote check cred).
//
// All of it runs under LockRepo. cred may be nil; it is sent per call (HTTP
// basic auth through gitx) for http(s) URLs only and ignored for file:// and
// ssh URLs. The result carries every sandbox_repo_caches column (docs/DESIGN.md
// "Storage model"); the caller persists it. Errors wrap ErrInvalidArgument (bad
// identity), ErrRepoAuthFailed (credentials refused or missing; never
// prompts), ErrRepoCacheUnavailable (unreachable or missing remote, other git
// failures), ErrInsufficientDisk, ErrRepoLocked (lock not obtained before ctx
// ended, or a git lock file held), ErrTimeout (a git call timed out). After a
// failed clone nothing is left at the final path.
func (c *Cache) Ensure(ctx context.Context, repo sandboxapi.RepoIdentity, cred *sandbox.Credential, forceFetch bool) (sandbox.RepoCache, error) {
	id, err := identity(repo)
	if err != nil {
		return sandbox.RepoCache{}, err
	}
	if !isHTTP(id.URL) {
		cred = nil // gitx can only scope a credential to an http(s) remote
	}
	unlock, err := c.LockRepo(ctx, id)
	if err != nil {
		return sandbox.RepoCache{}, err
	}
	defer unlock()

	c.cleanLeftovers(id)
	bare := filepath.Join(c.repoDir(id), bareDirName)
	state, err := c.inspect(ctx, bare)
	if err != nil {
		return sandbox.RepoCache{}, err
	}
	changed := state != stateReady
	// The transfer this call makes, reported once its size is known.
	var transfer struct {
		op     string
		start  time.Time
		before int64
	}
	report := func(bytes int64, err error) {
		if c.onTransfer != nil && transfer.op != "" {
			c.onTransfer(transfer.op, time.Since(transfer.start), max(bytes, 0), err)
		}
	}
	switch state {
	case stateBroken:
		if holdsAgentWork(bare) {
			// Never reached by this package's own writes (the marker goes in
			// before the rename); kept for an operator rather than deleted,
			// because agent branches and worktree registrations live here.
			kept, err := c.keepAside(id, bare)
			if err != nil {
				return sandbox.RepoCache{}, err
			}
			c.log.ErrorContext(ctx, "repocache: incomplete mirror holding agent refs or worktrees kept aside", "repo", id.Key(), "path", bare, "kept", kept)
		} else {
			c.log.WarnContext(ctx, "repocache: incomplete mirror moved aside", "repo", id.Key(), "path", bare)
			if err := c.moveAside(id, bare); err != nil {
				return sandbox.RepoCache{}, err
			}
		}
		fallthrough
	case stateMissing:
		transfer.op, transfer.start = "clone", time.Now()
		if err := c.clone(ctx, id, bare, cred); err != nil {
			report(0, err)
			return sandbox.RepoCache{}, err
		}
	case stateReady:
		if forceFetch || c.stale(bare) {
			if err := c.sanitize(ctx, id, bare); err != nil {
				return sandbox.RepoCache{}, err
			}
			start := c.now()
			transfer.op, transfer.start, transfer.before = "fetch", time.Now(), c.recordedSize(bare)
			if _, err := c.fetch(ctx, "fetch", id, bare, cred); err != nil {
				report(0, err)
				return sandbox.RepoCache{}, err
			}
			c.log.InfoContext(ctx, "repocache: fetched", "repo", id.Key(), "forced", forceFetch, "duration", c.now().Sub(start))
			changed = true
		}
	}
	rc, err := c.describe(ctx, id, bare, changed)
	if err != nil {
		report(0, err)
	} else {
		report(rc.SizeBytes-transfer.before, nil)
	}
	return rc, err
}

// run is a git call on the repository at dir; GIT_DIR pins it so git never
// discovers an enclosing repository when dir is not one.
func (c *Cache) run(ctx context.Context, dir string, timeout time.Duration, cred *sandbox.Credential, remote string, args ...string) ([]byte, error) {
	return c.git.Run(ctx, gitx.Call{
		Dir:       dir,
		Args:      args,
		Env:       []string{"GIT_DIR=" + dir},
		Cred:      cred,
		RemoteURL: remote,
		Timeout:   timeout,
	})
}

func isHTTP(u string) bool {
	return strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://")
}

func isHex(s string, lo, hi int) bool {
	if len(s) < lo || len(s) > hi {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if !(ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'f' || ch >= 'A' && ch <= 'F') {
			return false
		}
	}
	return true
}

func randomHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
