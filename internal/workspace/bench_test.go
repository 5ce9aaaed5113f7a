package workspace

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// benchRepoFixture is the test fixture with 200 more files, a
// .gitattributes (so the checkout baseline is computed, not skipped) and a
// CRLF file under `text` (so it records an entry).
func benchRepoFixture(b *testing.B) *fixture {
	f := newFixture(b)
	for i := 0; i < 200; i++ {
		f.writeSrc(fmt.Sprintf("pkg/f%03d.go", i), fmt.Sprintf("package pkg\n\nconst F%d = %d\n", i, i))
	}
	f.writeSrc("win.txt", "one\r\ntwo\r\n")
	f.git(f.src, "add", "-A")
	f.git(f.src, "commit", "-q", "-m", "many files")
	f.writeSrc(".gitattributes", "*.txt text\n")
	f.git(f.src, "add", ".gitattributes")
	f.git(f.src, "commit", "-q", "-m", "attributes")
	f.fetch()
	return f
}

// BenchmarkEnsureNewWorktree measures Ensure creating a new edit worktree
// (validation, lock, `git worktree add`, base recorded, checkout baseline)
// on a repository with attributes; BenchmarkRawWorktreeAddOfFixture is its
// raw baseline in the same run: plain `git worktree add --no-track -b` on
// the same bare repository.
func BenchmarkEnsureNewWorktree(b *testing.B) {
	f := benchRepoFixture(b)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := f.m.Ensure(ctx, f.cache, f.req(sandboxapi.ModeEdit, fmt.Sprintf("b%d", i)), nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRawWorktreeAddOfFixture(b *testing.B) {
	f := benchRepoFixture(b)
	dir := b.TempDir()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f.git(f.bare, "worktree", "add", "-q", "--no-track", "-b", fmt.Sprintf("raw/b%d", i), filepath.Join(dir, fmt.Sprint(i)), "refs/remotes/origin/main")
	}
}

// BenchmarkStatus measures Status of an untouched workspace holding a
// baseline entry (status, baseline check, submodules, LFS, counts);
// BenchmarkRawGitStatus is plain `git status --porcelain` of it.
func BenchmarkStatus(b *testing.B) {
	f := benchRepoFixture(b)
	ws, err := f.m.Ensure(context.Background(), f.cache, f.req(sandboxapi.ModeEdit, "s"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st, err := f.m.Status(context.Background(), ws)
		if err != nil || st.Dirty {
			b.Fatal(err, st.Files)
		}
	}
}

func BenchmarkRawGitStatus(b *testing.B) {
	f := benchRepoFixture(b)
	ws, err := f.m.Ensure(context.Background(), f.cache, f.req(sandboxapi.ModeEdit, "s"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f.git(ws.LocalPath, "status", "--porcelain")
	}
}
