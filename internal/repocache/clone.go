package repocache

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

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
