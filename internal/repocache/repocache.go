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
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
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

// recordedSize is the mirror size recorded by the last measurement (0 when
// none is recorded).
func (c *Cache) recordedSize(bare string) int64 {
	b, err := os.ReadFile(filepath.Join(bare, SizeMarker))
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

type mirrorState int

const (
	stateMissing mirrorState = iota
	stateBroken
	stateReady
)

// inspect classifies the final path: missing, broken (anything but a bare
// repository carrying ReadyMarker) or ready. It returns an error, and never
// "broken", when it cannot tell (ctx ended, git could not run, or git failed
// for a reason other than "not a git repository"): a transient failure must
// not get a good mirror moved aside.
func (c *Cache) inspect(ctx context.Context, bare string) (mirrorState, error) {
	fi, err := os.Lstat(bare)
	if errors.Is(err, fs.ErrNotExist) {
		return stateMissing, nil
	}
	if err != nil {
		return stateMissing, fsError(err, "inspect "+bare)
	}
	if !fi.IsDir() {
		return stateBroken, nil
	}
	if mi, err := os.Lstat(filepath.Join(bare, ReadyMarker)); err != nil || !mi.Mode().IsRegular() {
		return stateBroken, nil
	}
	out, err := c.run(ctx, bare, localTimeout, nil, "", "rev-parse", "--is-bare-repository")
	if err != nil {
		var ge *gitx.Error
		if ctx.Err() == nil && errors.As(err, &ge) && strings.Contains(ge.Stderr, "not a git repository") {
			return stateBroken, nil
		}
		return stateMissing, gitx.Classify(err, "inspect "+bare, sandboxapi.ErrRepoCacheUnavailable)
	}
	if strings.TrimSpace(string(out)) != "true" {
		return stateBroken, nil
	}
	return stateReady, nil
}

// stale reports whether the last fetch recorded in bare is outside the
// freshness window (or unknown, or in the future).
func (c *Cache) stale(bare string) bool {
	if c.freshFor < 0 {
		return true
	}
	last, ok := readTime(filepath.Join(bare, FetchedMarker))
	if !ok {
		return true
	}
	age := c.now().Sub(last)
	return age < 0 || age >= c.freshFor
}

// clone builds the mirror in a staging directory and renames it into place.
func (c *Cache) clone(ctx context.Context, id sandboxapi.RepoIdentity, bare string, cred *sandbox.Credential) (err error) {
	start := c.now()
	what := "clone " + id.Key()
	if err := os.MkdirAll(c.stagingDir(), 0o755); err != nil {
		return fsError(err, what)
	}
	staging, err := os.MkdirTemp(c.stagingDir(), sandbox.RepoCacheIDFor(c.hostID, id)+"-")
	if err != nil {
		return fsError(err, what)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(staging)
		}
	}()
	// --template= : no sample hooks or other template files in the mirror.
	if _, err := c.git.Run(ctx, gitx.Call{Dir: staging, Args: []string{"init", "--bare", "--quiet", "--template="}, Timeout: localTimeout}); err != nil {
		return gitx.Classify(err, what, sandboxapi.ErrRepoCacheUnavailable)
	}
	// Only the credential-free URL and the branch refspec are configured, for
	// agents' own git in worktrees; this package passes the URL and refspecs
	// explicitly on every call and never trusts the (agent-writable) config.
	for _, kv := range [][2]string{
		{"remote.origin.url", id.URL},
		{"remote.origin.fetch", BranchRefspec},
	} {
		if _, err := c.run(ctx, staging, localTimeout, nil, "", "config", kv[0], kv[1]); err != nil {
			return gitx.Classify(err, what, sandboxapi.ErrRepoCacheUnavailable)
		}
	}
	if err := c.seedFromMove(ctx, id, staging); err != nil {
		return err
	}
	branch, err := c.fetch(ctx, "clone", id, staging, cred)
	if err != nil {
		return err
	}
	// fetch already checks the connectivity of what it received; this is the
	// explicit whole-repository check the clone is trusted on (git-fsck(1)).
	if _, err := c.run(ctx, staging, c.netTimeout, nil, "", "fsck", "--connectivity-only", "--no-progress", "--no-dangling"); err != nil {
		if ge := (*gitx.Error)(nil); errors.As(err, &ge) && brokenHistory.MatchString(ge.Stderr) {
			// What the fetch received does not connect: the remote sent an
			// incomplete history. Fetching again brings the same.
			return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "%s: verify: the history received is incomplete (%s): %s", what, sandboxapi.Clip(strings.TrimSpace(ge.Stderr), 256), gitx.IncompleteUpstreamMessage)
		}
		return gitx.Classify(err, what+": verify", sandboxapi.ErrRepoCacheUnavailable)
	}
	if err := writeFileSync(filepath.Join(staging, ReadyMarker), formatTime(c.now())); err != nil {
		return fsError(err, what)
	}
	parent := filepath.Dir(bare)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fsError(err, what)
	}
	if err := os.Rename(staging, bare); err != nil {
		return fsError(err, what+": rename into place")
	}
	syncDir(parent)
	c.log.InfoContext(ctx, "repocache: cloned", "repo", id.Key(), "path", bare, "default_branch", branch, "duration", c.now().Sub(start))
	return nil
}

// brokenHistory matches git fsck's report of objects or refs whose history
// is not all there.
var brokenHistory = regexp.MustCompile(`(?i)missing (blob|tree|commit|tag)|broken link|invalid sha1 pointer`)

// fetch updates dir from the remote (op, "clone" or "fetch", names the
// operation in errors): it resolves the remote's default branch
// (git ls-remote --symref <url> HEAD), fetches
//
//	git fetch --prune --tags --force <url> +refs/heads/*:refs/remotes/origin/*
//
// and points refs/remotes/origin/HEAD (and the bare HEAD) at the default
// branch. Tags arrive through --tags (equivalent to the refspec
// +refs/tags/*:refs/tags/* with --force) rather than an explicit tag refspec
// because git-fetch(1) "PRUNING" exempts tags fetched by --tags from --prune:
// an explicit refs/tags/* refspec would delete tags an agent made in its
// worktree. So --prune removes only refs/remotes/origin/* refs whose branch is
// gone upstream; refs/heads/* is never a destination. It records the fetch
// time and auth scope in dir and returns the default branch ("" when the
// remote has no HEAD, e.g. an empty repository).
func (c *Cache) fetch(ctx context.Context, op string, id sandboxapi.RepoIdentity, dir string, cred *sandbox.Credential) (string, error) {
	what := op + " " + id.Key()
	// The fetch time recorded is when it started: the mirror then holds
	// everything the remote had at that moment (RepoCache.LastFetchedAt).
	started := c.now()
	remote := id.URL
	out, err := c.run(ctx, dir, c.netTimeout, cred, remote, "ls-remote", "--symref", "--end-of-options", remote, "HEAD")
	if _, moved := gitx.Redirected(err); moved && isHTTP(remote) {
		// Renamed or transferred on its host: fetch from the new location
		// (same scheme and host only; gitx.Runner.Locate) and remember the
		// move, so that an acquire by the new name reuses this mirror's
		// objects instead of cloning again (recordMove, seedFromMove).
		mv, ok, lerr := c.git.Locate(ctx, remote, cred)
		if lerr != nil {
			return "", lerr
		}
		if ok {
			remote = mv.URL
			c.log.WarnContext(ctx, "repocache: the repository moved on its host; following it", "repo", id.Key(), "to", remote, "permanent", mv.Permanent)
			if mv.Permanent {
				c.recordMove(id, remote)
			}
		}
		out, err = c.run(ctx, dir, c.netTimeout, cred, remote, "ls-remote", "--symref", "--end-of-options", remote, "HEAD")
	}
	if err != nil {
		return "", gitx.Classify(err, what+": ls-remote", sandboxapi.ErrRepoCacheUnavailable)
	}
	branch, headSHA := parseSymrefHead(string(out))
	if _, err := c.run(ctx, dir, c.netTimeout, cred, remote,
		"fetch", "--quiet", "--prune", "--tags", "--force", "--no-write-fetch-head",
		"--no-recurse-submodules", "--no-auto-maintenance", "--no-show-forced-updates",
		"--end-of-options", remote, BranchRefspec); err != nil {
		return "", gitx.Classify(err, what, sandboxapi.ErrRepoCacheUnavailable)
	}
	if branch != "" {
		// A shallow remote's branches arrive with their history cut, which
		// git refuses to store ("shallow roots are not allowed to be
		// updated": a warning, and the fetch exits 0), so the default
		// branch the remote advertised is then missing here.
		if _, err := c.run(ctx, dir, localTimeout, nil, "", "rev-parse", "--verify", "--quiet", "--end-of-options", RemoteRefPrefix+branch+"^{commit}"); err != nil {
			return "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "%s: the remote advertised branch %s but did not send its history: %s", what, branch, gitx.IncompleteUpstreamMessage)
		}
	}
	if err := writeOrRemove(filepath.Join(dir, LocationMarker), remote, remote != id.URL); err != nil {
		return "", fsError(err, what)
	}
	if branch == "" && headSHA != "" {
		// Detached remote HEAD (old servers, some mirrors): like git clone, pick
		// a branch at that commit.
		branch = c.guessBranch(ctx, dir, headSHA)
	}
	if branch != "" {
		if _, err := c.run(ctx, dir, localTimeout, nil, "", "symbolic-ref", "--end-of-options", OriginHEAD, RemoteRefPrefix+branch); err != nil {
			return "", gitx.Classify(err, what+": set origin/HEAD", sandboxapi.ErrRepoCacheUnavailable)
		}
		// Like git clone --bare; the branch itself is never created here.
		if _, err := c.run(ctx, dir, localTimeout, nil, "", "symbolic-ref", "--end-of-options", "HEAD", "refs/heads/"+branch); err != nil {
			return "", gitx.Classify(err, what+": set HEAD", sandboxapi.ErrRepoCacheUnavailable)
		}
	} else {
		branch = c.defaultBranch(ctx, dir) // keep what an earlier fetch found
	}
	if err := writeFileSync(filepath.Join(dir, AuthScopeMarker), AuthScopeHash(cred)); err != nil {
		return "", fsError(err, what)
	}
	if err := writeFileSync(filepath.Join(dir, FetchedMarker), formatTime(started)); err != nil {
		return "", fsError(err, what)
	}
	return branch, nil
}

// sanitize inspects the mirror's configuration before a fetch
// (gitx.Runner.Inspect; an agent's `git config` in a worktree writes it),
// logs every poisoned variable as a warning, and deletes from the mirror's
// own config files (config, config.worktree) the variables that would
// redirect a fetch and that gitx therefore refuses to fetch with
// (url.<base>.insteadOf, url.<base>.pushInsteadOf, a remote named like a
// URL): the mirror is shared by every workspace of the repository, so one
// agent's redirect must not break (or poison) the others' fetches. The
// other poisoned variables are neutralized by gitx on every call and left
// in place. A redirect defined elsewhere (an included file) stays, and the
// fetch then fails with ErrCommandRejected naming it.
func (c *Cache) sanitize(ctx context.Context, id sandboxapi.RepoIdentity, bare string) error {
	env := []string{"GIT_DIR=" + bare}
	ins, err := c.git.Inspect(ctx, gitx.Call{Dir: bare, Env: env})
	if err != nil {
		return gitx.Classify(err, "read the configuration of "+id.Key(), sandboxapi.ErrRepoCacheUnavailable)
	}
	if len(ins.Poisoned) == 0 {
		return nil
	}
	keys := make([]string, len(ins.Poisoned))
	for i, p := range ins.Poisoned {
		keys[i] = p.String()
	}
	c.log.WarnContext(ctx, "repocache: the mirror's configuration sets variables that could run programs or redirect git; host-side git neutralizes or refuses them",
		"repo", id.Key(), "path", bare, "poisoned", keys)
	for _, p := range ins.Redirects() {
		for _, f := range []string{"config", "config.worktree"} {
			file := filepath.Join(bare, f)
			if _, err := os.Lstat(file); err != nil {
				continue
			}
			if _, err := c.git.Run(ctx, gitx.Call{Dir: bare, Env: env, Timeout: localTimeout,
				Args: []string{"config", "--file", file, "--unset-all", "--end-of-options", p.Key}}); err == nil {
				c.log.WarnContext(ctx, "repocache: removed a variable redirecting fetches from the mirror's configuration", "repo", id.Key(), "file", file, "key", p.Key)
			}
		}
	}
	return nil
}

// parseSymrefHead reads `git ls-remote --symref <url> HEAD` output:
//
//	ref: refs/heads/<branch>\tHEAD
//	<sha>\tHEAD
//
// It returns the branch only when it is a valid ref name (the remote is untrusted).
func parseSymrefHead(out string) (branch, sha string) {
	for _, line := range strings.Split(out, "\n") {
		left, right, ok := strings.Cut(line, "\t")
		if !ok || strings.TrimSpace(right) != "HEAD" {
			continue
		}
		if target, ok := strings.CutPrefix(left, "ref: "); ok {
			if b, ok := strings.CutPrefix(target, "refs/heads/"); ok && sandboxapi.ValidateRef(b) == nil {
				branch = b
			}
			continue
		}
		if isHex(left, 40, 64) {
			sha = left
		}
	}
	return branch, sha
}

// guessBranch returns a remote-tracking branch at sha, preferring one named
// "main" or "master" (git clone's guess for a detached remote HEAD), or "".
func (c *Cache) guessBranch(ctx context.Context, dir, sha string) string {
	out, err := c.run(ctx, dir, localTimeout, nil, "", "for-each-ref", "--format=%(refname)", "--points-at", sha, "--end-of-options", "refs/remotes/origin/")
	if err != nil {
		return ""
	}
	var first string
	for _, ref := range strings.Fields(string(out)) {
		b := strings.TrimPrefix(ref, RemoteRefPrefix)
		if b == "HEAD" || sandboxapi.ValidateRef(b) != nil {
			continue
		}
		if b == "main" || b == "master" {
			return b
		}
		if first == "" {
			first = b
		}
	}
	return first
}

// defaultBranch reads refs/remotes/origin/HEAD; "" when unset.
func (c *Cache) defaultBranch(ctx context.Context, dir string) string {
	// A symbolic ref is always a loose file ("ref: <target>"), never packed:
	// read it as `git symbolic-ref` would, without a process; anything else
	// (no such file, another ref store) asks git.
	if b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(OriginHEAD))); err == nil && len(b) < 1024 {
		if ref, ok := strings.CutPrefix(strings.TrimSuffix(string(b), "\n"), "ref: "); ok &&
			strings.HasPrefix(ref, RemoteRefPrefix) && !strings.ContainsAny(ref, "\n\x00") {
			return strings.TrimPrefix(ref, RemoteRefPrefix)
		}
	}
	out, err := c.run(ctx, dir, localTimeout, nil, "", "symbolic-ref", "--quiet", OriginHEAD)
	if err != nil {
		return ""
	}
	return strings.TrimPrefix(strings.TrimSpace(string(out)), RemoteRefPrefix)
}

// describe builds the sandbox_repo_caches row of a ready mirror. The size is
// measured again only when remeasure (after a clone or fetch) or when no
// SizeMarker is there yet.
func (c *Cache) describe(ctx context.Context, id sandboxapi.RepoIdentity, bare string, remeasure bool) (sandbox.RepoCache, error) {
	now := c.now().UTC()
	created, ok := readTime(filepath.Join(bare, ReadyMarker))
	if !ok {
		if fi, err := os.Stat(filepath.Join(bare, ReadyMarker)); err == nil {
			created = fi.ModTime().UTC()
		}
	}
	fetched, _ := readTime(filepath.Join(bare, FetchedMarker))
	scope, _ := os.ReadFile(filepath.Join(bare, AuthScopeMarker))
	size, err := c.mirrorSize(bare, remeasure)
	if err != nil {
		return sandbox.RepoCache{}, err
	}
	return sandbox.RepoCache{
		ID:            sandbox.RepoCacheIDFor(c.hostID, id),
		RepoName:      id.FullName(),
		RepoURL:       id.URL,
		Provider:      ProviderLocal,
		ProviderHost:  id.Host,
		LocalPath:     bare,
		AuthScopeHash: strings.TrimSpace(string(scope)),
		DefaultBranch: c.defaultBranch(ctx, bare),
		HostID:        c.hostID,
		LastFetchedAt: fetched,
		LastUsedAt:    now,
		SizeBytes:     size,
		State:         sandbox.RepoCacheReady,
		CreatedAt:     created,
		UpdatedAt:     now,
	}, nil
}

// Remove deletes repo's mirror (sandbox.RepoCacheProvider.Remove): under
// LockRepo, the bare directory is renamed into <Root>/repos/.trash and deleted
// from there, so no reader ever sees a half-deleted mirror at the final path.
// A missing mirror is success. The lock file and the repository's worktrees
// directory are left alone (callers remove workspaces first; the repository
// directory itself is removed only when empty). Errors wrap
// ErrInvalidArgument, ErrRepoLocked, ErrRepoCacheUnavailable.
func (c *Cache) Remove(ctx context.Context, repo sandboxapi.RepoIdentity) error {
	id, err := identity(repo)
	if err != nil {
		return err
	}
	unlock, err := c.LockRepo(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	c.cleanLeftovers(id)
	bare := filepath.Join(c.repoDir(id), bareDirName)
	if _, err := os.Lstat(bare); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := c.moveAside(id, bare); err != nil {
		return err
	}
	_ = os.Remove(c.repoDir(id)) // only succeeds when empty
	c.log.InfoContext(ctx, "repocache: removed", "repo", id.Key(), "path", bare)
	return nil
}

// moveAside renames dir into the trash and deletes it there. A failed delete
// is retried by the next cleanLeftovers of the same repository.
func (c *Cache) moveAside(id sandboxapi.RepoIdentity, dir string) error {
	if err := os.MkdirAll(c.trashDir(), 0o755); err != nil {
		return fsError(err, "move aside "+dir)
	}
	dst := filepath.Join(c.trashDir(), sandbox.RepoCacheIDFor(c.hostID, id)+"-"+randomHex())
	if err := os.Rename(dir, dst); err != nil {
		return fsError(err, "move aside "+dir)
	}
	if err := os.RemoveAll(dst); err != nil {
		c.log.Warn("repocache: delete moved-aside mirror", "path", dst, "error", err)
	}
	return nil
}

// keepAside renames dir to <Root>/repos/.broken/<cache-id>-<unix-seconds>-<random>
// and keeps it (nothing ever deletes .broken) and returns the new path.
func (c *Cache) keepAside(id sandboxapi.RepoIdentity, dir string) (string, error) {
	broken := filepath.Join(c.reposDir, brokenDirName)
	if err := os.MkdirAll(broken, 0o755); err != nil {
		return "", fsError(err, "move aside "+dir)
	}
	dst := filepath.Join(broken, fmt.Sprintf("%s-%d-%s", sandbox.RepoCacheIDFor(c.hostID, id), c.now().Unix(), randomHex()))
	if err := os.Rename(dir, dst); err != nil {
		return "", fsError(err, "move aside "+dir)
	}
	return dst, nil
}

// holdsAgentWork reports whether a (broken) bare directory contains anything
// agents made: a registered worktree, a branch, or a saved state of a
// workspace (eviction and destroy backups, checkpoints: refs/sandbox/*),
// loose or packed.
func holdsAgentWork(bare string) bool {
	if entries, err := os.ReadDir(filepath.Join(bare, "worktrees")); err == nil && len(entries) > 0 {
		return true
	}
	for _, dir := range []string{"heads", "sandbox"} {
		found := false
		_ = filepath.WalkDir(filepath.Join(bare, "refs", dir), func(_ string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				found = true
				return filepath.SkipAll
			}
			return nil
		})
		if found {
			return true
		}
	}
	if b, err := os.ReadFile(filepath.Join(bare, "packed-refs")); err == nil &&
		(strings.Contains(string(b), " refs/heads/") || strings.Contains(string(b), " refs/sandbox/")) {
		return true
	}
	return false
}

// cleanLeftovers deletes repo's staging directories (a clone killed
// mid-way: never trusted) and trash. Called under the repository lock, so no
// live clone of this repository can own them.
func (c *Cache) cleanLeftovers(id sandboxapi.RepoIdentity) {
	prefix := sandbox.RepoCacheIDFor(c.hostID, id) + "-"
	for _, dir := range []string{c.stagingDir(), c.trashDir()} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), prefix) {
				p := filepath.Join(dir, e.Name())
				if err := os.RemoveAll(p); err != nil {
					c.log.Warn("repocache: delete leftover", "path", p, "error", err)
				} else {
					c.log.Info("repocache: deleted leftover", "repo", id.Key(), "path", p)
				}
			}
		}
	}
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

// AuthScopeHash returns RepoCache.AuthScopeHash for a credential: the
// lowercase hex sha256 of its Username (never of the secret), or "" for nil.
// It tells which identity last fetched a mirror without revealing anything usable.
func AuthScopeHash(cred *sandbox.Credential) string {
	if cred == nil {
		return ""
	}
	sum := sha256.Sum256([]byte(cred.Username))
	return hex.EncodeToString(sum[:])
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

func formatTime(t time.Time) string { return strconv.FormatInt(t.UnixNano(), 10) + "\n" }

// readTime reads a decimal Unix-nanoseconds file.
func readTime(path string) (time.Time, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, n).UTC(), true
}

// writeFileSync replaces path atomically (temp file + rename) and syncs it.
func writeFileSync(path, content string) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(content)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

func syncDir(dir string) {
	if f, err := os.Open(dir); err == nil {
		_ = f.Sync()
		_ = f.Close()
	}
}

// mirrorSize returns the recorded size of a mirror, measuring (and recording)
// it when asked or when nothing is recorded. Errors wrap ErrInsufficientDisk
// or ErrRepoCacheUnavailable.
func (c *Cache) mirrorSize(bare string, remeasure bool) (int64, error) {
	marker := filepath.Join(bare, SizeMarker)
	if !remeasure {
		if b, err := os.ReadFile(marker); err == nil {
			if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n >= 0 {
				return n, nil
			}
		}
	}
	size, err := dirSize(bare)
	if err != nil {
		return 0, fsError(err, "size of "+bare)
	}
	if err := writeFileSync(marker, strconv.FormatInt(size, 10)+"\n"); err != nil {
		c.log.Warn("repocache: record mirror size", "path", marker, "error", err)
	}
	return size, nil
}

// dirSize sums the sizes of the regular files under dir (symlinks not followed), in bytes.
func dirSize(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // a file removed by a concurrent git process
			}
			return err
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				total += fi.Size()
			}
		}
		return nil
	})
	return total, err
}
