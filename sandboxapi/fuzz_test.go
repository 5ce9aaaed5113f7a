package sandboxapi

import (
	"encoding/json"
	"errors"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// The fuzz targets of the contract's parsers and validators of client
// input (docs/SECURITY.md "Fuzzing"). Their seed corpora are committed
// under testdata/fuzz/<target>/ (the hostile examples of docs/SECURITY.md
// among them) and run as ordinary tests by `go test`; `make fuzz` (part of
// `make test`, so CI runs it) also runs each target for a fixed number of
// executions.

var (
	validHostPort = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*(:[1-9][0-9]{0,4})?$`)
	validSegment  = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*$`)
)

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}

// checkIdentity asserts what every accepted repository identity guarantees.
func checkIdentity(t *testing.T, raw string, id RepoIdentity) {
	t.Helper()
	if id.Host != FileHost && !validHostPort.MatchString(id.Host) {
		t.Fatalf("%q: host %q is not a lowercase host[:port]", raw, id.Host)
	}
	for what, s := range map[string]string{"owner": id.Owner, "name": id.Name, "url": id.URL, "key": id.Key()} {
		if hasControl(s) || !utf8.ValidString(s) || strings.ContainsAny(s, " \\") {
			t.Fatalf("%q: %s %q has a control character, space or backslash", raw, what, s)
		}
	}
	for what, s := range map[string]string{"owner": id.Owner, "name": id.Name} {
		if s == "" || strings.HasPrefix(s, "/") || strings.HasSuffix(s, "/") || strings.Contains(s, "//") || strings.Contains(s, "..") {
			t.Fatalf("%q: %s %q is empty, has '/' at an end, '//' or '..'", raw, what, s)
		}
	}
	if strings.Contains(id.Name, "/") {
		t.Fatalf("%q: name %q has a '/'", raw, id.Name)
	}
	segs := strings.Split(id.Owner+"/"+id.Name, "/")
	for i, s := range segs {
		if !validSegment.MatchString(s) || strings.HasSuffix(s, ".lock") || (i >= 2 && s == reservedRepoSegment) {
			t.Fatalf("%q: path segment %q is not allowed", raw, s)
		}
	}
	if strings.HasPrefix(id.URL, "-") {
		t.Fatalf("%q: URL %q starts with '-'", raw, id.URL)
	}
	// The repo cache layout stays under its root, unnormalized.
	root := "/data/repos"
	p := filepath.Join(root, strings.ReplaceAll(id.Host, ":", "_"), filepath.FromSlash(id.Owner), id.Name)
	want := root + "/" + strings.ReplaceAll(id.Host, ":", "_") + "/" + id.Owner + "/" + id.Name
	if p != want {
		t.Fatalf("%q: cache path %q is normalized (want %q)", raw, p, want)
	}
}

func FuzzParseRepoURL(f *testing.F) {
	for _, s := range []string{
		"https://github.com/acme/app.git", "ssh://git@github.com:22/acme/app", "git@github.com:acme/app.git",
		"file:///tmp/x/team/project", "http://127.0.0.1:8080/team/project.git",
		"ext::sh -c touch% /tmp/pwned", "--upload-pack=touch /tmp/pwned", "https://example.com/owner/../../x",
	} {
		f.Add(s, true, true)
	}
	f.Fuzz(func(t *testing.T, raw string, allowFile, allowHTTP bool) {
		policy := URLPolicy{AllowFile: allowFile, AllowHTTP: allowHTTP}
		id, err := ParseRepoURL(raw, policy)
		if err != nil {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("%q: error %v is not InvalidArgument", raw, err)
			}
			return
		}
		checkIdentity(t, raw, id)
		again, err := ParseRepoURL(id.URL, policy)
		if err != nil {
			t.Fatalf("%q: canonical URL %q does not re-parse: %v", raw, id.URL, err)
		}
		if again != id {
			t.Fatalf("%q: re-parse of %q gives %+v, want %+v", raw, id.URL, again, id)
		}
		if strings.HasPrefix(raw, "file:") && !allowFile || strings.HasPrefix(strings.ToLower(raw), "http:") && !allowHTTP {
			t.Fatalf("%q accepted against the policy %+v", raw, policy)
		}
	})
}

// checkRef asserts the rules of git-check-ref-format(1) and ours on an accepted ref.
func checkRef(t *testing.T, ref string) {
	t.Helper()
	switch {
	case ref == "" || len(ref) > MaxRefLength:
		t.Fatalf("%q: bad length", ref)
	case strings.HasPrefix(ref, "-"):
		t.Fatalf("%q: starts with '-'", ref)
	case !utf8.ValidString(ref):
		t.Fatalf("%q: not UTF-8", ref)
	case ref == "@", strings.Contains(ref, ".."), strings.Contains(ref, "@{"), strings.Contains(ref, "//"),
		strings.HasPrefix(ref, "/"), strings.HasSuffix(ref, "/"), strings.HasSuffix(ref, "."):
		t.Fatalf("%q: forbidden sequence", ref)
	case hasControl(ref), strings.ContainsAny(ref, " ~^:?*[\\"):
		t.Fatalf("%q: forbidden character", ref)
	}
	for _, c := range strings.Split(ref, "/") {
		if strings.HasPrefix(c, ".") || strings.HasSuffix(c, ".lock") {
			t.Fatalf("%q: component %q", ref, c)
		}
	}
	b, err := json.Marshal(ref)
	if err != nil {
		t.Fatal(err)
	}
	var back string
	if err := json.Unmarshal(b, &back); err != nil || back != ref {
		t.Fatalf("%q: does not survive a JSON payload (%q)", ref, back)
	}
}

func FuzzValidateRef(f *testing.F) {
	for _, s := range []string{"main", "feature/x", "v1.0", "--upload-pack=touch /tmp/pwned;git-upload-pack", "--output=/tmp/x", "a..b", "@{-1}", "x.lock"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		err := ValidateRef(ref)
		if err != nil {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("%q: error %v is not InvalidArgument", ref, err)
			}
			return
		}
		checkRef(t, ref)
		// An agent branch built from it is a ref too.
		if err := ValidateRef("refs/heads/" + ref); err != nil && len(ref) <= MaxRefLength-len("refs/heads/") {
			t.Fatalf("%q accepted but refs/heads/%s is not: %v", ref, ref, err)
		}
	})
}

func FuzzValidateID(f *testing.F) {
	for _, s := range []string{"alice", "c42", "../../../tmp/evil", "-rf", "_x", "a b", "conv_1-2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		err := ValidateID("conversation_id", id)
		if err != nil {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("%q: error %v is not InvalidArgument", id, err)
			}
			return
		}
		if len(id) == 0 || len(id) > MaxIDLength || !idPattern.MatchString(id) {
			t.Fatalf("%q accepted", id)
		}
		if filepath.Base(id) != id || id == "." || id == ".." || strings.ContainsAny(id, "/|") {
			t.Fatalf("%q: not a single path component, or contains the key separator", id)
		}
		for _, branch := range []string{EditBranchPrefix + id, TaskBranchPrefix + id} {
			if err := ValidateRef(branch); err != nil {
				t.Fatalf("%q: branch %q invalid: %v", id, branch, err)
			}
		}
		req := WorkspaceRequest{UserID: id, ProjectID: id, Mode: ModeEdit, ConversationID: id}
		name := req.WorktreeDirName()
		if filepath.Base(name) != name || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "-") || hasControl(name) {
			t.Fatalf("%q: worktree dir name %q", id, name)
		}
	})
}

func FuzzCleanRelPath(f *testing.F) {
	for _, s := range []string{"", ".", "src/main.go", "../x", "/etc/passwd", "a/../../x", "a//b/./c/", "-dash.txt", ".git/config", "a\x00b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		clean, err := CleanRelPath(p)
		if err != nil {
			if strings.HasPrefix(p, "-") {
				if !errors.Is(err, ErrInvalidArgument) && !errors.Is(err, ErrInvalidWorkspacePath) {
					t.Fatalf("%q: error %v is neither InvalidArgument nor InvalidWorkspacePath", p, err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidWorkspacePath) {
				t.Fatalf("%q: error %v is not InvalidWorkspacePath", p, err)
			}
			return
		}
		if strings.HasPrefix(p, "-") {
			t.Fatalf("%q accepted: a path starting with '-' must be refused", p)
		}
		if clean == "." {
			return
		}
		if strings.HasPrefix(clean, "/") || path.Clean(clean) != clean || hasControl(clean) || !utf8.ValidString(clean) {
			t.Fatalf("%q → %q: not a clean relative path", p, clean)
		}
		for _, c := range strings.Split(clean, "/") {
			if c == ".." {
				t.Fatalf("%q → %q: has '..'", p, clean)
			}
		}
		again := clean
		if strings.HasPrefix(clean, "-") { // "./-n" cleans to "-n", which is named "./-n" again
			again = "./" + clean
		}
		if again, err := CleanRelPath(again); err != nil || again != clean {
			t.Fatalf("%q → %q: not idempotent (%q, %v)", p, clean, again, err)
		}
		root := "/w/root"
		if j := filepath.Join(root, clean); j != root && !strings.HasPrefix(j, root+"/") {
			t.Fatalf("%q → %q escapes: %q", p, clean, j)
		}
		if IsGitMetadataPath(clean) != strings.Contains("/"+strings.ToLower(clean)+"/", "/.git/") {
			t.Fatalf("%q: IsGitMetadataPath disagrees", clean)
		}
	})
}
