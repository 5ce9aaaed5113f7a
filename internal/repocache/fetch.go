package repocache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

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
