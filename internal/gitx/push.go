package gitx

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Default timeouts of Remote's network calls.
const (
	// DefaultLsRemoteTimeout bounds one ls-remote (CheckAccess, BranchTip).
	DefaultLsRemoteTimeout = 60 * time.Second
	// DefaultPushTimeout bounds one push.
	DefaultPushTimeout = 30 * time.Minute
)

// Remote is sandbox.RemoteGit over a Runner: git ls-remote and git push
// against an explicit URL (never a configured remote), with the credential
// per call through the environment (Call.Cred), so it never reaches argv, a
// URL, a config file, a log line or an error. Credentials are used for
// http(s) URLs only; file:// and ssh URLs get none.
type Remote struct {
	// Git is the one git runner. Required.
	Git *Runner
	// LsRemoteTimeout bounds ls-remote; 0 means DefaultLsRemoteTimeout.
	LsRemoteTimeout time.Duration
	// PushTimeout bounds a push; 0 means DefaultPushTimeout.
	PushTimeout time.Duration
}

var _ sandbox.RemoteGit = (*Remote)(nil)

func (r *Remote) lsTimeout() time.Duration {
	if r.LsRemoteTimeout > 0 {
		return r.LsRemoteTimeout
	}
	return DefaultLsRemoteTimeout
}

// credFor drops cred for URLs it cannot be scoped to (Call.Cred needs http(s)).
func credFor(repo sandboxapi.RepoIdentity, cred *sandbox.Credential) *sandbox.Credential {
	if strings.HasPrefix(repo.URL, "https://") || strings.HasPrefix(repo.URL, "http://") {
		return cred
	}
	return nil
}

// lsRemote runs `git ls-remote --end-of-options <url> <patterns>` outside any
// repository: in the runner's empty home with GIT_CEILING_DIRECTORIES set to
// its parent, so no enclosing repository's config (e.g. a data dir inside a
// checkout) is ever read.
func (r *Remote) lsRemote(ctx context.Context, repo sandboxapi.RepoIdentity, cred *sandbox.Credential, patterns ...string) (string, error) {
	if repo.URL == "" {
		return "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "repository URL is required")
	}
	dir := r.Git.emptyHome
	run := func(remote string) ([]byte, error) {
		return r.Git.Run(ctx, Call{
			Dir:       dir,
			Args:      append([]string{"ls-remote", "--end-of-options", remote}, patterns...),
			Env:       []string{"GIT_CEILING_DIRECTORIES=" + filepath.Dir(dir)},
			Cred:      credFor(repo, cred),
			RemoteURL: remote,
			Timeout:   r.lsTimeout(),
		})
	}
	out, err := run(repo.URL)
	if _, moved := Redirected(err); moved {
		// The repository moved on its host (renamed, transferred): follow
		// it there, same scheme and host only (moves.go).
		var mv Move
		if mv, moved, err = r.Git.Locate(ctx, repo.URL, credFor(repo, cred)); err != nil {
			return "", err
		}
		if moved {
			out, err = run(mv.URL)
		} else {
			out, err = run(repo.URL)
		}
	}
	if err != nil {
		return "", Classify(err, "ls-remote "+repo.Key(), sandboxapi.ErrRepoCacheUnavailable)
	}
	return string(out), nil
}

// CheckAccess implements sandbox.RemoteGit: `git ls-remote <url> HEAD` with
// cred. An empty repository (no HEAD) is readable.
func (r *Remote) CheckAccess(ctx context.Context, repo sandboxapi.RepoIdentity, cred *sandbox.Credential) error {
	_, err := r.lsRemote(ctx, repo, cred, "HEAD")
	return err
}

// BranchTip implements sandbox.RemoteGit: `git ls-remote <url>
// refs/heads/<branch>`, exact match only.
func (r *Remote) BranchTip(ctx context.Context, repo sandboxapi.RepoIdentity, cred *sandbox.Credential, branch string) (string, error) {
	if err := sandboxapi.ValidateRef(branch); err != nil {
		return "", err
	}
	ref := "refs/heads/" + branch
	out, err := r.lsRemote(ctx, repo, cred, ref)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		sha, name, ok := strings.Cut(line, "\t")
		if ok && strings.TrimSpace(name) == ref && isHexID(sha) {
			return sha, nil
		}
	}
	return "", nil
}

// LocalRef implements sandbox.RemoteGit: `git rev-parse --verify --quiet
// <ref>^{commit}` in gitDir (GIT_DIR pinned).
func (r *Remote) LocalRef(ctx context.Context, gitDir, ref string) (string, error) {
	if !strings.HasPrefix(ref, "refs/") || strings.ContainsAny(ref, " \t\n^~:?*[\\") {
		return "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "ref %q: want a full ref name", ref)
	}
	out, err := r.Git.Run(ctx, Call{Dir: gitDir, Env: []string{"GIT_DIR=" + gitDir}, Timeout: 2 * time.Minute,
		Args: []string{"rev-parse", "--verify", "--quiet", "--end-of-options", ref + "^{commit}"}})
	if err != nil {
		if ExitCode(err) == 1 {
			return "", nil
		}
		return "", Classify(err, "resolve "+ref, sandboxapi.ErrRepoCacheUnavailable)
	}
	return strings.TrimSpace(string(out)), nil
}

// Push implements sandbox.RemoteGit. In spec.GitDir it runs
//
//	git -c core.abbrev=no push --porcelain --no-verify --no-signed --no-follow-tags --recurse-submodules=no
//	    [--force-with-lease=refs/heads/<b>:<lease>] --end-of-options <url> refs/heads/<b>:refs/heads/<b>
//
// (a repository that moved on its host is pushed to at its new URL, same
// scheme and host only: Runner.Locate)
// after checking the repository's own configuration (pushGuard) for keys that
// could redirect the push or expose the credential (url.*.insteadOf and
// pushInsteadOf, http.*, credential.*, remote.<url>.*): an agent can edit a
// repo cache's config from a worktree, so such a key is ErrCommandRejected
// naming the key. On success spec.RecordRef (when set) is pointed at the
// pushed commit.
func (r *Remote) Push(ctx context.Context, spec sandbox.PushSpec, cred *sandbox.Credential) (sandboxapi.PushResult, error) {
	if err := checkPushSpec(spec); err != nil {
		return sandboxapi.PushResult{}, err
	}
	ref := "refs/heads/" + spec.Branch
	what := "push " + spec.Branch + " to " + spec.Repo.Key()
	local, err := r.LocalRef(ctx, spec.GitDir, ref)
	if err != nil {
		return sandboxapi.PushResult{}, err
	}
	if local == "" {
		return sandboxapi.PushResult{}, sandboxapi.Errorf(sandboxapi.ErrRefNotFound, "%s: the local branch does not exist", what)
	}
	if err := r.pushGuard(ctx, spec.GitDir, spec.Repo); err != nil {
		return sandboxapi.PushResult{}, err
	}
	args, err := pushArgs(ref, spec.Lease)
	if err != nil {
		return sandboxapi.PushResult{}, err
	}
	c := credFor(spec.Repo, cred)
	stdout, runErr, err := r.pushFollowingMoves(ctx, spec, c, args, ref)
	if err != nil {
		return sandboxapi.PushResult{}, err
	}
	porcelain := redact(stdout, secretForms(c))
	res, found := parsePorcelain(porcelain, ref+":"+ref)
	res.Branch, res.Commit = spec.Branch, local
	if found && res.rejected != "" {
		var ge *Error
		reason := ""
		if errors.As(runErr, &ge) {
			reason = remoteReason(ge.Stderr)
		}
		return sandboxapi.PushResult{}, rejection(what, res.rejected, reason)
	}
	if runErr != nil {
		return sandboxapi.PushResult{}, Classify(runErr, what, sandboxapi.ErrRepoCacheUnavailable)
	}
	if !found {
		return sandboxapi.PushResult{}, sandboxapi.Errorf(sandboxapi.ErrRepoCacheUnavailable, "%s: git reported no status for %s", what, ref)
	}
	if spec.RecordRef != "" {
		if _, err := r.Git.Run(ctx, Call{Dir: spec.GitDir, Env: []string{"GIT_DIR=" + spec.GitDir}, Timeout: 2 * time.Minute,
			Args: []string{"update-ref", "-m", "sandboxcore push", spec.RecordRef, local}}); err != nil {
			return sandboxapi.PushResult{}, Classify(err, what+": record the pushed commit", sandboxapi.ErrRepoCacheUnavailable)
		}
	}
	return res.PushResult, nil
}

// checkPushSpec validates what Push needs before any git runs: an absolute
// GitDir, a repository URL, a valid branch name and, when set, a full
// RecordRef ("refs/…"). Errors: ErrInvalidArgument.
func checkPushSpec(spec sandbox.PushSpec) error {
	if spec.GitDir == "" || !filepath.IsAbs(spec.GitDir) {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "push: the repository path must be absolute")
	}
	if spec.Repo.URL == "" {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "push: repository URL is required")
	}
	if err := sandboxapi.ValidateRef(spec.Branch); err != nil {
		return err
	}
	if spec.RecordRef != "" && (!strings.HasPrefix(spec.RecordRef, "refs/") || sandboxapi.ValidateRef(spec.RecordRef) != nil) {
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "push: record ref %q is not a full ref name", spec.RecordRef)
	}
	return nil
}

// pushArgs is `git push`'s arguments before the remote (see Push), with
// --force-with-lease=<ref>:<lease> when lease is set ("" = the remote
// branch must not exist). Errors: ErrInvalidArgument (a lease that is not
// a commit id).
func pushArgs(ref string, lease *string) ([]string, error) {
	// core.abbrev=no: full commit ids in the porcelain summary.
	args := []string{"-c", "core.abbrev=no", "push", "--porcelain", "--no-verify", "--no-signed", "--no-follow-tags", "--recurse-submodules=no"}
	if lease != nil {
		if *lease != "" && !isHexID(*lease) {
			return nil, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "push: lease %q is not a commit id", *lease)
		}
		args = append(args, "--force-with-lease="+ref+":"+*lease)
	}
	return args, nil
}

// pushFollowingMoves pushes ref to spec.Repo.URL and, when the host says
// the repository moved (Redirected), to where Runner.Locate finds it now
// (moves.go), within r.PushTimeout (DefaultPushTimeout when unset). It
// returns the last push's porcelain output and its error (runErr, judged
// by the caller against the output); err is Locate's.
func (r *Remote) pushFollowingMoves(ctx context.Context, spec sandbox.PushSpec, c *sandbox.Credential, args []string, ref string) (stdout string, runErr, err error) {
	timeout := r.PushTimeout
	if timeout <= 0 {
		timeout = DefaultPushTimeout
	}
	var out bytes.Buffer
	push := func(remote string) error {
		out.Reset()
		_, err := r.Git.Run(ctx, Call{
			Dir: spec.GitDir, Args: append(append([]string(nil), args...), "--end-of-options", remote, ref+":"+ref),
			Env:  []string{"GIT_DIR=" + spec.GitDir},
			Cred: c, RemoteURL: remote, Stdout: &out, Timeout: timeout,
		})
		return err
	}
	runErr = push(spec.Repo.URL)
	if _, moved := Redirected(runErr); moved {
		mv, ok, err := r.Git.Locate(ctx, spec.Repo.URL, c)
		if err != nil {
			return "", nil, err
		}
		if ok {
			runErr = push(mv.URL)
		}
	}
	return out.String(), runErr, nil
}

// rejection maps a `!` porcelain summary onto a typed error; reason, the
// remote's own explanation (remoteReason: e.g. receive-pack's "cannot lock
// ref … exists", a hook's or a code host's protected-branch message), is
// appended whatever the kind, so the caller learns why.
func rejection(what, summary, reason string) error {
	if reason != "" {
		summary += "; the remote said: " + reason
	}
	switch {
	case strings.Contains(summary, "stale info"):
		return sandboxapi.Errorf(sandboxapi.ErrConflict, "%s: the remote branch moved since this workspace last pushed it (lease refused): %s", what, summary)
	case strings.Contains(summary, "non-fast-forward"), strings.Contains(summary, "fetch first"), strings.Contains(summary, "already exists"):
		return sandboxapi.Errorf(sandboxapi.ErrConflict, "%s: the remote branch has commits this workspace lacks; push with force_with_lease to replace it: %s", what, summary)
	case refCollision.MatchString(summary):
		return sandboxapi.Errorf(sandboxapi.ErrConflict, "%s: the branch collides with another branch on the remote (git cannot hold a branch and a directory of the same name): %s", what, summary)
	case strings.Contains(summary, "remote rejected"):
		return sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "%s: the remote declined the update: %s", what, summary)
	}
	return sandboxapi.Errorf(sandboxapi.ErrConflict, "%s: rejected: %s", what, summary)
}

// maxReasonBytes bounds the remote's explanation quoted in a push error.
const maxReasonBytes = 2048

// remoteReason returns what the remote said about a failed push: the
// "remote: …" lines of git's stderr (receive-pack's errors, hook and code
// host messages), and git's own "error:"/"fatal:" lines but the generic
// "failed to push some refs", joined by "; ", control characters dropped
// (the text is the remote's, hence hostile), cut at maxReasonBytes.
// Progress lines are skipped. "" when there is nothing.
func remoteReason(stderr string) string {
	var parts []string
	for _, line := range strings.Split(strings.ReplaceAll(stderr, "\r", "\n"), "\n") {
		line = strings.TrimSpace(line)
		text, remote := strings.CutPrefix(line, "remote:")
		text = strings.TrimSpace(text)
		switch {
		case text == "":
			continue
		case remote:
			if progressLine.MatchString(text) {
				continue
			}
		case strings.HasPrefix(line, "error:") || strings.HasPrefix(line, "fatal:"):
			if strings.Contains(line, "failed to push some refs") {
				continue
			}
		default:
			continue
		}
		parts = append(parts, strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
				return -1
			}
			return r
		}, text))
	}
	return sandboxapi.Clip(strings.Join(parts, "; "), maxReasonBytes)
}

var (
	// progressLine matches the progress a remote reports ("Resolving deltas: 100% (3/3)").
	progressLine = regexp.MustCompile(`^[A-Za-z][A-Za-z ]*: +[0-9]+% \(|^Total [0-9]+ \(delta`)
	// refCollision matches git's message for a ref that cannot exist beside
	// another one ("'refs/heads/agent' exists; cannot create 'refs/heads/agent/x'").
	refCollision = regexp.MustCompile(`'(refs/[^']+)' exists; cannot create '(refs/[^']+)'`)
)

type porcelainResult struct {
	sandboxapi.PushResult
	rejected string // the summary of a "!" line
}

// parsePorcelain reads `git push --porcelain` output (git-push(1) "OUTPUT"):
//
//	<flag> \t <from>:<to> \t <summary> [(<reason>)]
//
// flags: ' ' fast-forward, '+' forced, '-' deleted, '*' new, '!' rejected, '=' up to date.
func parsePorcelain(out, refspec string) (porcelainResult, bool) {
	for _, line := range strings.Split(out, "\n") {
		if len(line) < 3 || line[1] != '\t' {
			continue
		}
		rest := line[2:]
		spec, summary, _ := strings.Cut(rest, "\t")
		if spec != refspec {
			continue
		}
		var res porcelainResult
		switch line[0] {
		case '*':
			res.Status = sandboxapi.PushCreated
		case ' ':
			res.Status = sandboxapi.PushFastForward
			res.PreviousRemoteCommit, _, _ = strings.Cut(summary, "..")
		case '+':
			res.Status = sandboxapi.PushForced
			res.PreviousRemoteCommit, _, _ = strings.Cut(summary, "...")
			res.PreviousRemoteCommit = strings.TrimSpace(res.PreviousRemoteCommit)
		case '=':
			res.Status = sandboxapi.PushUpToDate
		default:
			res.rejected = strings.TrimSpace(summary)
			if res.rejected == "" {
				res.rejected = "rejected"
			}
		}
		return res, true
	}
	return porcelainResult{}, false
}

// pushGuard refuses a push from a repository whose own configuration (local
// and worktree scopes, includes followed; the runner's command-line options
// excluded) could send the push elsewhere or the credential through a proxy,
// a credential helper or an unverified TLS connection.
func (r *Remote) pushGuard(ctx context.Context, gitDir string, repo sandboxapi.RepoIdentity) error {
	out, err := r.Git.Run(ctx, Call{Dir: gitDir, Env: []string{"GIT_DIR=" + gitDir}, Timeout: 2 * time.Minute,
		Args: []string{"config", "--list", "--name-only", "--show-scope", "--includes", "-z"}})
	if err != nil {
		if ExitCode(err) == 1 {
			return nil
		}
		return Classify(err, "push: read the repository config", sandboxapi.ErrRepoCacheUnavailable)
	}
	fields := strings.Split(string(out), "\x00")
	for i := 0; i+1 < len(fields); i += 2 {
		scope, name := fields[i], fields[i+1]
		if scope == "command" {
			continue
		}
		if key := dangerousPushKey(name, repo.URL); key != "" {
			return sandboxapi.Errorf(sandboxapi.ErrCommandRejected,
				"push refused: the repository config sets %q, which could redirect the push or expose its credential; remove it first", clipKey(key))
		}
	}
	return nil
}

// dangerousPushKey returns name when it is a config key pushGuard refuses, else "".
func dangerousPushKey(name, url string) string {
	lower := strings.ToLower(name)
	switch {
	case strings.HasPrefix(lower, "url.") && (strings.HasSuffix(lower, ".insteadof") || strings.HasSuffix(lower, ".pushinsteadof")):
		return name
	case strings.HasPrefix(lower, "http."), strings.HasPrefix(lower, "credential."):
		return name
	case lower == "core.alternaterefscommand", lower == "core.sshcommand", lower == "core.gitproxy":
		return name
	case strings.HasPrefix(lower, "remote."):
		if i := strings.LastIndexByte(name, '.'); i > len("remote.") && name[len("remote."):i] == url {
			return name
		}
	}
	return ""
}

func clipKey(s string) string { return sandboxapi.Clip(s, 200) }

func isHexID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
