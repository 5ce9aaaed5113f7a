package repocache

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func TestResolveRef(t *testing.T) {
	t.Parallel()
	c := newCache(t, nil)
	src, id := fileRepo(t)
	ctx := context.Background()
	first := gittest.Git(t, src, "rev-parse", "v1^{commit}")
	head := gittest.Git(t, src, "rev-parse", "HEAD")
	gittest.Git(t, src, "branch", "feature", first)
	gittest.Git(t, src, "tag", "lightweight", first)

	rc, err := c.Ensure(ctx, id, nil, false)
	require.NoError(t, err)
	bare := rc.LocalPath
	// Agent branches: one only local, one shadowing an upstream branch name.
	bareGit(t, bare, "update-ref", "refs/heads/agent/x", first)
	bareGit(t, bare, "update-ref", "refs/heads/trunk", first)
	// A tag and an upstream branch with the same name: the branch wins.
	bareGit(t, bare, "tag", "feature-or-tag", head)
	bareGit(t, bare, "update-ref", "refs/remotes/origin/feature-or-tag", first)

	for ref, want := range map[string]string{
		"trunk":                                head,  // origin/trunk, not the agent's refs/heads/trunk
		"HEAD":                                 head,  // origin/HEAD: the default branch
		"feature":                              first, // upstream branch
		"v1":                                   first, // annotated tag, peeled
		"lightweight":                          first,
		"agent/x":                              first, // agent branch
		"feature-or-tag":                       first, // refs/remotes/origin wins over refs/tags
		head:                                   head,  // full commit id
		head[:7]:                               head,  // abbreviated
		"refs/heads/agent/x":                   first, // full ref name
		"refs/remotes/origin/trunk":            head,
		"refs/tags/v1":                         first,
		gittest.Git(t, src, "rev-parse", "v1"): first, // tag object id peeled to its commit
	} {
		got, err := c.ResolveRef(ctx, rc, ref)
		if assert.NoError(t, err, ref) {
			assert.Equal(t, want, got, ref)
		}
	}

	for _, ref := range []string{"nope", "agent/none", "deadbeef", "0000000000000000000000000000000000000000"} {
		_, err := c.ResolveRef(ctx, rc, ref)
		assert.True(t, errors.Is(err, sandboxapi.ErrRefNotFound), "%s: %v", ref, err)
	}
	for _, ref := range []string{"", "-x", "a..b", "x^{tree}", "@", "a b", "--end-of-options"} {
		_, err := c.ResolveRef(ctx, rc, ref)
		assert.True(t, errors.Is(err, sandboxapi.ErrInvalidArgument), "%q: %v", ref, err)
	}

	outside := rc
	outside.LocalPath = src + "/.git"
	_, err = c.ResolveRef(ctx, outside, "trunk")
	assert.True(t, errors.Is(err, sandboxapi.ErrInvalidArgument), "a path outside the root is refused: %v", err)

	missing := rc
	_, otherID := fileRepo(t)
	missing.LocalPath = c.Path(otherID)
	_, err = c.ResolveRef(ctx, missing, "trunk")
	assert.True(t, errors.Is(err, sandboxapi.ErrRepoCacheUnavailable), "a missing mirror: %v", err)
}
