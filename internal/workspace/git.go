package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// gitCtx is a place to run git: a directory and the environment that pins the
// repository (GIT_DIR, GIT_WORK_TREE) so nothing is discovered from files an
// agent can change, and (when set) the gitx inspection of that repository's
// configuration reused by every call made through it (see inspected).
type gitCtx struct {
	m   *Manager
	dir string
	env []string
	ins *gitx.Inspection
}

// bareGit runs git in the bare repository.
func (m *Manager) bareGit(bare string) gitCtx {
	return gitCtx{m: m, dir: bare, env: []string{
		"GIT_DIR=" + bare,
		"GIT_AUTHOR_NAME=" + DefaultAuthorName, "GIT_AUTHOR_EMAIL=" + DefaultAuthorEmail,
		"GIT_COMMITTER_NAME=" + DefaultAuthorName, "GIT_COMMITTER_EMAIL=" + DefaultAuthorEmail,
	}}
}

// with returns a copy with extra environment (later entries win).
func (g gitCtx) with(env ...string) gitCtx {
	g.env = append(append([]string(nil), g.env...), env...)
	return g
}

func (g gitCtx) run(ctx context.Context, args ...string) ([]byte, error) {
	return g.m.git.Run(ctx, gitx.Call{Dir: g.dir, Args: args, Env: g.env, Inspection: g.ins})
}

func (g gitCtx) runIO(ctx context.Context, stdin io.Reader, stdout io.Writer, args ...string) ([]byte, error) {
	return g.m.git.Run(ctx, gitx.Call{Dir: g.dir, Args: args, Env: g.env, Stdin: stdin, Stdout: stdout, Inspection: g.ins})
}

// inspected returns g with its repository's configuration inspected once by
// gitx (gitx.Runner.Inspect): every later call through it reuses the
// overrides that neutralize the repository's dangerous variables (filter,
// diff and merge drivers, http.<url>.* …) instead of reading the
// configuration again, and the poisoned variables are logged as a warning
// (once per repository directory and set of keys). Errors: a malformed
// configuration → ErrWorkspaceUnavailable.
func (m *Manager) inspected(ctx context.Context, g gitCtx) (gitCtx, error) {
	ins, err := m.git.Inspect(ctx, gitx.Call{Dir: g.dir, Env: g.env})
	if err != nil {
		return gitCtx{}, gitx.Classify(err, "read the repository configuration", sandboxapi.ErrWorkspaceUnavailable)
	}
	if len(ins.Poisoned) > 0 {
		keys := make([]string, len(ins.Poisoned))
		for i, p := range ins.Poisoned {
			keys[i] = p.String()
		}
		sig := strings.Join(keys, "\n")
		if prev, ok := m.reported.Load(g.dir); !ok || prev.(string) != sig {
			m.reported.Store(g.dir, sig)
			m.log.Warn("workspace: the repository configuration sets variables that could run programs or redirect git; host-side git neutralizes or refuses them",
				"dir", g.dir, "poisoned", keys)
		}
	}
	g.ins = ins
	return g, nil
}

// wtRepo is an open, registered worktree, for one operation.
type wtRepo struct {
	loc
	admin string
	git   gitCtx
	// stage memoizes `git ls-files -s -z` of the real index within one
	// read-only operation (Status); forgetStage drops it when the index changes.
	stage []byte
	// attrs memoizes hasAttributes.
	attrs *bool
	// lfsAttr memoizes mayTrackLFS.
	lfsAttr *bool
}

// stageEntries returns `git ls-files -s -z` of the real index (memoized).
func (w *wtRepo) stageEntries(ctx context.Context) ([]byte, error) {
	if w.stage != nil {
		return w.stage, nil
	}
	out, err := w.git.with(readEnv).run(ctx, "ls-files", "-s", "-z")
	if err != nil {
		return nil, gitx.Classify(err, "git ls-files -s", sandboxapi.ErrWorkspaceUnavailable)
	}
	if out == nil {
		out = []byte{}
	}
	w.stage = out
	return out, nil
}

// forgetStage drops the memoized index listing (the index changed).
func (w *wtRepo) forgetStage() { w.stage = nil }

// openWorktree locates a registered worktree, repairs its git metadata
// when broken (RepairMetadata: the .git file, a registration pruned) and
// prepares git for it: GIT_DIR is its administrative directory,
// GIT_WORK_TREE its directory, and its configuration is inspected
// (inspected: every filter, diff and merge driver and the other dangerous
// variables are neutralized by gitx). Errors: ErrInvalidArgument (bad
// LocalPath), ErrWorkspaceNotFound (directory missing), ErrWorkspaceUnavailable
// (malformed configuration), those of RepairMetadata.
func (m *Manager) openWorktree(ctx context.Context, ws sandboxapi.Workspace) (*wtRepo, error) {
	l, err := locate(ws)
	if err != nil {
		return nil, err
	}
	if err := m.onVolume(ctx, l.wt); err != nil {
		return nil, err
	}
	if !isDir(l.wt) {
		return nil, sandboxapi.Errorf(sandboxapi.ErrWorkspaceNotFound, "workspace %s: worktree directory is missing (Ensure repairs it)", ws.ID)
	}
	// The host's own metadata is repaired first (repair.go): an agent's
	// `rm .git` or a `git worktree prune` never strands the workspace.
	admin, err := m.repairAt(ctx, ws, l)
	if err != nil {
		return nil, err
	}
	return m.worktreeAt(ctx, l, admin)
}

// worktreeAt prepares git for the registered worktree l whose
// administrative directory is admin (see openWorktree).
func (m *Manager) worktreeAt(ctx context.Context, l loc, admin string) (*wtRepo, error) {
	var err error
	g := gitCtx{m: m, dir: l.wt, env: []string{
		"GIT_DIR=" + admin,
		"GIT_WORK_TREE=" + l.wt,
		"GIT_AUTHOR_NAME=" + DefaultAuthorName, "GIT_AUTHOR_EMAIL=" + DefaultAuthorEmail,
		"GIT_COMMITTER_NAME=" + DefaultAuthorName, "GIT_COMMITTER_EMAIL=" + DefaultAuthorEmail,
	}}
	if g, err = m.inspected(ctx, g); err != nil {
		return nil, err
	}
	return &wtRepo{loc: l, admin: admin, git: g}, nil
}

// wtEntry is one record of `git worktree list --porcelain -z`.
type wtEntry struct {
	Path       string
	Head       string
	Branch     string // full ref, "" when detached or bare
	Bare       bool
	Detached   bool
	Locked     bool
	LockReason string
	Prunable   bool
}

func (m *Manager) listWorktrees(ctx context.Context, bg gitCtx) ([]wtEntry, error) {
	out, err := bg.run(ctx, "worktree", "list", "--porcelain", "-z")
	if err != nil {
		return nil, gitx.Classify(err, "git worktree list", sandboxapi.ErrWorkspaceUnavailable)
	}
	var list []wtEntry
	var cur *wtEntry
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" {
			cur = nil
			continue
		}
		key, val, _ := strings.Cut(f, " ")
		if key == "worktree" {
			list = append(list, wtEntry{Path: filepath.Clean(val)})
			cur = &list[len(list)-1]
			continue
		}
		if cur == nil {
			continue
		}
		switch key {
		case "HEAD":
			cur.Head = val
		case "branch":
			cur.Branch = val
		case "bare":
			cur.Bare = true
		case "detached":
			cur.Detached = true
		case "locked":
			cur.Locked, cur.LockReason = true, val
		case "prunable":
			cur.Prunable = true
		}
	}
	return list, nil
}

func findEntry(list []wtEntry, path string) *wtEntry {
	for i := range list {
		if list[i].Path == path {
			return &list[i]
		}
	}
	return nil
}

// firstCommit returns the commit of the first name that resolves to one (as
// `<name>^{commit}`), or "" when none does. Names must be validated refs or
// hex ids: they are read as object names from stdin, never as options.
func (m *Manager) firstCommit(ctx context.Context, g gitCtx, names ...string) (string, error) {
	res, err := m.resolveAll(ctx, g, names...)
	if err != nil {
		return "", err
	}
	for _, c := range res {
		if c != "" {
			return c, nil
		}
	}
	return "", nil
}

// resolveAll resolves every name as `<name>^{commit}` in one `git cat-file
// --batch-check` and returns, per name in order, its commit or "" (missing,
// or not a commit). Names as for firstCommit.
func (m *Manager) resolveAll(ctx context.Context, g gitCtx, names ...string) ([]string, error) {
	commits, _, err := m.lookup(ctx, g, names, nil)
	return commits, err
}

// lookup is resolveAll of peeled and, in the same `git cat-file
// --batch-check`, the object each name of named names as it is (any type:
// a ref to a tree or a blob counts), "" when it names none. Names are
// resolved as git resolves any name (a full ref name first). Errors:
// ErrInvalidArgument (a line break in a name), ErrWorkspaceUnavailable.
func (m *Manager) lookup(ctx context.Context, g gitCtx, peeled, named []string) (commits, objects []string, err error) {
	var in bytes.Buffer
	for i, n := range append(slices.Clip(peeled), named...) {
		if strings.ContainsAny(n, "\n\x00") {
			return nil, nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "ref %q contains a line break", n)
		}
		if i < len(peeled) {
			n += "^{commit}"
		}
		in.WriteString(n + "\n")
	}
	out, err := g.runIO(ctx, &in, nil, "cat-file", "--batch-check=%(objectname) %(objecttype)")
	if err != nil {
		return nil, nil, gitx.Classify(err, "git cat-file", sandboxapi.ErrWorkspaceUnavailable)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(peeled)+len(named) {
		return nil, nil, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "git cat-file --batch-check: %d lines for %d names", len(lines), len(peeled)+len(named))
	}
	commits, objects = make([]string, len(peeled)), make([]string, len(named))
	for i, line := range lines {
		f := strings.Fields(line)
		if len(f) != 2 || !isHex(f[0]) {
			continue // "<name> missing", "<name> ambiguous"
		}
		if i < len(peeled) {
			if f[1] == "commit" {
				commits[i] = f[0]
			}
		} else {
			objects[i-len(peeled)] = f[0]
		}
	}
	return commits, objects, nil
}

// baseCandidates are the names a base ref is looked up as, in order
// (resolveBase). Errors: ErrRefNotFound (no ref), ErrInvalidArgument
// (ValidateRef).
func baseCandidates(ref string) ([]string, error) {
	if ref == "" {
		return nil, sandboxapi.Errorf(sandboxapi.ErrRefNotFound, "no base ref was requested and the repo cache has no default branch")
	}
	if err := sandboxapi.ValidateRef(ref); err != nil {
		return nil, err
	}
	cands := []string{"refs/remotes/origin/" + ref, "refs/tags/" + ref, "refs/heads/" + ref}
	if strings.HasPrefix(ref, "refs/") {
		cands = append(cands, ref)
	}
	if isHex(ref) && len(ref) >= 7 {
		cands = append(cands, ref)
	}
	return cands, nil
}

// resolveBase resolves a base ref as DESIGN.md and the workspace issue fix
// it: refs/remotes/origin/<ref>, refs/tags/<ref>, refs/heads/<ref>, <ref>
// itself when it is a full "refs/..." name, then <ref> as a hex commit id.
// Errors: ErrInvalidArgument (ValidateRef), ErrRefNotFound.
func (m *Manager) resolveBase(ctx context.Context, bg gitCtx, ref string) (string, error) {
	cands, err := baseCandidates(ref)
	if err != nil {
		return "", err
	}
	c, err := m.firstCommit(ctx, bg, cands...)
	if err != nil {
		return "", err
	}
	if c == "" {
		return "", sandboxapi.Errorf(sandboxapi.ErrRefNotFound, "base ref %q is not a branch, tag or commit of the repository", ref)
	}
	return c, nil
}

// branchCollision refuses a new workspace branch that git could not hold
// beside an existing ref, locally or on the remote: refs/heads/<b> cannot
// exist together with refs/heads/<p> for a directory prefix p of b (an
// upstream branch "agent" blocks every "agent/…" branch), nor with any ref
// under refs/heads/<b>/. Both the repo cache's own branches (refs/heads/*,
// other workspaces' branches) and the remote's as last fetched
// (refs/remotes/origin/*: the push would fail there with "cannot lock ref")
// are checked. prefixes are collisionPrefixes(branch) and found what lookup
// found for each: only a ref under the branch itself and a prefix lookup
// found are listed, so the check costs the same with ten thousand other
// workspace branches under "agent/" as with none (docs/BENCHMARKS.md
// "Scale"). Errors: ErrConflict naming the conflicting ref (docs/API.md
// "Branch names"), ErrWorkspaceUnavailable (git failed).
func (m *Manager) branchCollision(ctx context.Context, bg gitCtx, branch string, prefixes, found []string) error {
	// Patterns match a ref and the refs below it, so the branch's own two
	// list its subtree; a found prefix's pattern is confirmed by exact name
	// below (the lookup resolved it as any name, e.g. a tag of that name).
	patterns := []string{"refs/heads/" + branch, "refs/remotes/origin/" + branch}
	for i, p := range prefixes {
		if found[i] != "" {
			patterns = append(patterns, p)
		}
	}
	args := append([]string{"for-each-ref", "--format=%(refname)", "--end-of-options"}, patterns...)
	out, err := bg.run(ctx, args...)
	if err != nil {
		return gitx.Classify(err, "git for-each-ref", sandboxapi.ErrWorkspaceUnavailable)
	}
	for _, ref := range strings.Split(string(out), "\n") {
		ref = strings.TrimSpace(ref)
		name, local := strings.CutPrefix(ref, "refs/heads/")
		if !local {
			var ok bool
			if name, ok = strings.CutPrefix(ref, "refs/remotes/origin/"); !ok {
				continue
			}
		}
		if name == branch || !(strings.HasPrefix(branch, name+"/") || strings.HasPrefix(name, branch+"/")) {
			continue
		}
		if local {
			// The local branch may be another workspace's, of another
			// tenant: it is not named (docs/SECURITY.md "Tenant isolation").
			rel := "below it"
			if strings.HasPrefix(branch, name+"/") {
				rel = "named like one of its directories"
			}
			return sandboxapi.Errorf(sandboxapi.ErrConflict,
				"branch %s cannot be created: the repository holds a branch %s, and git cannot hold a branch and a directory of the same name; acquire with another conversation or task id, or another branch_name",
				branch, rel)
		}
		every := ""
		if !strings.Contains(name, "/") {
			every = fmt.Sprintf(" (every %s/… branch collides with it)", name)
		}
		return sandboxapi.Errorf(sandboxapi.ErrConflict,
			"branch %s cannot be created: the remote has branch %s (%s, as last fetched)%s, and git cannot hold a branch and a directory of the same name, so this branch could never be pushed there; rename that remote branch, or acquire with a branch_name that does not collide",
			branch, name, ref, every)
	}
	return nil
}

// collisionPrefixes are the full ref names, local and remote, of every
// directory prefix of branch ("a/b/c": refs/heads/a, refs/remotes/origin/a,
// refs/heads/a/b, refs/remotes/origin/a/b), which branchCollision needs
// looked up.
func collisionPrefixes(branch string) []string {
	var refs []string
	for i := range len(branch) {
		if branch[i] == '/' {
			refs = append(refs, "refs/heads/"+branch[:i], "refs/remotes/origin/"+branch[:i])
		}
	}
	return refs
}

// isHex reports whether s is a (possibly abbreviated) lowercase hex object id.
func isHex(s string) bool {
	if len(s) < 4 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func gitStderr(err error) string {
	var ge *gitx.Error
	if errors.As(err, &ge) {
		return ge.Stderr
	}
	return ""
}

func firstLine(s string) string {
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "fatal:") || strings.HasPrefix(l, "error:") {
			return l
		}
	}
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// fsError maps a host file-system failure: a full disk → ErrInsufficientDisk,
// anything else → ErrWorkspaceUnavailable.
func fsError(err error, what string) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return sandboxapi.Errorf(sandboxapi.ErrInsufficientDisk, "%s: %v", what, err)
	}
	if errors.Is(err, fs.ErrPermission) {
		return sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "%s: permission denied: %v", what, err)
	}
	return sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "%s: %v", what, err)
}
