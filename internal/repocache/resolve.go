package repocache

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// ResolveRef resolves a user-supplied ref in cache's mirror to a full commit
// id (40 hex digits, or 64 in a SHA-256 repository). ref is validated with
// sandboxapi.ValidateRef first (ErrInvalidArgument). Candidates are tried in
// order, each with `git rev-parse --verify --quiet --end-of-options
// <candidate>^{commit}` (git-rev-parse(1); annotated tags are peeled):
//
//  1. ref itself when it starts with "refs/" (a full ref name);
//  2. refs/remotes/origin/<ref> (an upstream branch; "HEAD" is the default branch);
//  3. refs/tags/<ref>;
//  4. refs/heads/<ref> (an agent branch);
//  5. ref as a full or abbreviated commit id, when it is 4 to 64 hex digits
//     (an ambiguous abbreviation does not resolve).
//
// git's own DWIM rules are never used, so "main" cannot silently match some
// other ref. No lock is taken: refs are read atomically by git. Errors wrap
// ErrInvalidArgument (bad ref, or cache.LocalPath not a mirror under this
// Cache's root), ErrRefNotFound (no candidate names a commit),
// ErrRepoCacheUnavailable (the mirror is missing or broken).
func (c *Cache) ResolveRef(ctx context.Context, cache sandbox.RepoCache, ref string) (commit string, err error) {
	if err := sandboxapi.ValidateRef(ref); err != nil {
		return "", err
	}
	dir := cache.LocalPath
	if !c.owns(dir) {
		return "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "repo cache path %q is not a mirror under %s", dir, c.reposDir)
	}
	var cands []string
	if strings.HasPrefix(ref, "refs/") {
		cands = append(cands, ref)
	}
	cands = append(cands, RemoteRefPrefix+ref, "refs/tags/"+ref, "refs/heads/"+ref)
	if isHex(ref, 4, 64) {
		cands = append(cands, ref)
	}
	what := "resolve " + ref + " in " + cache.RepoName
	for _, cand := range cands {
		out, err := c.run(ctx, dir, localTimeout, nil, "", "rev-parse", "--verify", "--quiet", "--end-of-options", cand+"^{commit}")
		if err == nil {
			return strings.TrimSpace(string(out)), nil
		}
		if gitx.ExitCode(err) == 1 { // --quiet: not found, try the next candidate
			continue
		}
		return "", gitx.Classify(err, what, sandboxapi.ErrRepoCacheUnavailable)
	}
	return "", sandboxapi.Errorf(sandboxapi.ErrRefNotFound, "%s: no branch, tag or commit named %q", what, ref)
}

// owns reports whether dir is an absolute, clean path of a mirror under the
// cache's repos directory (<Root>/repos/<host>/<owner…>/<repo>/.bare).
func (c *Cache) owns(dir string) bool {
	if dir == "" || !filepath.IsAbs(dir) || filepath.Clean(dir) != dir || filepath.Base(dir) != bareDirName {
		return false
	}
	rel, err := filepath.Rel(c.reposDir, dir)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return false
	}
	first := strings.SplitN(rel, string(filepath.Separator), 2)[0]
	return !strings.HasPrefix(first, ".") // .staging, .trash, .broken; hosts never start with '.'

}
