package tools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/gittest"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// sandbox_git diff with paths keeps the sections of exactly the files
// named, whatever their names: git quotes a header path holding non-ASCII
// bytes, a quote or a backslash (the worker's diff runs with
// core.quotePath=true), and an unquoted one may itself hold " b/". Before,
// a quoted header never matched, so `paths: ["café.txt"]` listed the file
// with an empty patch ("No changes"), and a name holding " b/" pulled in
// another file's section.
func TestFilterDiffMatchesQuotedAndAmbiguousHeaders(t *testing.T) {
	repo := gittest.NewRepo(t, "main")
	names := []string{"café.txt", `quo"te.txt`, `back\slash.txt`, "y", "x b/y", "plain.txt", "dir/ü/f.txt"}
	for _, n := range names {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(repo, n)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(repo, n), []byte("old "+n+"\n"), 0o644))
	}
	gittest.Git(t, repo, "add", "-A")
	gittest.Git(t, repo, "commit", "-q", "-m", "base")
	base := strings.TrimSpace(gittest.Git(t, repo, "rev-parse", "HEAD"))
	for _, n := range names {
		require.NoError(t, os.WriteFile(filepath.Join(repo, n), []byte("new "+n+"\n"), 0o644))
	}
	gittest.Git(t, repo, "add", "-A")
	patch := gittest.Git(t, repo, "-c", "core.quotePath=true", "diff", "--cached", "--no-renames", "--binary", "--full-index",
		"--src-prefix=a/", "--dst-prefix=b/", base, "--")
	require.Contains(t, patch, `diff --git "a/caf\303\251.txt"`, "git quotes the header")
	var files []string
	for _, n := range strings.Split(gittest.Git(t, repo, "diff", "--cached", "--name-only", "-z", base, "--"), "\x00") {
		if n != "" {
			files = append(files, n)
		}
	}
	d := sandboxapi.Diff{BaseCommit: base, Patch: patch, Files: files}
	for _, n := range names {
		got, err := filterDiff(d, []string{n})
		require.NoError(t, err, n)
		assert.Equal(t, []string{n}, got.Files, n)
		assert.Equal(t, 1, strings.Count(got.Patch, "diff --git "), "%s: one section:\n%s", n, got.Patch)
		assert.Contains(t, got.Patch, "+new "+n, n)
	}
	got, err := filterDiff(d, []string{"dir"})
	require.NoError(t, err)
	assert.Contains(t, got.Patch, "+new dir/ü/f.txt")
	assert.Equal(t, []string{"dir/ü/f.txt"}, got.Files)
}
