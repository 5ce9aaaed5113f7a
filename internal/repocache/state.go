package repocache

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

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
