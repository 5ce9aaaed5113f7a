// Package depcache keeps the dependency caches of sandboxcore's runtimes
// (docs/RUNTIMES.md "Dependency caches"): one host directory per scope key
// holding the package managers' download and build caches (Go modules and
// build cache, npm, Yarn, pip, Cargo, Maven, Gradle), mounted read-write at
// its own host path into every runtime of a workspace that mounts host
// directories, with the ecosystems' variables (Env) pointing into it.
//
// A cache is shared by the workspaces of one scope key (Scope): by default
// one user's workspaces of one repository; other users never see it, so a
// package one user's command planted in the cache (a poisoned entry) never
// reaches another user's build. Caches live under Root/<scope>/<key>, are
// never part of a worktree or its diff, and survive hibernate, release and
// worker restarts; the eviction planner deletes the least recently used
// first when the disk is short (after runtimes and workspaces).
package depcache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/volume"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Scope is how widely one dependency cache is shared (SANDBOX_CACHE_SCOPE).
type Scope string

// Scopes.
const (
	// ScopeUser: one user's workspaces of one repository share a cache
	// (the default); other users never do.
	ScopeUser Scope = "user"
	// ScopeRepo: every workspace of one repository shares a cache, across
	// users: a user's command can plant a package another user's build
	// then runs. For a single user or trusted users only.
	ScopeRepo Scope = "repo"
	// ScopeWorkspace: each workspace has a cache of its own (no sharing;
	// a new workspace starts cold).
	ScopeWorkspace Scope = "workspace"
)

// DefaultScope is SANDBOX_CACHE_SCOPE's default.
const DefaultScope = ScopeUser

// ParseScope returns the Scope s names. Errors: sandboxapi.ErrInvalidArgument
// for anything but "user", "repo" and "workspace".
func ParseScope(s string) (Scope, error) {
	switch sc := Scope(s); sc {
	case ScopeUser, ScopeRepo, ScopeWorkspace:
		return sc, nil
	}
	return "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "cache scope %q: want user, repo or workspace", s)
}

// stampFile is touched in a cache directory each time a runtime is given
// it: its modification time is the cache's last use (Entry.LastUsedAt).
const stampFile = ".sandboxcore-last-used"

// KeyLen is the length of a cache key: lowercase hex digits.
const KeyLen = 32

// Key returns the cache key of ws under scope: a hash of what the scope
// shares by (user and repo cache, repo cache, or workspace id), KeyLen
// lowercase hex digits, so no id reaches a path unhashed.
func Key(scope Scope, ws sandboxapi.Workspace) string {
	var parts []string
	switch scope {
	case ScopeRepo:
		parts = []string{"repo", ws.RepoCacheID}
	case ScopeWorkspace:
		parts = []string{"workspace", ws.ID}
	default:
		parts = []string{"user", ws.UserID, ws.RepoCacheID}
	}
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:])[:KeyLen]
}

// Caches are the dependency caches of one host under Root.
type Caches struct {
	// Root is the directory holding every cache (<SANDBOX_DATA_DIR>/depcache).
	Root string
	// Scope decides which workspaces share a cache.
	Scope Scope
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Volumes, when set, gives each new cache a file system of its own of
	// VolumeBytes bytes (package volume; docs/SECURITY.md "Disk volumes"):
	// the kernel then keeps the cache's quota, and a full cache fails its
	// writers' writes instead of stopping every runtime that shares it.
	// A cache made before stays a plain directory.
	Volumes     *volume.Manager
	VolumeBytes int64
}

// Dir returns the host directory of ws's cache (it may not exist yet).
func (c *Caches) Dir(ws sandboxapi.Workspace) string {
	return filepath.Join(c.Root, string(c.scope()), Key(c.scope(), ws))
}

// Shared reports whether a cache may be mounted by more than one
// workspace (every scope but ScopeWorkspace): sandbox.Mount.Shared.
func (c *Caches) Shared() bool { return c.scope() != ScopeWorkspace }

func (c *Caches) scope() Scope {
	if c.Scope == "" {
		return DefaultScope
	}
	return c.Scope
}

func (c *Caches) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Prepare makes ws's cache directory when missing (mode 0700, owned like
// the worktree at ws.LocalPath when the worker may give it away, so the
// sandbox's user can write it), marks it used now, and returns its path.
// Errors: sandboxapi.ErrInsufficientDisk when the disk is full,
// sandboxapi.ErrRuntimeUnavailable for another file-system failure.
func (c *Caches) Prepare(ws sandboxapi.Workspace) (string, error) {
	dir := c.Dir(ws)
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return "", fsError(err, "dependency cache root")
	}
	var err error
	if c.Volumes != nil && (c.Volumes.Has(dir) || !exists(dir)) {
		if err = c.Volumes.Attach(context.Background(), dir, c.VolumeBytes); err == nil {
			err = os.Chmod(dir, 0o700)
		}
		if err != nil {
			return "", sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "dependency cache %s: %v", filepath.Base(dir), err)
		}
	} else {
		err = os.Mkdir(dir, 0o700)
	}
	switch {
	case err == nil:
		if fi, serr := os.Stat(ws.LocalPath); serr == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
				if err := os.Chown(dir, int(st.Uid), int(st.Gid)); err != nil {
					_ = os.Remove(dir)
					return "", fsError(err, "dependency cache "+filepath.Base(dir))
				}
			}
		}
	case !errors.Is(err, fs.ErrExist):
		return "", fsError(err, "dependency cache "+filepath.Base(dir))
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return "", sandboxapi.Errorf(sandboxapi.ErrRuntimeUnavailable, "dependency cache %s is not a directory", filepath.Base(dir))
	}
	c.touch(dir)
	return dir, nil
}

// touch records a use of the cache at dir. The stamp lives in the cache's
// parent, outside what the sandbox can write, so a command cannot make its
// cache look recently used.
func (c *Caches) touch(dir string) {
	stamp := dir + stampFile
	now := c.now()
	if err := os.Chtimes(stamp, now, now); errors.Is(err, fs.ErrNotExist) {
		if f, err := os.OpenFile(stamp, os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
			_ = f.Close()
			_ = os.Chtimes(stamp, now, now)
		}
	}
}

// Env returns the variables pointing every supported package manager's
// cache into dir (a cache directory as the runtime sees it): Go's module
// and build caches, npm, Yarn, pip, Cargo's home, Maven's local
// repository and Gradle's user home.
func Env(dir string) map[string]string {
	return map[string]string{
		"GOMODCACHE":        filepath.Join(dir, "go", "mod"),
		"GOCACHE":           filepath.Join(dir, "go", "build"),
		"npm_config_cache":  filepath.Join(dir, "npm"),
		"YARN_CACHE_FOLDER": filepath.Join(dir, "yarn"),
		"PIP_CACHE_DIR":     filepath.Join(dir, "pip"),
		"CARGO_HOME":        filepath.Join(dir, "cargo"),
		"MAVEN_OPTS":        "-Dmaven.repo.local=" + filepath.Join(dir, "maven", "repository"),
		"GRADLE_USER_HOME":  filepath.Join(dir, "gradle"),
	}
}

// Entry is one cache directory on the host as the eviction planner sees it.
type Entry struct {
	// Scope and Key name the cache; Path is its host directory.
	Scope Scope
	Key   string
	Path  string
	// SizeBytes is the bytes its files take (apparent sizes, summed).
	SizeBytes int64
	// LastUsedAt is when a runtime was last given the cache.
	LastUsedAt time.Time
}

// ID returns "<scope>/<key>", the cache's name in plans and logs.
func (e Entry) ID() string { return string(e.Scope) + "/" + e.Key }

// List returns every cache under Root, of every scope (a cache made under
// an earlier SANDBOX_CACHE_SCOPE is listed too) and every prepared tree
// (Scope PreparedScope), sorted by ID. A missing Root is no cache.
func (c *Caches) List() ([]Entry, error) {
	var out []Entry
	for _, sc := range []Scope{PreparedScope, ScopeRepo, ScopeUser, ScopeWorkspace} {
		base := filepath.Join(c.Root, string(sc))
		des, err := os.ReadDir(base)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return nil, fsError(err, "list dependency caches")
		}
		for _, de := range des {
			if !de.IsDir() || !validKey(de.Name()) {
				continue
			}
			e := Entry{Scope: sc, Key: de.Name(), Path: filepath.Join(base, de.Name())}
			if fi, err := os.Stat(e.Path + stampFile); err == nil {
				e.LastUsedAt = fi.ModTime()
			} else if fi, err := de.Info(); err == nil {
				e.LastUsedAt = fi.ModTime()
			}
			e.SizeBytes = dirSize(e.Path)
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.ID(), b.ID()) })
	return out, nil
}

// Remove deletes the cache or prepared tree id ("<scope>/<key>",
// Entry.ID) and its stamp (a prepared tree is first renamed out of sight);
// a missing cache is success. Read-only directories inside (Go's module
// cache makes them) are made writable first. A command using the cache
// meanwhile sees its files vanish and downloads them again: a cache holds
// nothing that cannot be fetched again. Errors: sandboxapi.ErrInvalidArgument
// for an id that names no cache, sandboxapi.ErrRuntimeUnavailable when the
// deletion fails.
func (c *Caches) Remove(id string) error {
	sc, key, ok := strings.Cut(id, "/")
	if _, err := ParseScope(sc); !ok || (err != nil && Scope(sc) != PreparedScope) || !validKey(key) {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "dependency cache id %q: want <scope>/<%d hex digits>", id, KeyLen)
	}
	dir := filepath.Join(c.Root, sc, key)
	if Scope(sc) == PreparedScope {
		// Out of sight at once: a restore sees the whole tree or none.
		gone := filepath.Join(c.Root, sc, tmpPrefix+"removed-"+key)
		if err := os.Rename(dir, gone); err == nil {
			dir = gone
		}
	}
	if c.Volumes != nil {
		if err := c.Volumes.Detach(dir); err != nil {
			return fsError(err, "remove dependency cache "+id)
		}
	}
	if err := removeAll(dir); err != nil {
		return fsError(err, "remove dependency cache "+id)
	}
	if err := os.Remove(dir + stampFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fsError(err, "remove dependency cache "+id)
	}
	return nil
}

// RemoveWorkspace deletes ws's cache when the scope gives each workspace
// its own (ScopeWorkspace); shared caches stay for the scope's other
// workspaces and are left to eviction.
func (c *Caches) RemoveWorkspace(ws sandboxapi.Workspace) error {
	if c.scope() != ScopeWorkspace {
		return nil
	}
	return c.Remove(string(ScopeWorkspace) + "/" + Key(ScopeWorkspace, ws))
}

// exists reports whether anything is at p.
func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func validKey(k string) bool {
	if len(k) != KeyLen {
		return false
	}
	for _, r := range k {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}

// removeAll is os.RemoveAll that first gives the owner write permission on
// every directory below dir (never following symbolic links).
func removeAll(dir string) error {
	err := os.RemoveAll(dir)
	if err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// dirSize sums the apparent sizes of the regular files below dir, never
// following symbolic links; unreadable parts count as nothing.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// fsError classifies a file-system failure: ENOSPC/EDQUOT are
// sandboxapi.ErrInsufficientDisk, anything else sandboxapi.ErrRuntimeUnavailable.
func fsError(err error, what string) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return sandboxapi.Wrap(sandboxapi.ErrInsufficientDisk, err, "%s", what)
	}
	return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "%s", what)
}
