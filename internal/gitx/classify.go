package gitx

import (
	"context"
	"errors"
	"regexp"
	"strings"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

var (
	authPatterns   = regexp.MustCompile(`(?i)authentication failed|could not read (username|password)|terminal prompts disabled|http(/[0-9.]+)? 40[13]|returned error: 40[13]|permission denied \(publickey|invalid username or password|access denied|401 unauthorized|403 forbidden`)
	repoMissingPat = regexp.MustCompile(`(?i)repository not found|repository '[^']*' not found|returned error: (404|410)\b|does not appear to be a git repository`)
	notFoundPat    = regexp.MustCompile(`(?i)not found|does not exist`)
	diskPat        = regexp.MustCompile(`(?i)no space left on device|disk quota exceeded|out of diskspace`)
	fileTooBigPat  = regexp.MustCompile(`(?i)file too large`)
	lockPat        = regexp.MustCompile(`Unable to create '([^']+\.lock)': File exists`)
	unreachPat     = regexp.MustCompile(`(?i)could not resolve host|connection refused|connection timed out|connection reset|failed to connect|network is unreachable|no route to host|operation timed out|could not connect|the remote end hung up unexpectedly|early eof|unexpected disconnect|rpc failed|transfer closed|ssl_connect|gnutls|tls connection|returned error: 5[0-9][0-9]\b|http(/[0-9.]+)? 5[0-9][0-9]`)
	refPat         = regexp.MustCompile(`(?i)invalid reference|unknown revision|not a valid object name|needed a single revision|couldn't find remote ref|bad revision|not a commit`)
	// nameTooLongPat: the host's filesystem cannot hold a path of the
	// repository or the workspace (ENAMETOOLONG: a name over 255 bytes or a
	// path over 4096).
	nameTooLongPat = regexp.MustCompile(`(?i)file name too long`)
	// invalidPathPat: git refuses to check out a path on this host
	// (core.protectNTFS/protectHFS, ".git" components, verify_path).
	invalidPathPat = regexp.MustCompile(`(?i)invalid path '([^']*)'`)
	// localPathMissingPat: a path named to a local call is not in the commit or tree.
	localPathMissingPat = regexp.MustCompile(`(?i)path '([^']*)' does not exist in|pathspec '([^']*)' did not match`)
	// incompletePat: the remote cannot serve the complete history: it is a
	// shallow or partial (promisor) clone, or its objects are damaged.
	incompletePat = regexp.MustCompile(`(?i)shallow roots are not allowed|shallow update not allowed|from promisor remote|repository corruption on the remote side|did not send all necessary objects`)
	// badRequestPat: the remote refused the request itself (HTTP 400).
	badRequestPat = regexp.MustCompile(`(?i)returned error: 400\b|http(/[0-9.]+)? 400\b`)
	// rateLimitPat: the remote's rate limit (HTTP 429).
	rateLimitPat = regexp.MustCompile(`(?i)returned error: 429\b|http(/[0-9.]+)? 429\b|too many requests`)
)

// IncompleteUpstreamMessage ends the message of an error about a remote
// that cannot serve complete history (Classify; internal/repocache).
const IncompleteUpstreamMessage = "the remote repository cannot serve its complete history (it is a shallow or partial clone, or its objects are damaged); use the repository it was cloned from"

// Classify maps a git failure onto the typed error that names its cause
// (docs/API.md "Errors"; the retryable flag is the kind's, so only what
// sending the call again can cure is retried):
//
//   - a held lock file → ErrRepoLocked naming it (retryable);
//   - a full disk or quota → ErrInsufficientDisk; a file over the host's
//     size limit (EFBIG) → ErrResourceLimit;
//   - a path the host cannot hold (a name over 255 bytes, a path over 4096:
//     ENAMETOOLONG) or that git refuses to check out here ("invalid path")
//     → ErrInvalidWorkspacePath naming it; a path not in the commit named
//     → ErrFileNotFound;
//   - a ref that cannot be created beside another ("'refs/heads/a' exists;
//     cannot create 'refs/heads/a/b'") → ErrConflict naming both;
//   - a remote that cannot serve its complete history (a shallow or
//     partial clone, remote-side corruption) → ErrInvalidArgument saying
//     so (IncompleteUpstreamMessage), never retried;
//   - auth (HTTP 401, 403, refused keys) → ErrRepoAuthFailed;
//   - HTTP 429 → ErrRateLimited (retryable);
//   - an unknown ref → ErrRefNotFound;
//   - HTTP 404, 410, "repository not found" and an unfollowed redirect
//     (Locate) → ErrRepoNotFound (permanent: not retried);
//   - HTTP 400 (the remote refused the request itself, e.g. a push over its
//     size limit) → ErrCommandRejected, not retried;
//   - an unreachable remote, a dropped connection, HTTP 5xx, and on a
//     network call any other "not found" → ErrRepoCacheUnavailable
//     (retryable);
//   - a typed error (e.g. Run's ErrCommandRejected) keeps its kind; a
//     timeout is ErrTimeout; anything else → fallback.
//
// what describes the operation ("clone owner/repo").
func Classify(err error, what string, fallback *sandboxapi.Kind) error {
	if err == nil {
		return nil
	}
	var ge *Error
	if !errors.As(err, &ge) {
		if errors.Is(err, context.DeadlineExceeded) {
			return sandboxapi.Errorf(sandboxapi.ErrTimeout, "%s: %v", what, err)
		}
		if k := sandboxapi.KindOf(err); k != nil {
			return sandboxapi.Errorf(k, "%s: %s", what, sandboxapi.Message(err))
		}
		return sandboxapi.Errorf(fallback, "%s: %v", what, err)
	}
	msg := strings.ReplaceAll(ge.Stderr, "\x00", "")
	network := networkCommands[subcommand(ge.Args)]
	switch {
	case lockPat.MatchString(msg):
		return sandboxapi.Errorf(sandboxapi.ErrRepoLocked, "%s: lock file held: %s (a live process has it open, or a git process runs in the repository and it is younger than the stale-lock age)", what, lockPat.FindStringSubmatch(msg)[1])
	case diskPat.MatchString(msg):
		return sandboxapi.Errorf(sandboxapi.ErrInsufficientDisk, "%s: %s", what, firstLine(msg))
	case fileTooBigPat.MatchString(msg):
		return sandboxapi.Errorf(sandboxapi.ErrResourceLimit, "%s: a file exceeds the host's file size limit: %s", what, clipLine(msg, fileTooBigPat))
	case nameTooLongPat.MatchString(msg):
		return sandboxapi.Errorf(sandboxapi.ErrInvalidWorkspacePath, "%s: a path is longer than the host's filesystem allows (255 bytes a name, 4096 a path): %s", what, clipLine(msg, nameTooLongPat))
	case invalidPathPat.MatchString(msg):
		return sandboxapi.Errorf(sandboxapi.ErrInvalidWorkspacePath, "%s: git refuses to check out the path %q on this host", what, sandboxapi.Clip(invalidPathPat.FindStringSubmatch(msg)[1], 256))
	case refCollision.MatchString(msg):
		m := refCollision.FindStringSubmatch(msg)
		return sandboxapi.Errorf(sandboxapi.ErrConflict, "%s: %s cannot be created because %s exists (git cannot hold a ref and a directory of the same name)", what, m[2], m[1])
	case incompletePat.MatchString(msg):
		return sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "%s: %s: %s", what, IncompleteUpstreamMessage, clipLine(msg, incompletePat))
	case authPatterns.MatchString(msg):
		return sandboxapi.Errorf(sandboxapi.ErrRepoAuthFailed, "%s: the remote refused the credentials (or none were given): %s", what, firstLine(msg))
	case rateLimitPat.MatchString(msg):
		return sandboxapi.Errorf(sandboxapi.ErrRateLimited, "%s: the remote's rate limit is exhausted (HTTP 429): %s", what, firstLine(msg))
	case refPat.MatchString(msg):
		return sandboxapi.Errorf(sandboxapi.ErrRefNotFound, "%s: %s", what, firstLine(msg))
	case !network && localPathMissingPat.MatchString(msg):
		return sandboxapi.Errorf(sandboxapi.ErrFileNotFound, "%s: %s", what, firstLine(msg))
	case repoMissingPat.MatchString(msg):
		return sandboxapi.Errorf(sandboxapi.ErrRepoNotFound, "%s: %s", what, firstLine(msg))
	case redirectPat.MatchString(msg):
		// A redirect the caller did not follow (Locate): a permanent answer, never retried.
		return sandboxapi.Errorf(sandboxapi.ErrRepoNotFound, "%s: the remote redirects the repository elsewhere (moved or renamed): %s", what, firstLine(msg))
	case badRequestPat.MatchString(msg):
		return sandboxapi.Errorf(sandboxapi.ErrCommandRejected, "%s: the remote refused the request (HTTP 400 Bad Request; e.g. a push over its size limit): %s", what, firstLine(msg))
	case unreachPat.MatchString(msg), network && notFoundPat.MatchString(msg):
		return sandboxapi.Errorf(sandboxapi.ErrRepoCacheUnavailable, "%s: %s", what, firstLine(msg))
	}
	return sandboxapi.Errorf(fallback, "%s: %s", what, ge.Error())
}

// clipLine returns the first line of msg that pat matches, cut to 512
// bytes (firstLine when none does).
func clipLine(msg string, pat *regexp.Regexp) string {
	for _, l := range strings.Split(msg, "\n") {
		if pat.MatchString(l) {
			return sandboxapi.Clip(strings.TrimSpace(l), 512)
		}
	}
	return sandboxapi.Clip(firstLine(msg), 512)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	lines := strings.Split(s, "\n")
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "fatal:") || strings.HasPrefix(l, "error:") {
			return l
		}
	}
	if len(lines) > 0 {
		return strings.TrimSpace(lines[len(lines)-1])
	}
	return s
}
