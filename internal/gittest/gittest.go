// Package gittest is test support for packages that drive real git: it builds
// upstream repositories with plain git in temporary directories and serves them
// over smart HTTP (git http-backend behind net/http/cgi) with basic auth, a
// request counter and a per-request hook (NewHTTPServer).
//
// It is imported by tests only. Every helper fails the test (t.Fatalf) on error.
// git runs with an isolated environment (Env): no user or system config, fixed
// author and committer, so results do not depend on the machine.
package gittest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Identity used for every commit made by this package.
const (
	AuthorName  = "Gittest"
	AuthorEmail = "gittest@example.invalid"
)

// Env returns the complete environment of git calls made by this package: PATH
// from the process, an empty HOME, no global or system config, no prompts, a
// fixed author and committer.
func Env() []string {
	home := filepath.Join(os.TempDir(), "gittest-home")
	_ = os.MkdirAll(home, 0o700)
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + home,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=" + AuthorName,
		"GIT_AUTHOR_EMAIL=" + AuthorEmail,
		"GIT_COMMITTER_NAME=" + AuthorName,
		"GIT_COMMITTER_EMAIL=" + AuthorEmail,
		"LC_ALL=C",
	}
}

// Git runs `git -C dir args...` with Env and returns its stdout with
// surrounding white space trimmed. It fails t when git exits non-zero.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := TryGit(dir, args...)
	if err != nil {
		t.Fatalf("gittest: %v", err)
	}
	return out
}

// TryGit is Git that returns the error (stderr included) instead of failing.
func TryGit(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = Env()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return strings.TrimSpace(stdout.String()), &gitError{args: args, err: err, stderr: stderr.String()}
	}
	return strings.TrimSpace(stdout.String()), nil
}

type gitError struct {
	args   []string
	err    error
	stderr string
}

func (e *gitError) Error() string {
	return "git " + strings.Join(e.args, " ") + ": " + e.err.Error() + ": " + strings.TrimSpace(e.stderr)
}

// InitRepo creates a non-bare repository at dir (created with its parents;
// it must not already hold a repository) whose initial branch is branch, with
// two commits (README.md, then main.go) and an annotated tag "v1" on the first
// commit. It returns dir. A non-bare repository can be served by
// NewHTTPServer and pushed to (receive.denyCurrentBranch=updateInstead).
func InitRepo(t testing.TB, dir, branch string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("gittest: %v", err)
	}
	Git(t, dir, "init", "--quiet", "--initial-branch="+branch)
	Git(t, dir, "config", "receive.denyCurrentBranch", "updateInstead")
	Commit(t, dir, "README.md", "# project\n", "initial commit")
	Git(t, dir, "tag", "--annotate", "--message=release v1", "v1")
	Commit(t, dir, "main.go", "package main\n\nfunc main() {}\n", "add main.go")
	return dir
}

// NewRepo makes a repository with InitRepo at <t.TempDir()>/upstream/team/project
// and returns its path. The path is a valid file:// repository URL path (see
// FileURL); its identity is owner ".../upstream/team", name "project".
func NewRepo(t testing.TB, branch string) string {
	t.Helper()
	return InitRepo(t, filepath.Join(t.TempDir(), "upstream", "team", "project"), branch)
}

// Commit writes content to file (relative to the work tree of dir, parents
// created), commits it with msg on the current branch, and returns the new
// commit id.
func Commit(t testing.TB, dir, file, content, msg string) string {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(file))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatalf("gittest: %v", err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatalf("gittest: %v", err)
	}
	Git(t, dir, "add", "--", file)
	Git(t, dir, "commit", "--quiet", "--no-verify", "--message="+msg)
	return Git(t, dir, "rev-parse", "HEAD")
}

// FileURL returns the file:// URL of a repository directory (absolute path).
func FileURL(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	return "file://" + filepath.ToSlash(abs)
}
