package replica

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// SourceOf finds the workspace of a remote runtime's spec: the mount at the
// workdir is the host worktree (ReadOnly unless the mount is writable), and
// its git administrative directory is the bare repository mount's
// worktrees/<name> whose gitdir file points back at the worktree, or else a
// plain .git directory in the worktree (docs/DESIGN.md "The three things":
// the repo cache's bare repository sits beside the worktrees). Errors:
// sandbox.ErrInvalidArgument when no host directory is mounted at the workdir.
func SourceOf(spec sandbox.RuntimeSpec) (Source, error) {
	var src Source
	for _, m := range spec.Mounts {
		if m.Target == spec.Workdir {
			src.WorkTree, src.ReadOnly = filepath.Clean(m.Source), !m.Writable
		}
	}
	if src.WorkTree == "" || !filepath.IsAbs(src.WorkTree) {
		return src, sandbox.Errorf(sandbox.ErrInvalidArgument, "replica: runtime %s has no host workspace mounted at its workdir %s", spec.ID, spec.Workdir)
	}
	want := filepath.Join(src.WorkTree, ".git")
	for _, m := range spec.Mounts {
		if m.Target != m.Source || filepath.Base(m.Source) != ".bare" {
			continue
		}
		root := filepath.Join(m.Source, "worktrees")
		cands := []string{filepath.Join(root, filepath.Base(src.WorkTree))}
		if entries, err := os.ReadDir(root); err == nil {
			for _, e := range entries {
				cands = append(cands, filepath.Join(root, e.Name()))
			}
		}
		for _, c := range cands {
			b, err := os.ReadFile(filepath.Join(c, "gitdir"))
			if err == nil && filepath.Clean(strings.TrimSpace(string(b))) == want {
				src.GitDir = c
				return src, nil
			}
		}
	}
	if fi, err := os.Lstat(want); err == nil && fi.IsDir() {
		src.GitDir = want
	}
	return src, nil
}
