package sandboxapi

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestHostileInputIsInvalidArgument turns the documented hostile inputs into
// tests (docs/SECURITY.md "Input validation"): each is rejected with the typed error before anything runs.
func TestHostileInputIsInvalidArgument(t *testing.T) {
	good := "https://github.com/acme/app.git"
	for name, err := range map[string]error{
		"base ref option":      ValidateRef("--upload-pack=touch /tmp/pwned;git-upload-pack"),
		"push head option":     ValidateRef("--output=/tmp/x"),
		"branch option":        ValidateRef("-b"),
		"ref with ..":          ValidateRef("main/../../x"),
		"ref with newline":     ValidateRef("main\n--upload-pack=x"),
		"ref not UTF-8":        ValidateRef("main\xff"),
		"conversation path":    ValidateID("conversation_id", "../../../tmp/evil"),
		"id option":            ValidateID("user_id", "-rf"),
		"repo dots":            parseErr("https://example.com/owner/../../x", URLPolicy{}),
		"repo dots in segment": parseErr("https://example.com/owner/a..b", URLPolicy{}),
		"ext transport":        parseErr("ext::sh -c touch% /tmp/pwned", URLPolicy{AllowFile: true, AllowHTTP: true}),
		"fd transport":         parseErr("fd::3", URLPolicy{AllowFile: true, AllowHTTP: true}),
		"file disabled":        parseErr("file:///tmp/x/team/project", URLPolicy{}),
		"http disabled":        parseErr("http://example.com/o/r.git", URLPolicy{}),
		"dash url":             parseErr("--upload-pack=touch /tmp/pwned", URLPolicy{}),
		"credentials in url":   parseErr("https://user:pass@example.com/o/r.git", URLPolicy{}),
		"port 0":               parseErr("https://example.com:0/o/r.git", URLPolicy{}),
		"port leading zero":    parseErr("https://example.com:0443/o/r.git", URLPolicy{}),
		"port too large":       parseErr("https://example.com:99999/o/r.git", URLPolicy{}),
		"worktrees segment":    parseErr("https://gitlab.example.com/group/sub/worktrees/u_c_agent-edits-c-1a2b3c4d", URLPolicy{}),
		"worktrees as name":    parseErr("https://gitlab.example.com/group/sub/worktrees", URLPolicy{}),
		"bare segment":         parseErr("https://example.com/o/r/.bare", URLPolicy{}),
		"lock segment":         parseErr("https://example.com/o/r.lock", URLPolicy{}),
		"mismatched repo_name": reqErr(WorkspaceRequest{UserID: "u", ProjectID: "p", RepoURL: good, RepoName: "other/x", Mode: ModeEdit, ConversationID: "c"}),
		"branch_name option":   reqErr(WorkspaceRequest{UserID: "u", ProjectID: "p", RepoURL: good, Mode: ModeEdit, ConversationID: "c", BranchName: "--force"}),
		"from_branch option":   reqErr(WorkspaceRequest{UserID: "u", ProjectID: "p", RepoURL: good, Mode: ModeTask, TaskID: "t", FromBranch: "--orphan=x"}),
	} {
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: got %v, want InvalidArgument", name, err)
		}
	}
	// "worktrees" is fine where it cannot collide (owner/worktrees).
	if _, err := ParseRepoURL("https://github.com/acme/worktrees", URLPolicy{}); err != nil {
		t.Errorf("owner/worktrees: %v", err)
	}
	for _, p := range []string{"../x", "/etc/passwd", "a/../../x", "a\x00b", "a\nb", strings.Repeat("a", MaxPathLength+1)} {
		if _, err := CleanRelPath(p); !errors.Is(err, ErrInvalidWorkspacePath) {
			t.Errorf("path %q: got %v, want InvalidWorkspacePath", p, err)
		}
	}
	// A path starting with '-' is an argument error; "./-n" names the file.
	for _, p := range []string{"-n", "--output=/tmp/x", "-"} {
		if _, err := CleanRelPath(p); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("path %q: got %v, want InvalidArgument", p, err)
		}
	}
	if c, err := CleanRelPath("./-n"); err != nil || c != "-n" {
		t.Errorf("./-n: %q %v", c, err)
	}
	if c, err := CleanRelPath("dir/-n"); err != nil || c != "dir/-n" {
		t.Errorf("dir/-n: %q %v", c, err)
	}
}

func TestValidateSearchPattern(t *testing.T) {
	for _, p := range []string{"", "--pre=sh", "-e", "-", strings.Repeat("a", 17)} {
		if err := ValidateSearchPattern(p, 16); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("pattern %q: got %v, want InvalidArgument", p, err)
		}
	}
	// The hint is the same text as a regular expression, and one that compiles.
	err := ValidateSearchPattern("-a.b(", 100)
	if err == nil || !strings.Contains(err.Error(), `regular expression \-a\.b\( instead`) {
		t.Errorf("hint: %v", err)
	}
	for _, p := range []string{`\-\-pre=sh`, "[-]e", "a-b", "x"} {
		if err := ValidateSearchPattern(p, 16); err != nil {
			t.Errorf("pattern %q: %v", p, err)
		}
	}
}

func parseErr(raw string, p URLPolicy) error {
	_, err := ParseRepoURL(raw, p)
	return err
}

func reqErr(r WorkspaceRequest) error {
	_, err := r.Validate(URLPolicy{})
	return err
}

// corpusStrings reads the string arguments of a committed fuzz corpus
// (testdata/fuzz/<target>/*, "go test fuzz v1" files): the first argument of
// each entry.
func corpusStrings(t *testing.T, target string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", target, "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no committed corpus for %s", target)
	}
	var out []string
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if lit, ok := strings.CutPrefix(line, "string("); ok {
				s, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				out = append(out, s)
				break
			}
		}
		_ = f.Close()
	}
	return out
}

// TestAcceptedRefsPassGitCheckRefFormat runs the committed ref corpus against
// real git: every ref ValidateRef accepts is one `git check-ref-format
// --allow-onelevel` accepts (ours is the stricter rule).
func TestAcceptedRefsPassGitCheckRefFormat(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	refs := corpusStrings(t, "FuzzValidateRef")
	accepted := 0
	for _, ref := range refs {
		if ValidateRef(ref) != nil {
			continue
		}
		accepted++
		// --end-of-options is not understood by check-ref-format; accepted
		// refs never start with '-'.
		cmd := exec.Command("git", "check-ref-format", "--allow-onelevel", ref)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=" + t.TempDir()}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("ValidateRef accepts %q but git check-ref-format refuses it: %v %s", ref, err, out)
		}
	}
	if accepted < 10 {
		t.Fatalf("only %d accepted refs in the corpus", accepted)
	}
}

func TestBranchOverrideStaysInTheAgentNamespace(t *testing.T) {
	base := WorkspaceRequest{UserID: "u", ProjectID: "p", RepoURL: "https://example.com/o/r.git", Mode: ModeEdit, ConversationID: "c"}
	for _, b := range []string{"main", "release/1.0", "agent/", "agentx/y"} {
		r := base
		r.BranchName = b
		_, err := r.Validate(URLPolicy{})
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("branch_name %q: want InvalidArgument, got %v", b, err)
		}
	}
	r := base
	r.BranchName = "agent/feature-x"
	if _, err := r.Validate(URLPolicy{}); err != nil {
		t.Errorf("agent/feature-x: %v", err)
	}
}

// TestRepoURLTextProblem: what is refused before a URL is parsed, and that
// a usable text has no problem.
func TestRepoURLTextProblem(t *testing.T) {
	for raw, want := range map[string]string{
		"":                                  "empty",
		strings.Repeat("a", MaxURLLength+1): "too long",
		"https://h/o/r\xff":                 "not UTF-8",
		"https://h/o r":                     "contains a control character, space or backslash",
		`https://h\o/r`:                     "contains a control character, space or backslash",
		"-uhttps://h/o/r":                   "starts with '-'",
		"ext::sh -c x":                      "contains a control character, space or backslash",
		"ext::x":                            `git transport syntax ("<transport>::") is not allowed`,
		"https://h/o/r::x":                  "",
		"git@github.com:o/r.git":            "",
	} {
		if got := repoURLTextProblem(raw); got != want {
			t.Errorf("repoURLTextProblem(%q) = %q, want %q", raw, got, want)
		}
	}
}

// A plain path or a bare host/owner/repo as a repository URL is told to
// be given as a URL, naming the one to use; an unknown scheme names the
// forms the policy accepts (not only "https or ssh" when file:// is
// allowed). All InvalidArgument.
func TestAPathIsToldToBeAURL(t *testing.T) {
	for _, c := range []struct {
		raw    string
		policy URLPolicy
		want   string
	}{
		{"/home/me/app", PermissiveURLs, "not a URL: give a URL such as file:///home/me/app for a local repository, or https://host/owner/repo.git"},
		{"/home/me/app", URLPolicy{}, "file:///home/me/app for a local repository (the worker must allow file URLs: SANDBOX_ALLOW_FILE_URLS=1)"},
		{"./app", PermissiveURLs, "not a URL: give a URL such as file:///abs/path/repo for a local repository"},
		{"app", URLPolicy{}, "not a URL: give a URL such as file:///abs/path/repo"},
		{"github.com/acme/app", URLPolicy{}, "not a URL: give a URL such as https://github.com/acme/app"},
		{"git://github.com/acme/app", URLPolicy{}, `scheme "git" is not supported: give an https://host/owner/repo.git or ssh://host/owner/repo.git URL (or user@host:owner/repo.git)`},
		{"ftp://h/o/r", PermissiveURLs, "or http://, or file:///abs/path/repo for a local repository"},
	} {
		_, err := ParseRepoURL(c.raw, c.policy)
		if !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("%s: %v, want InvalidArgument", c.raw, err)
		}
		if msg := Message(err); !strings.Contains(msg, c.want) || strings.Contains(msg, "scheme must be") {
			t.Errorf("%s: %q, want it to say %q", c.raw, msg, c.want)
		}
	}
}
