package gitx

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Repository moves (docs/SECURITY.md "Git hardening": redirects). A
// repository renamed or transferred on its host answers with an HTTP
// redirect (301, 302, 307, 308) to its new path. git itself never follows
// one here (http.followRedirects=false: a redirect could lead the
// per-call credential to another host), so a redirected call fails with
// "The requested URL returned error: 301". Locate then asks the remote
// itself where the repository went, with net/http and no redirect
// followed, and accepts the answer only when it stays on the same scheme
// and host (so the credential, scoped to the new URL, goes only where it
// already went) and names a valid repository URL; the caller repeats its
// git call on that URL. A move to another host is refused with
// ErrRepoNotFound naming the host: the caller must use the new URL.

// MaxMoveHops bounds the redirects Locate follows (a chain of renames).
const MaxMoveHops = 5

// moveTimeout bounds each request Locate makes.
const moveTimeout = 30 * time.Second

var redirectPat = regexp.MustCompile(`returned error: (30[12378])\b`)

// Redirected reports whether err is a git call that failed because the
// remote answered with an HTTP redirect, and its status code.
func Redirected(err error) (code int, ok bool) {
	var ge *Error
	if !errors.As(err, &ge) {
		return 0, false
	}
	m := redirectPat.FindStringSubmatch(ge.Stderr)
	if m == nil {
		return 0, false
	}
	code, _ = strconv.Atoi(m[1])
	return code, true
}

// Move is where Locate found a repository.
type Move struct {
	// URL is the repository's new clone URL (same scheme and host).
	URL string
	// Permanent is true when every hop was permanent (301 or 308): the old
	// name is gone for good and the new one is the repository's name.
	Permanent bool
}

// Locate follows the redirects of an http(s) repository URL: it requests
// <url>/info/refs?service=git-upload-pack (the first request of every git
// fetch, ls-remote and clone; cred is sent as git would send it, scoped to
// the URL asked) without following redirects, and repeats with each
// redirect's target, at most MaxMoveHops times. It returns the final URL,
// or ok=false when the first answer is no redirect. Errors:
// ErrRepoNotFound (a move to another scheme or host, a target that is not a
// repository URL, too many hops or a loop), ErrRepoCacheUnavailable (the
// remote did not answer).
func (r *Runner) Locate(ctx context.Context, repoURL string, cred *sandbox.Credential) (mv Move, ok bool, err error) {
	client := &http.Client{
		Timeout:       moveTimeout,
		Transport:     &http.Transport{Proxy: nil, ForceAttemptHTTP2: true, TLSHandshakeTimeout: moveTimeout},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	defer client.CloseIdleConnections()
	start, err := url.Parse(repoURL)
	if err != nil || (start.Scheme != "https" && start.Scheme != "http") || start.Host == "" {
		return Move{}, false, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "locate %s: not an http(s) repository URL", sandboxapi.Clip(repoURL, 200))
	}
	cur := strings.TrimSuffix(repoURL, "/")
	seen := map[string]bool{cur: true}
	mv = Move{URL: cur, Permanent: true}
	for hop := 0; ; hop++ {
		code, loc, err := r.probe(ctx, client, cur, cred)
		if err != nil {
			return Move{}, false, err
		}
		if code == 0 {
			return mv, hop > 0, nil
		}
		if hop == MaxMoveHops {
			return Move{}, false, sandboxapi.Errorf(sandboxapi.ErrRepoNotFound, "%s moved more than %d times", start.Redacted(), MaxMoveHops)
		}
		next, err := r.moveTarget(start, cur, loc)
		if err != nil {
			return Move{}, false, err
		}
		if seen[next] {
			return Move{}, false, sandboxapi.Errorf(sandboxapi.ErrRepoNotFound, "%s redirects in a loop", start.Redacted())
		}
		seen[next] = true
		mv.URL = next
		mv.Permanent = mv.Permanent && (code == http.StatusMovedPermanently || code == http.StatusPermanentRedirect)
		cur = next
	}
}

// probe requests <repo>/info/refs?service=git-upload-pack and returns the
// redirect's status and Location, or code 0 when the answer is no redirect.
func (r *Runner) probe(ctx context.Context, client *http.Client, repo string, cred *sandbox.Credential) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, moveTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, repo+"/info/refs?service=git-upload-pack", nil)
	if err != nil {
		return 0, "", sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "locate: %v", err)
	}
	req.Header.Set("User-Agent", "git/2 (sandboxcore)")
	var secrets []string
	if cred != nil {
		header, _, err := authHeader(cred, repo)
		if err != nil {
			return 0, "", err
		}
		name, value, _ := strings.Cut(header, ": ")
		req.Header.Set(name, value)
		secrets = secretForms(cred)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", sandboxapi.Errorf(sandboxapi.ErrRepoCacheUnavailable, "locate %s: %s", redactedURL(repo), redact(err.Error(), secrets))
	}
	_ = resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return resp.StatusCode, resp.Header.Get("Location"), nil
	}
	return 0, "", nil
}

// moveTarget validates a redirect's Location (relative to the request
// URL) and returns the repository URL it names: same scheme and host as
// the original URL, the path without "/info/refs", no query, a valid
// repository URL under the runner's protocol policy.
func (r *Runner) moveTarget(start *url.URL, cur, location string) (string, error) {
	base, err := url.Parse(cur + "/info/refs?service=git-upload-pack")
	if err != nil {
		return "", sandboxapi.Errorf(sandboxapi.ErrRepoNotFound, "%s moved to an unreadable location", start.Redacted())
	}
	loc, err := base.Parse(location)
	if err != nil || location == "" {
		return "", sandboxapi.Errorf(sandboxapi.ErrRepoNotFound, "%s moved to an unreadable location", start.Redacted())
	}
	if !strings.EqualFold(loc.Scheme, start.Scheme) || !strings.EqualFold(loc.Host, start.Host) || loc.User != nil {
		return "", sandboxapi.Errorf(sandboxapi.ErrRepoNotFound,
			"%s moved to another host or scheme (%s://%s): not followed, so the credential never leaves %s; acquire the repository by its new URL",
			start.Redacted(), loc.Scheme, loc.Host, start.Host)
	}
	p, ok := strings.CutSuffix(loc.EscapedPath(), "/info/refs")
	if !ok || p == "" {
		return "", sandboxapi.Errorf(sandboxapi.ErrRepoNotFound, "%s moved to %s, which is not a repository", start.Redacted(), redactedURL(loc.String()))
	}
	next := start.Scheme + "://" + start.Host + p
	if _, err := sandboxapi.ParseRepoURL(next, sandboxapi.URLPolicy{AllowFile: r.allowFile, AllowHTTP: r.allowHTTP}); err != nil {
		return "", sandboxapi.Errorf(sandboxapi.ErrRepoNotFound, "%s moved to %s, which is not a valid repository URL: %s", start.Redacted(), redactedURL(next), sandboxapi.Message(err))
	}
	return next, nil
}

// redactedURL is u without user info, query and fragment, for messages.
func redactedURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "<unparsable URL>"
	}
	p.User, p.RawQuery, p.Fragment = nil, "", ""
	return p.String()
}
