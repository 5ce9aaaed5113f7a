package repocache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Moved repositories (docs/API.md "Acquire": moved repositories). When a
// fetch finds that a repository moved permanently on its host (an HTTP 301
// or 308 to a new path, followed by gitx.Runner.Locate), the mirror keeps
// serving the old name from the new location, and the move is recorded in
// <Root>/repos/.moves/<sha256(new key)[:32]>, which holds the old
// repository's URL. A first acquire by the new name then does not clone
// again: the new mirror is seeded from the old one — its object files
// hard-linked (copied across file systems), its remote-tracking branches
// and tags copied (never the agents' refs/heads/*, which stay with their
// workspaces) — and only what is missing is fetched. The old mirror and its
// workspaces are left as they are.

const movesDirName = ".moves"

func (c *Cache) moveFile(key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(c.reposDir, movesDirName, hex.EncodeToString(sum[:16]))
}

// recordMove notes that id now lives at newURL (a permanent move), unless
// newURL names the same identity. Best effort: a failure is logged.
func (c *Cache) recordMove(id sandboxapi.RepoIdentity, newURL string) {
	to, err := sandboxapi.ParseRepoURL(newURL, sandboxapi.URLPolicy{AllowFile: true, AllowHTTP: true})
	if err != nil || to.Key() == id.Key() {
		return
	}
	f := c.moveFile(to.Key())
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err == nil {
		err = writeFileSync(f, id.URL+"\n")
		if err == nil {
			c.log.Info("repocache: recorded a repository move", "from", id.Key(), "to", to.Key())
			return
		}
	}
	c.log.Warn("repocache: record a repository move", "from", id.Key(), "to", to.Key(), "error", err)
}

// movedFrom returns the ready mirror of the repository that moved to id
// (recordMove) and still reads from id's URL, or "".
func (c *Cache) movedFrom(id sandboxapi.RepoIdentity) (string, sandboxapi.RepoIdentity) {
	b, err := os.ReadFile(c.moveFile(id.Key()))
	if err != nil {
		return "", sandboxapi.RepoIdentity{}
	}
	from, err := sandboxapi.ParseRepoURL(strings.TrimSpace(string(b)), sandboxapi.URLPolicy{AllowFile: true, AllowHTTP: true})
	if err != nil || from.Key() == id.Key() {
		return "", sandboxapi.RepoIdentity{}
	}
	bare := filepath.Join(c.repoDir(from), bareDirName)
	if _, err := os.Stat(filepath.Join(bare, ReadyMarker)); err != nil {
		return "", sandboxapi.RepoIdentity{}
	}
	loc, err := os.ReadFile(filepath.Join(bare, LocationMarker))
	if err != nil {
		return "", sandboxapi.RepoIdentity{}
	}
	at, err := sandboxapi.ParseRepoURL(strings.TrimSpace(string(loc)), sandboxapi.URLPolicy{AllowFile: true, AllowHTTP: true})
	if err != nil || at.Key() != id.Key() {
		return "", sandboxapi.RepoIdentity{} // it moved on since
	}
	return bare, from
}

// seedFromMove fills a staged clone of id from the mirror of the
// repository that moved to id, when there is one (see the top of this
// file): object files hard-linked, remote-tracking branches and tags
// copied. The fetch that follows then transfers only what is new. Errors
// wrap ErrRepoCacheUnavailable or ErrInsufficientDisk.
func (c *Cache) seedFromMove(ctx context.Context, id sandboxapi.RepoIdentity, staging string) error {
	src, from := c.movedFrom(id)
	if src == "" {
		return nil
	}
	what := "seed " + id.Key() + " from " + from.Key()
	linked, copied, err := linkObjects(filepath.Join(src, "objects"), filepath.Join(staging, "objects"))
	if err != nil {
		return fsError(err, what)
	}
	out, err := c.run(ctx, src, localTimeout, nil, "", "for-each-ref", "--format=%(objectname) %(refname)", "--end-of-options", "refs/remotes/origin/", "refs/tags/")
	if err != nil {
		return gitx.Classify(err, what+": list refs", sandboxapi.ErrRepoCacheUnavailable)
	}
	var in bytes.Buffer
	refs := 0
	for _, line := range strings.Split(string(out), "\n") {
		sha, ref, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || !isHex(sha, 40, 64) || ref == OriginHEAD || sandboxapi.ValidateRef(ref) != nil {
			continue
		}
		in.WriteString("create " + ref + " " + sha + "\n")
		refs++
	}
	if refs > 0 {
		if _, err := c.git.Run(ctx, gitx.Call{Dir: staging, Env: []string{"GIT_DIR=" + staging}, Timeout: localTimeout,
			Stdin: &in, Args: []string{"update-ref", "--stdin"}}); err != nil {
			return gitx.Classify(err, what+": copy refs", sandboxapi.ErrRepoCacheUnavailable)
		}
	}
	c.log.InfoContext(ctx, "repocache: seeded a moved repository's new name from its old mirror", "repo", id.Key(), "from", from.Key(),
		"objects_linked", linked, "objects_copied", copied, "refs", refs)
	return nil
}

// linkObjects hard-links (or, across file systems, copies) the object files
// of src into dst: loose objects (xx/<rest>) and complete packs (a .pack
// with its .idx, plus .rev, .bitmap). Temporary files, alternates and the
// info directory are skipped. It returns how many files were linked and copied.
func linkObjects(src, dst string) (linked, copied int, err error) {
	put := func(from, to string) error {
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		if err := os.Link(from, to); err == nil {
			linked++
			return nil
		} else if errors.Is(err, fs.ErrExist) {
			return nil
		}
		copied++
		return copyFile(from, to)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return 0, 0, err
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case len(name) == 2 && isHex(name, 2, 2) && e.IsDir():
			files, err := os.ReadDir(filepath.Join(src, name))
			if err != nil {
				return linked, copied, err
			}
			for _, f := range files {
				if f.Type().IsRegular() && isHex(f.Name(), 38, 62) {
					if err := put(filepath.Join(src, name, f.Name()), filepath.Join(dst, name, f.Name())); err != nil {
						return linked, copied, err
					}
				}
			}
		case name == "pack" && e.IsDir():
			files, err := os.ReadDir(filepath.Join(src, "pack"))
			if err != nil {
				return linked, copied, err
			}
			for _, f := range files {
				base, ok := strings.CutSuffix(f.Name(), ".idx")
				if !ok || !strings.HasPrefix(base, "pack-") {
					continue
				}
				if _, err := os.Stat(filepath.Join(src, "pack", base+".pack")); err != nil {
					continue // incomplete
				}
				for _, ext := range []string{".pack", ".rev", ".bitmap", ".idx"} { // the index last, as git writes it
					p := filepath.Join(src, "pack", base+ext)
					if _, err := os.Stat(p); err != nil {
						continue
					}
					if err := put(p, filepath.Join(dst, "pack", base+ext)); err != nil {
						return linked, copied, err
					}
				}
			}
		}
	}
	return linked, copied, nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}

// writeOrRemove writes content to path (atomically) when keep, else removes it.
func writeOrRemove(path, content string, keep bool) error {
	if !keep {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	return writeFileSync(path, content+"\n")
}

// CommitRefPrefix holds commits fetched by id because no branch or tag of
// the remote names them (FetchCommit): refs/sandbox/commits/<commit>.
const CommitRefPrefix = "refs/sandbox/commits/"

// FetchCommit fetches one commit the mirror lacks by its id (a submodule's
// recorded commit on no branch), `git fetch <url> <commit>:refs/sandbox/commits/<commit>`,
// which the remote must allow (uploadpack.allowReachableSHA1InWant; code
// hosts do); a repository that moved is fetched at its new location. A
// commit already present is success. Errors: ErrInvalidArgument (not a full
// commit id, bad identity), ErrRefNotFound (the remote does not give it),
// ErrRepoAuthFailed, ErrRepoNotFound, ErrRepoCacheUnavailable, ErrRepoLocked.
func (c *Cache) FetchCommit(ctx context.Context, repo sandboxapi.RepoIdentity, cred *sandbox.Credential, commit string) error {
	if !isHex(commit, 40, 64) || (len(commit) != 40 && len(commit) != 64) {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "commit %q is not a full commit id", sandboxapi.Clip(commit, 80))
	}
	commit = strings.ToLower(commit)
	id, err := identity(repo)
	if err != nil {
		return err
	}
	if !isHTTP(id.URL) {
		cred = nil
	}
	unlock, err := c.LockRepo(ctx, id)
	if err != nil {
		return err
	}
	defer unlock()
	bare := filepath.Join(c.repoDir(id), bareDirName)
	if st, err := c.inspect(ctx, bare); err != nil {
		return err
	} else if st != stateReady {
		return sandboxapi.Errorf(sandboxapi.ErrRepoCacheUnavailable, "fetch commit %s: the repo cache of %s is not ready", commit, id.Key())
	}
	if _, err := c.run(ctx, bare, localTimeout, nil, "", "cat-file", "-e", commit+"^{commit}"); err == nil {
		return nil
	}
	remote := id.URL
	if b, err := os.ReadFile(filepath.Join(bare, LocationMarker)); err == nil {
		remote = strings.TrimSpace(string(b))
	}
	what := "fetch commit " + commit + " of " + id.Key()
	_, err = c.run(ctx, bare, c.netTimeout, cred, remote, "fetch", "--quiet", "--no-write-fetch-head", "--no-recurse-submodules",
		"--no-auto-maintenance", "--end-of-options", remote, "+"+commit+":"+CommitRefPrefix+commit)
	if err != nil {
		var ge *gitx.Error
		if errors.As(err, &ge) && (strings.Contains(ge.Stderr, "not our ref") || strings.Contains(ge.Stderr, "unadvertised object") || strings.Contains(ge.Stderr, "couldn't find remote ref")) {
			return sandboxapi.Errorf(sandboxapi.ErrRefNotFound, "%s: the remote does not give it", what)
		}
		return gitx.Classify(err, what, sandboxapi.ErrRepoCacheUnavailable)
	}
	return nil
}
