package workspace

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// addAll stages the whole work tree (`git add -A`) except untracked nested
// repositories: `git ls-files --others` lists each as "<dir>/", and they are
// excluded (":(exclude,literal)<dir>/"), so git never opens the repository
// an agent's .git points at (which may be anyone's on the host, and whose
// missing commit would fail the whole add). The error is git's, unclassified.
func addAll(ctx context.Context, g gitCtx) error {
	out, err := g.run(ctx, "ls-files", "-z", "--others", "--exclude-standard")
	if err != nil {
		return err
	}
	var specs bytes.Buffer
	for _, p := range strings.Split(string(out), "\x00") {
		if strings.HasSuffix(p, "/") {
			specs.WriteString(":(exclude,literal)" + p + "\x00")
		}
	}
	if specs.Len() == 0 {
		_, err = g.run(ctx, "add", "-A")
		return err
	}
	var in bytes.Buffer
	in.WriteString(".\x00")
	in.Write(specs.Bytes())
	_, err = g.runIO(ctx, &in, nil, "add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul")
	return err
}

// nestedRepos lists, sorted and each ending in "/", the nested git
// repositories in the worktree that no commit, checkpoint or backup can
// hold: untracked directories holding a .git (`git ls-files --others
// --exclude-standard` lists each as "<dir>/"; ignored ones are not listed:
// ignored files are never saved) and gitlinks staged in the index that
// HEAD does not have as gitlinks (a repository the agent made and ran `git
// add` on: recorded, only its commit id would be kept, never its files).
// Errors: ErrWorkspaceUnavailable.
func nestedRepos(ctx context.Context, g gitCtx) ([]string, error) {
	out, err := g.run(ctx, "ls-files", "-z", "--others", "--exclude-standard")
	if err != nil {
		return nil, gitx.Classify(err, "git ls-files --others", sandboxapi.ErrWorkspaceUnavailable)
	}
	var nested []string
	for _, p := range strings.Split(string(out), "\x00") {
		if strings.HasSuffix(p, "/") {
			nested = append(nested, p)
		}
	}
	staged, err := newGitlinks(ctx, g)
	if err != nil {
		return nil, err
	}
	nested = append(nested, staged...)
	sort.Strings(nested)
	return slices.Compact(nested), nil
}

// newGitlinks lists ("<path>/") the gitlinks of g's index that HEAD does
// not have as gitlinks (`git diff-index --cached HEAD`: new mode 160000,
// old mode another). Errors: ErrWorkspaceUnavailable.
func newGitlinks(ctx context.Context, g gitCtx) ([]string, error) {
	out, err := g.run(ctx, "diff-index", "--cached", "--no-renames", "-z", "HEAD", "--")
	if err != nil {
		return nil, gitx.Classify(err, "git diff-index --cached HEAD", sandboxapi.ErrWorkspaceUnavailable)
	}
	var list []string
	fields := strings.Split(string(out), "\x00")
	for i := 0; i+1 < len(fields); i += 2 {
		f := strings.Fields(strings.TrimPrefix(fields[i], ":"))
		if len(f) == 5 && f[1] == "160000" && f[0] != "160000" {
			list = append(list, fields[i+1]+"/")
		}
	}
	return list, nil
}

// MaxNestedReposNamed is how many nested repositories the refusal of an
// operation that would leave them out names (nestedRepoError).
const MaxNestedReposNamed = 20

// nestedRepoError is the one refusal of commit, checkpoint, fork, destroy
// and eviction when the worktree holds nested repositories (nestedRepos)
// that they would leave out (docs/API.md "Nested repositories"):
// ErrWorkspaceDirty naming them (at most MaxNestedReposNamed) and what to
// do. what names the refused operation.
func nestedRepoError(what string, nested []string) error {
	named := nested
	if len(named) > MaxNestedReposNamed {
		named = named[:MaxNestedReposNamed]
	}
	quoted := make([]string, len(named))
	for i, p := range named {
		quoted[i] = strconv.Quote(p)
	}
	more := ""
	if n := len(nested) - len(named); n > 0 {
		more = fmt.Sprintf(" and %d more", n)
	}
	return sandboxapi.Errorf(sandboxapi.ErrWorkspaceDirty, "%s refused: nested git repositories %s%s cannot be committed or saved (their files would be left out); move them out of the workspace, delete them, or list them in .gitignore if they need not be kept",
		what, strings.Join(quoted, ", "), more)
}

// nestedUnder returns the nested repositories (nestedRepos' form) that
// the literal, clean pathspecs (NUL-terminated, commitArguments) name or
// contain; all of them when pathspecs is empty (everything is staged).
func nestedUnder(nested []string, pathspecs []byte) []string {
	if len(pathspecs) == 0 || len(nested) == 0 {
		return nested
	}
	var out []string
	for _, n := range nested {
		for _, p := range strings.Split(strings.TrimSuffix(string(pathspecs), "\x00"), "\x00") {
			if p == "." || strings.HasPrefix(n, p+"/") || strings.HasPrefix(p+"/", n) {
				out = append(out, n)
				break
			}
		}
	}
	return out
}

// dropNewGitlinks puts back HEAD's entry (or none) for every gitlink (mode
// 160000) that `git add` staged in g's index and HEAD does not have as it is.
// Adding a directory holding a .git makes git resolve that repository's HEAD,
// and an agent's .git file (or a .git directory with a commondir) may point at
// any repository on the host, another user's included: recording its commit
// would show it in the diff. So a nested repository the agent made is never
// recorded (its files never were: git records a gitlink, not contents);
// gitlinks that came from the repository stay. Errors: ErrWorkspaceUnavailable.
func dropNewGitlinks(ctx context.Context, g gitCtx) error {
	out, err := g.run(ctx, "diff-index", "--cached", "--no-renames", "-z", "HEAD", "--")
	if err != nil {
		return gitx.Classify(err, "git diff-index --cached HEAD", sandboxapi.ErrWorkspaceUnavailable)
	}
	var fix bytes.Buffer
	fields := strings.Split(string(out), "\x00")
	for i := 0; i+1 < len(fields); i += 2 {
		// ":<old mode> <new mode> <old sha> <new sha> <status>" then the path.
		f := strings.Fields(strings.TrimPrefix(fields[i], ":"))
		if len(f) != 5 || f[1] != "160000" {
			continue
		}
		mode, sha := f[0], f[2]
		if mode == "000000" { // new: remove the entry
			mode, sha = "0", strings.Repeat("0", len(f[3]))
		}
		fmt.Fprintf(&fix, "%s %s\t%s\x00", mode, sha, fields[i+1])
	}
	if fix.Len() == 0 {
		return nil
	}
	if _, err := g.runIO(ctx, &fix, nil, "update-index", "-z", "--index-info"); err != nil {
		return gitx.Classify(err, "git update-index --index-info", sandboxapi.ErrWorkspaceUnavailable)
	}
	return nil
}

// Commit stages and commits the workspace's changes on its current branch
// (sandbox.WorkspaceProvider; docs/DESIGN.md "Workspace lifecycle": commit from the same
// workspace). Empty req.Paths stages everything including untracked files
// (`git add -A`); otherwise each path is validated with sandboxapi.CleanRelPath
// and staged literally (`git add -A --pathspec-from-file=- --pathspec-file-nul`
// with GIT_LITERAL_PATHSPECS=1, so no pathspec magic), and the commit then
// contains everything staged, except a gitlink the agent changed
// (dropNewGitlinks puts HEAD's entry back, so such a change is never
// committed). A nested repository the commit would include (nestedRepos:
// untracked, or staged as a new gitlink) refuses the commit with
// ErrWorkspaceDirty naming it, as checkpoint, destroy and eviction refuse
// to save it (nestedRepoError): nothing is left out silently. The message goes through stdin (`-F -`,
// --cleanup=whitespace: lines starting with '#' are kept); hooks are skipped
// (--no-verify, and the runner's core.hooksPath=/dev/null); author and
// committer are req's identity or DefaultAuthorName/DefaultAuthorEmail, dated
// by Options.Now. Nothing staged → NothingToCommit with Commit = HEAD and no
// error, unless req.AllowEmpty. Errors: ErrCommandRejected (workspace not
// writable, or HEAD detached), ErrWorkspaceDirty (a nested repository),
// ErrInvalidArgument (empty or over
// MaxCommitMessageBytes message, NUL in it, bad identity), ErrInvalidWorkspacePath
// (a bad path, one matching no file, or one through a symbolic link),
// ErrWorkspaceNotFound, ErrRepoLocked
// (index.lock held), ErrInsufficientDisk, ErrWorkspaceUnavailable.
func (m *Manager) Commit(ctx context.Context, ws sandboxapi.Workspace, req sandboxapi.CommitRequest) (sandboxapi.CommitResult, error) {
	if err := writable(ws); err != nil {
		return sandboxapi.CommitResult{}, err
	}
	id, pathspecs, err := commitArguments(req)
	if err != nil {
		return sandboxapi.CommitResult{}, err
	}
	// git add writes the blobs to the host's disk the volumes draw on.
	if err := m.volumes.Room(0); err != nil {
		return sandboxapi.CommitResult{}, err
	}
	w, err := m.openWorktree(ctx, ws)
	if err != nil {
		return sandboxapi.CommitResult{}, err
	}
	_, branch, err := head(ctx, w.git)
	if err != nil {
		return sandboxapi.CommitResult{}, err
	}
	if branch == "" {
		return sandboxapi.CommitResult{}, sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "workspace %s: HEAD is detached; check out its branch %s first", ws.ID, ws.BranchName)
	}
	// A nested repository is never left out silently: the commit is
	// refused as checkpoint, destroy and eviction refuse to save it.
	nested, err := nestedRepos(ctx, w.git)
	if err != nil {
		return sandboxapi.CommitResult{}, err
	}
	if left := nestedUnder(nested, pathspecs.Bytes()); len(left) > 0 {
		return sandboxapi.CommitResult{}, nestedRepoError("commit", left)
	}
	if err := m.stageForCommit(ctx, w, len(req.Paths) == 0, pathspecs); err != nil {
		return sandboxapi.CommitResult{}, err
	}
	_, err = w.git.run(ctx, "diff", "--cached", "--quiet", "--no-ext-diff", "--no-textconv", "--ignore-submodules=none", "HEAD", "--")
	staged := gitx.ExitCode(err) == 1
	if err != nil && !staged {
		return sandboxapi.CommitResult{}, gitx.Classify(err, "git diff --cached --quiet", sandboxapi.ErrWorkspaceUnavailable)
	}
	if !staged && !req.AllowEmpty {
		h, _, err := head(ctx, w.git)
		if err != nil {
			return sandboxapi.CommitResult{}, err
		}
		return sandboxapi.CommitResult{Commit: h, Branch: branch, NothingToCommit: true}, nil
	}
	if err := m.runCommit(ctx, w, id, req); err != nil {
		return sandboxapi.CommitResult{}, err
	}
	h, branch, err := head(ctx, w.git)
	if err != nil {
		return sandboxapi.CommitResult{}, err
	}
	m.log.Info("workspace: committed", "workspace_id", ws.ID, "branch", branch, "commit", h)
	return sandboxapi.CommitResult{Commit: h, Branch: branch}, nil
}

// commitIdentity is the author (and committer) of a commit.
type commitIdentity struct{ name, email string }

// commitArguments validates a commit request before anything runs (see
// Commit): the message (not blank, at most MaxCommitMessageBytes, no NUL),
// the identity (req's or DefaultAuthorName/DefaultAuthorEmail: at most
// MaxIdentityBytes, not blank, no '<', '>', line breaks or NUL) and each
// path (sandboxapi.CleanRelPath, not inside .git), returned as NUL-terminated
// pathspecs for `git add --pathspec-from-file`. Errors: ErrInvalidArgument,
// ErrInvalidWorkspacePath.
func commitArguments(req sandboxapi.CommitRequest) (commitIdentity, *bytes.Buffer, error) {
	if strings.TrimSpace(req.Message) == "" {
		return commitIdentity{}, nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "commit message is required")
	}
	if len(req.Message) > MaxCommitMessageBytes {
		return commitIdentity{}, nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "commit message is longer than %d bytes", MaxCommitMessageBytes)
	}
	if strings.IndexByte(req.Message, 0) >= 0 {
		return commitIdentity{}, nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "commit message contains NUL")
	}
	id := commitIdentity{name: req.AuthorName, email: req.AuthorEmail}
	if id.name == "" {
		id.name = DefaultAuthorName
	}
	if id.email == "" {
		id.email = DefaultAuthorEmail
	}
	for what, v := range map[string]string{"author_name": id.name, "author_email": id.email} {
		if len(v) > MaxIdentityBytes || strings.ContainsAny(v, "<>\n\r\x00") || strings.TrimSpace(v) == "" {
			return commitIdentity{}, nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "%s %q: at most %d bytes, no '<', '>', line breaks or NUL", what, v, MaxIdentityBytes)
		}
	}
	var pathspecs bytes.Buffer
	for _, p := range req.Paths {
		clean, err := sandboxapi.CleanRelPath(p)
		if err != nil {
			return commitIdentity{}, nil, err
		}
		if sandboxapi.IsGitMetadataPath(clean) {
			return commitIdentity{}, nil, sandboxapi.Errorf(sandboxapi.ErrInvalidWorkspacePath, "path %q is inside .git", p)
		}
		pathspecs.WriteString(clean)
		pathspecs.WriteByte(0)
	}
	return id, &pathspecs, nil
}

// stageForCommit stages into the real index everything (all) or the
// literal pathspecs (GIT_LITERAL_PATHSPECS=1), then drops the gitlinks the
// agent made (dropNewGitlinks) and puts back the entries of files still as
// checked out (decided before `git add` changes them: the baseline).
// Errors: ErrInvalidWorkspacePath (a pathspec matching no file, or one
// through a symbolic link), ErrRepoLocked, ErrWorkspaceUnavailable.
func (m *Manager) stageForCommit(ctx context.Context, w *wtRepo, all bool, pathspecs *bytes.Buffer) error {
	same, err := m.asCheckedOut(ctx, w, baselinePaths(w))
	if err != nil {
		return err
	}
	if all {
		err = addAll(ctx, w.git)
	} else {
		_, err = w.git.with("GIT_LITERAL_PATHSPECS=1").runIO(ctx, pathspecs, nil, "add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul")
	}
	if err != nil {
		if s := gitStderr(err); strings.Contains(s, "did not match any files") {
			return sandboxapi.Errorf(sandboxapi.ErrInvalidWorkspacePath, "no such file: %s", firstLine(s))
		} else if strings.Contains(s, "beyond a symbolic link") {
			return sandboxapi.Errorf(sandboxapi.ErrInvalidWorkspacePath, "path goes through a symbolic link: %s", firstLine(s))
		}
		return gitx.Classify(err, "git add", sandboxapi.ErrWorkspaceUnavailable)
	}
	w.forgetStage() // `git add` changed the index
	if err := dropNewGitlinks(ctx, w.git); err != nil {
		return err
	}
	return restoreCheckedOut(ctx, w.git, same)
}

// runCommit runs `git commit` of the staged index with req's message on
// stdin, id as author and committer, dated by Options.Now, hooks and
// signing off (see Commit). Errors: ErrRepoLocked, ErrInsufficientDisk,
// ErrWorkspaceUnavailable.
func (m *Manager) runCommit(ctx context.Context, w *wtRepo, id commitIdentity, req sandboxapi.CommitRequest) error {
	now := m.now()
	date := fmt.Sprintf("@%d %s", now.Unix(), now.Format("-0700"))
	g := w.git.with(
		"GIT_AUTHOR_NAME="+id.name, "GIT_AUTHOR_EMAIL="+id.email, "GIT_AUTHOR_DATE="+date,
		"GIT_COMMITTER_NAME="+id.name, "GIT_COMMITTER_EMAIL="+id.email, "GIT_COMMITTER_DATE="+date,
	)
	args := []string{"commit", "-q", "--no-verify", "--no-gpg-sign", "--cleanup=whitespace", "-F", "-"}
	if req.AllowEmpty {
		args = append(args, "--allow-empty")
	}
	if _, err := g.runIO(ctx, strings.NewReader(req.Message), nil, args...); err != nil {
		return gitx.Classify(err, "git commit", sandboxapi.ErrWorkspaceUnavailable)
	}
	return nil
}
