package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"path"
	"slices"
	"sync"

	"github.com/sandboxcore/sandboxcore/internal/repoenv"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// BaseFileReader is the optional capability of a WorkspaceProvider that
// reads files as committed at a workspace's base commit (workspace.Manager):
// a missing path is left out, one over maxBytes comes back as maxBytes+1
// bytes. Without it no repository environment is read (docs/RUNTIMES.md
// "Repository environment").
type BaseFileReader interface {
	BaseFiles(ctx context.Context, ws sandboxapi.Workspace, paths []string, maxBytes int) (map[string][]byte, error)
}

// repoEnvCache keeps each workspace's repository environment by workspace
// id and base commit (the files are read at the base commit, which never
// changes for a workspace's life but for a destroy and a new one).
type repoEnvCache struct {
	mu sync.Mutex
	m  map[string]repoEnvEntry
}

type repoEnvEntry struct {
	base string
	env  *sandboxapi.RepoEnvironment
}

// repoEnvironment returns ws's repository environment (repoenv.Parse of
// the files at its base commit), nil when the repository has none or they
// cannot be read (logged: an acquire never fails for it).
func (a *Activities) repoEnvironment(ctx context.Context, ws sandboxapi.Workspace) *sandboxapi.RepoEnvironment {
	r, ok := a.Workspaces.(BaseFileReader)
	if !ok || ws.BaseCommit == "" {
		return nil
	}
	c := &a.repoEnvs
	c.mu.Lock()
	if e, ok := c.m[ws.ID]; ok && e.base == ws.BaseCommit {
		c.mu.Unlock()
		return e.env
	}
	c.mu.Unlock()
	files, err := r.BaseFiles(ctx, ws, repoenv.Files, repoenv.MaxFileBytes)
	if err != nil {
		a.log().Warn("read the repository environment", "workspace", ws.ID, "error", sandboxapi.Message(err))
		return nil
	}
	env := repoenv.Parse(files)
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]repoEnvEntry{}
	}
	c.m[ws.ID] = repoEnvEntry{base: ws.BaseCommit, env: env}
	c.mu.Unlock()
	return env
}

// workspaceEnvironment is repoEnvironment with the hash of the lockfiles it
// names as they are in ws's worktree now (a copy: the cached environment is
// shared).
func (a *Activities) workspaceEnvironment(ctx context.Context, ws sandboxapi.Workspace) *sandboxapi.RepoEnvironment {
	env := a.repoEnvironment(ctx, ws)
	if env == nil {
		return nil
	}
	img, why := a.repoImage(ctx, ws)
	if len(env.Lockfiles) == 0 && !(a.NoSetup && len(env.Setup) > 0) && img == "" && why == "" {
		return env
	}
	c := *env
	c.ImageUsed = img != ""
	if why != "" {
		c.Problems = append(slices.Clone(c.Problems), why)
	}
	if a.NoSetup && len(env.Setup) > 0 {
		// Shown in problems, never run: the session runs what Setup holds.
		c.Problems = append(slices.Clone(c.Problems), fmt.Sprintf("%d setup command(s) not run: this worker runs none (SANDBOX_SETUP=off)", len(env.Setup)))
		c.Setup = nil
	}
	if len(env.Lockfiles) == 0 {
		return &c
	}
	h := sha256.New()
	for _, f := range env.Lockfiles {
		data, err := a.Workspaces.ReadFile(ctx, ws, f)
		if err != nil {
			fmt.Fprintf(h, "%s\x00missing\x00", f)
			continue
		}
		fmt.Fprintf(h, "%s\x00%d\x00", f, len(data))
		h.Write(data)
	}
	c.LockfilesHash = hex.EncodeToString(h.Sum(nil))[:32]
	return &c
}

// repoEnvVars returns the variables ws's repository environment gives its
// commands (a copy; nil when none).
func (a *Activities) repoEnvVars(ctx context.Context, ws sandboxapi.Workspace) map[string]string {
	if e := a.repoEnvironment(ctx, ws); e != nil {
		return maps.Clone(e.Env)
	}
	return nil
}

// ImageChecker is the optional capability of a RuntimeProvider that runs
// each runtime in the image its spec names (Docker): whether an image is
// present to run (images are never pulled). Without it a repository's
// image is reported, never used.
type ImageChecker interface {
	HasImage(ctx context.Context, ref string) (bool, error)
}

// runtimeImage is the image ws's runtimes run: the repository's
// (RepoEnvironment.Image) when a pattern of RepoImages matches it and the
// provider has it (ImageChecker), else RuntimeImage.
func (a *Activities) runtimeImage(ctx context.Context, ws sandboxapi.Workspace) string {
	img, _ := a.repoImage(ctx, ws)
	if img == "" {
		return a.RuntimeImage
	}
	return img
}

// repoImage returns the repository's image when ws's runtimes run it, or
// "" and why not (empty when the repository names none).
func (a *Activities) repoImage(ctx context.Context, ws sandboxapi.Workspace) (string, string) {
	env := a.repoEnvironment(ctx, ws)
	if env == nil || env.Image == "" {
		return "", ""
	}
	ic, ok := a.Runtimes.(ImageChecker)
	if !ok {
		return "", "" // a runtime without images: documented, not a problem of the repository's
	}
	if !slices.ContainsFunc(a.RepoImages, func(p string) bool { ok, _ := path.Match(p, env.Image); return ok }) {
		return "", "image " + env.Image + " is not used: SANDBOX_REPO_IMAGES does not allow it (the worker's image runs)"
	}
	has, err := ic.HasImage(ctx, env.Image)
	if err != nil || !has {
		return "", "image " + env.Image + " is not used: it is not present on this worker's Docker daemon (images are never pulled)"
	}
	return env.Image, ""
}
