package sandboxapi

import (
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// URLPolicy says which repository URL schemes besides https and ssh are accepted.
// AllowFile comes from SANDBOX_ALLOW_FILE_URLS=1; AllowHTTP from
// SANDBOX_ALLOW_HTTP_URLS=1 (plain http sends credentials in clear text: meant
// for loopback test servers only).
type URLPolicy struct {
	// AllowFile accepts file:///abs/path/repo URLs.
	AllowFile bool
	// AllowHTTP accepts plain http:// URLs.
	AllowHTTP bool
}

// FileHost is the identity host of file:// repositories. It cannot be a real
// host name (those never start with '_'), so a file repository never shares a
// cache with a network one.
const FileHost = "_file"

// MaxURLLength bounds a repository URL, in bytes.
const MaxURLLength = 2048

var (
	hostPattern    = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$`)
	segmentPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*$`)
	scpPattern     = regexp.MustCompile(`^([A-Za-z0-9_][A-Za-z0-9._-]*)@([^:/]+):(.+)$`)
	portPattern    = regexp.MustCompile(`^[1-9][0-9]{0,4}$`)
	sshUserPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*$`)
)

// ParseRepoURL validates a repository URL and derives its identity: host
// lowercased (with its port, if any), owner = every path segment but the last,
// name = the last segment with ".git" stripped. Accepted forms:
// https://host[:port]/owner/repo[.git], ssh://[user@]host[:port]/owner/repo[.git],
// user@host:owner/repo[.git] (scp-like ssh), http:// only under policy.AllowHTTP,
// and file:///abs/path/repo[.git] only under policy.AllowFile (identity host FileHost).
// Rejected with ErrInvalidArgument: credentials in the URL, git's "transport::address"
// forms (ext::, fd::), a leading '-', control characters or spaces, query strings,
// fragments, ports outside 1-65535 or with leading zeros, and path segments
// that are empty, contain "..", start with '-' or '.', end with ".lock", or
// (from the third on) are named "worktrees" (see splitRepoPath).
//
// Every accepted URL re-parses to the same identity (the returned URL is
// canonical), and Host, Owner and Name are safe as path components of the
// repo cache layout (<root>/repos/<host>/<owner>/<name>, ':' of the host
// replaced by '_').
func ParseRepoURL(raw string, policy URLPolicy) (RepoIdentity, error) {
	bad := func(why string) (RepoIdentity, error) {
		return RepoIdentity{}, Errorf(ErrInvalidArgument, "repository URL %q: %s", clip(raw), why)
	}
	result := func(id RepoIdentity, why string) (RepoIdentity, error) {
		if why != "" {
			return bad(why)
		}
		return id, nil
	}
	if why := repoURLTextProblem(raw); why != "" {
		return bad(why)
	}
	if m := scpPattern.FindStringSubmatch(raw); m != nil && !strings.Contains(raw, "://") {
		return result(scpRepo(m))
	}
	u, perr := url.Parse(raw)
	if perr != nil {
		return bad("unparseable")
	}
	if u.RawQuery != "" || u.Fragment != "" || u.ForceQuery || strings.Contains(raw, "#") {
		return bad("query strings and fragments are not allowed")
	}
	if u.Opaque != "" {
		return bad("not a hierarchical URL")
	}
	scheme := strings.ToLower(u.Scheme)
	switch scheme {
	case "https", "ssh":
	case "http":
		if !policy.AllowHTTP {
			return bad("http URLs are disabled (set SANDBOX_ALLOW_HTTP_URLS=1 to allow them)")
		}
	case "file":
		if !policy.AllowFile {
			return bad("file URLs are disabled (set SANDBOX_ALLOW_FILE_URLS=1 to allow them)")
		}
		return result(fileRepo(u))
	case "":
		return bad(notAURL(raw, policy))
	default:
		return bad("scheme " + strconvQuote(scheme) + " is not supported: " + urlForms(policy))
	}
	return result(networkRepo(u, scheme))
}

// urlForms names the repository URL forms policy accepts, for messages.
func urlForms(policy URLPolicy) string {
	forms := "give an https://host/owner/repo.git or ssh://host/owner/repo.git URL (or user@host:owner/repo.git)"
	if policy.AllowHTTP {
		forms += ", or http://"
	}
	if policy.AllowFile {
		forms += ", or file:///abs/path/repo for a local repository"
	}
	return forms
}

// notAURL says why raw, which has no scheme, is refused: a local path is
// given as a file:// URL (naming the one for an absolute path, and whether
// the policy allows it); anything else as one of the URL forms.
func notAURL(raw string, policy URLPolicy) string {
	if first, _, ok := strings.Cut(raw, "/"); ok && strings.Contains(first, ".") && !strings.HasPrefix(first, ".") {
		return "not a URL: give a URL such as https://" + clip(raw) // host/owner/repo
	}
	file := "file:///abs/path/repo"
	if strings.HasPrefix(raw, "/") {
		file = "file://" + clip(raw)
	}
	why := "not a URL: give a URL such as " + file + " for a local repository"
	if !policy.AllowFile {
		why += " (the worker must allow file URLs: SANDBOX_ALLOW_FILE_URLS=1)"
	}
	return why + ", or https://host/owner/repo.git"
}

// repoURLTextProblem is what makes raw unusable as a repository URL before
// it is parsed at all ("" when nothing): empty, over MaxURLLength, not
// UTF-8, a control character, space or backslash, a leading '-' (option
// injection) or git's "<transport>::" syntax.
func repoURLTextProblem(raw string) string {
	if raw == "" {
		return "empty"
	}
	if len(raw) > MaxURLLength {
		return "too long"
	}
	if !utf8.ValidString(raw) {
		return "not UTF-8"
	}
	for _, r := range raw {
		if r <= ' ' || r == 0x7f || r == '\\' {
			return "contains a control character, space or backslash"
		}
	}
	if strings.HasPrefix(raw, "-") {
		return "starts with '-'"
	}
	if i := strings.Index(raw, "::"); i >= 0 && !strings.Contains(raw[:i], "/") {
		return "git transport syntax (\"<transport>::\") is not allowed"
	}
	return ""
}

// scpRepo is the identity of an scp-like URL (user@host:owner/name, m
// from scpPattern), normalised to user@host:owner/name.git, or why not.
func scpRepo(m []string) (RepoIdentity, string) {
	host := strings.ToLower(m[2])
	if !hostPattern.MatchString(host) {
		return RepoIdentity{}, "invalid host"
	}
	owner, name, err := splitRepoPath(m[3])
	if err != "" {
		return RepoIdentity{}, err
	}
	return RepoIdentity{Host: host, Owner: owner, Name: name, URL: m[1] + "@" + host + ":" + owner + "/" + name + ".git"}, ""
}

// fileRepo is the identity of a file:///absolute/path URL (host FileHost,
// the path cleaned), or why not: another host, credentials, a bad path.
func fileRepo(u *url.URL) (RepoIdentity, string) {
	if u.Host != "" && u.Host != "localhost" {
		return RepoIdentity{}, "file URLs must be file:///absolute/path"
	}
	if u.User != nil {
		return RepoIdentity{}, "credentials are not allowed in URLs"
	}
	owner, name, err := splitRepoPath(strings.TrimPrefix(u.Path, "/"))
	if err != "" {
		return RepoIdentity{}, err
	}
	return RepoIdentity{Host: FileHost, Owner: owner, Name: name, URL: "file://" + path.Clean(u.Path)}, ""
}

// networkRepo is the identity of an https, http or ssh URL u (scheme
// lower-cased), normalised to scheme://[user@]host[:port]/owner/name.git,
// or why not: credentials (only an ssh user name is allowed), a bad user,
// host, port or path.
func networkRepo(u *url.URL, scheme string) (RepoIdentity, string) {
	if u.User != nil {
		if _, hasPass := u.User.Password(); hasPass || scheme != "ssh" {
			return RepoIdentity{}, "credentials are not allowed in URLs"
		}
		if !sshUserPattern.MatchString(u.User.Username()) {
			return RepoIdentity{}, "invalid ssh user"
		}
	}
	host := strings.ToLower(u.Hostname())
	if !hostPattern.MatchString(host) {
		return RepoIdentity{}, "invalid host"
	}
	hostport := host
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); !portPattern.MatchString(p) || err != nil || n > 65535 {
			return RepoIdentity{}, "invalid port"
		}
		hostport = host + ":" + p
	}
	owner, name, err := splitRepoPath(strings.TrimPrefix(u.Path, "/"))
	if err != "" {
		return RepoIdentity{}, err
	}
	user := ""
	if u.User != nil {
		user = u.User.Username() + "@"
	}
	return RepoIdentity{Host: hostport, Owner: owner, Name: name, URL: scheme + "://" + user + hostport + "/" + owner + "/" + name + ".git"}, ""
}

// reservedRepoSegment may not be a repository path's third or later
// segment: the worker keeps each repository's worktrees in a directory of
// that name beside its mirror, and the repository "<host>/a/b/worktrees/<x>"
// must never live inside the worktrees of "<host>/a/b".
const reservedRepoSegment = "worktrees"

// splitRepoPath splits "a/b/repo.git" into owner "a/b" and name "repo"; it
// returns a reason when the path is unacceptable.
func splitRepoPath(p string) (owner, name, why string) {
	p = strings.TrimSuffix(p, "/")
	if p == "" {
		return "", "", "missing owner/repo path"
	}
	segs := strings.Split(p, "/")
	if len(segs) < 2 {
		return "", "", "path must be owner/repo"
	}
	if len(segs) > 8 {
		return "", "", "path has too many segments"
	}
	last := strings.TrimSuffix(segs[len(segs)-1], ".git")
	segs[len(segs)-1] = last
	for i, s := range segs {
		if s == "" || strings.Contains(s, "..") || !segmentPattern.MatchString(s) || strings.HasSuffix(s, ".lock") || len(s) > 100 {
			return "", "", "invalid path segment " + strconvQuote(s)
		}
		if i >= 2 && s == reservedRepoSegment {
			return "", "", "the path segment \"" + reservedRepoSegment + "\" is reserved after the second segment"
		}
	}
	return strings.Join(segs[:len(segs)-1], "/"), last, ""
}

// MaxRefLength bounds a ref name, in bytes.
const MaxRefLength = 255

// ValidateRef checks a user-supplied ref (branch, tag or commit) against git's
// check-ref-format rules (git-check-ref-format(1)) and this service's own: no
// leading '-' (it could be read as an option: the kind of
// "--upload-pack=…" or "--output=…"), valid UTF-8 (a ref travels in JSON
// payloads, which would silently replace invalid bytes), at most
// MaxRefLength bytes. A one-level name such as "main" is allowed (as with
// --allow-onelevel). Every ref it accepts is also accepted by
// `git check-ref-format --allow-onelevel`. Returns ErrInvalidArgument.
func ValidateRef(ref string) error {
	bad := func(why string) error {
		return Errorf(ErrInvalidArgument, "ref %q: %s", clip(ref), why)
	}
	switch {
	case ref == "":
		return bad("empty")
	case len(ref) > MaxRefLength:
		return bad("too long")
	case strings.HasPrefix(ref, "-"):
		return bad("starts with '-'")
	case !utf8.ValidString(ref):
		return bad("not UTF-8")
	case ref == "@":
		return bad("is '@'")
	case strings.Contains(ref, ".."):
		return bad("contains '..'")
	case strings.Contains(ref, "@{"):
		return bad("contains '@{'")
	case strings.Contains(ref, "//"):
		return bad("contains '//'")
	case strings.HasSuffix(ref, "/") || strings.HasPrefix(ref, "/"):
		return bad("starts or ends with '/'")
	case strings.HasSuffix(ref, "."):
		return bad("ends with '.'")
	}
	for _, r := range ref {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r) {
			return bad("contains a forbidden character")
		}
	}
	for _, c := range strings.Split(ref, "/") {
		if strings.HasPrefix(c, ".") {
			return bad("a component starts with '.'")
		}
		if strings.HasSuffix(c, ".lock") {
			return bad("a component ends with '.lock'")
		}
	}
	return nil
}

// MaxIDLength bounds user, project, conversation and task ids, in bytes.
const MaxIDLength = 128

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

// ValidateID checks an id (what names it: "user_id", "project_id",
// "conversation_id", "task_id"): 1 to MaxIDLength characters from
// [A-Za-z0-9_-], not starting with '-' or '_'. Such an id is safe in a path
// component and in a branch name. Returns ErrInvalidArgument.
func ValidateID(what, id string) error {
	if id == "" {
		return Errorf(ErrInvalidArgument, "%s is required", what)
	}
	if len(id) > MaxIDLength {
		return Errorf(ErrInvalidArgument, "%s is longer than %d bytes", what, MaxIDLength)
	}
	if !idPattern.MatchString(id) {
		return Errorf(ErrInvalidArgument, "%s %q: only letters, digits, '_' and '-' are allowed, starting with a letter or digit", what, clip(id))
	}
	return nil
}

// MaxPathLength bounds a workspace-relative path, in bytes.
const MaxPathLength = 4096

// CleanRelPath validates a workspace-relative file path and returns it cleaned
// ("." for the root when p is "" or "."). Rejected with ErrInvalidWorkspacePath:
// absolute paths, any ".." component, NUL or other control characters, and
// paths longer than MaxPathLength; rejected with ErrInvalidArgument: a path
// starting with '-' (docs/SECURITY.md "Input validation"; "./-n" names a file "-n").
// Symlinks are the file layer's concern (os.Root).
func CleanRelPath(p string) (string, error) {
	bad := func(why string) (string, error) {
		return "", Errorf(ErrInvalidWorkspacePath, "path %q: %s", clip(p), why)
	}
	if p == "" || p == "." {
		return ".", nil
	}
	if len(p) > MaxPathLength {
		return bad("too long")
	}
	if !utf8.ValidString(p) {
		return bad("not UTF-8")
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return bad("contains a control character")
		}
	}
	if strings.HasPrefix(p, "/") {
		return bad("absolute paths are not allowed")
	}
	if strings.HasPrefix(p, "-") {
		// Option injection (docs/SECURITY.md "Input validation"): refused as an argument error even though
		// file operations never reach an argv; "./-n" names such a file.
		return "", Errorf(ErrInvalidArgument, "path %q starts with '-' and could be read as an option; write it as %q", clip(p), "./"+clip(p))
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return bad("'..' is not allowed")
		}
	}
	return path.Clean(p), nil
}

// ValidateSearchPattern checks a search pattern before any search runs: not
// empty, at most maxBytes bytes, and not starting with '-' (docs/SECURITY.md "Input validation":
// option injection, `--pre=sh` is the classic rg/grep injection). A pattern that must
// start with a dash is written as a regular expression, `\-x` or `[-]x`.
// Errors wrap ErrInvalidArgument.
func ValidateSearchPattern(pattern string, maxBytes int) error {
	switch {
	case pattern == "":
		return Errorf(ErrInvalidArgument, "search needs a pattern")
	case len(pattern) > maxBytes:
		return Errorf(ErrInvalidArgument, "search pattern is longer than %d bytes", maxBytes)
	case strings.HasPrefix(pattern, "-"):
		// The same text as a regular expression: the dash escaped, the rest
		// quoted (so a literal search's "-a.b(" stays literal).
		hint := `\-` + regexp.QuoteMeta(pattern[1:])
		if !utf8.ValidString(hint) || strings.ContainsFunc(hint, func(r rune) bool { return !unicode.IsPrint(r) }) || len(hint) > 80 {
			hint = "a backslash before the dash"
		}
		return Errorf(ErrInvalidArgument, "search pattern %q starts with '-' and could be read as an option; "+
			"search for the regular expression %s instead (as a regular expression, not a literal search)", clip(pattern), hint)
	}
	return nil
}

// IsGitMetadataPath reports whether a cleaned relative path is, or is inside, a
// ".git" entry at any depth; writes there could redirect or poison host-side git.
func IsGitMetadataPath(clean string) bool {
	for _, c := range strings.Split(clean, "/") {
		if strings.EqualFold(c, ".git") {
			return true
		}
	}
	return false
}

func clip(s string) string { return Clip(s, 120) }

func strconvQuote(s string) string { return "\"" + clip(s) + "\"" }

// PermissiveURLs accepts every URL form a worker may allow (file:// and
// http:// included). Clients and workflow validators check requests with it;
// the worker's acquire applies its own URLPolicy (SANDBOX_ALLOW_FILE_URLS,
// SANDBOX_ALLOW_HTTP_URLS) again.
var PermissiveURLs = URLPolicy{AllowFile: true, AllowHTTP: true}
