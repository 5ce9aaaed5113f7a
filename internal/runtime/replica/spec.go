package replica

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// SourceOf finds the workspace of a remote runtime's spec: the mount at the
// workdir is the host worktree (ReadOnly unless the mount is writable), and
// its git administrative directory is the bare repository mount's
// worktrees/<name> whose gitdir file points back at the worktree, or else a
// plain .git directory in the worktree (docs/DESIGN.md "The three things":
// the repo cache's bare repository sits beside the worktrees). Errors:
// sandboxapi.ErrInvalidArgument when no host directory is mounted at the workdir.
func SourceOf(spec sandbox.RuntimeSpec) (Source, error) {
	var src Source
	for _, m := range spec.Mounts {
		if m.Target == spec.Workdir {
			src.WorkTree, src.ReadOnly = filepath.Clean(m.Source), !m.Writable
		}
	}
	if src.WorkTree == "" || !filepath.IsAbs(src.WorkTree) {
		return src, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "replica: runtime %s has no host workspace mounted at its workdir %s", spec.ID, spec.Workdir)
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

// SpecFile is the file under a remote runtime's state directory holding its
// spec (SaveSpec), so that a restarted worker can hibernate or destroy the
// runtime by id.
const SpecFile = "spec.json"

// SaveSpec records spec in dir/SpecFile (dir made 0700, the file 0600).
// Errors wrap sandboxapi.ErrRuntimeUnavailable.
func SaveSpec(dir string, spec sandbox.RuntimeSpec) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "replica: state dir of runtime %s", spec.ID)
	}
	b, err := json.Marshal(spec)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, SpecFile), b, 0o600)
	}
	if err != nil {
		return sandboxapi.Wrap(sandboxapi.ErrRuntimeUnavailable, err, "replica: write the spec of runtime %s", spec.ID)
	}
	return nil
}

// LoadSpec reads the spec SaveSpec recorded in dir. Errors: the file's read
// error (os.ErrNotExist when none was saved) or its decoding error.
func LoadSpec(dir string) (sandbox.RuntimeSpec, error) {
	var spec sandbox.RuntimeSpec
	b, err := os.ReadFile(filepath.Join(dir, SpecFile))
	if err != nil {
		return spec, err
	}
	err = json.Unmarshal(b, &spec)
	return spec, err
}

// SpecEqual reports whether a and b are the same spec (their JSON encodings
// are equal).
func SpecEqual(a, b sandbox.RuntimeSpec) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// OpenSpec opens the replica of a remote runtime's spec: it finds the
// workspace (SourceOf), records spec in stateDir (SaveSpec) so that a
// restarted worker can hibernate or destroy the runtime by id, and opens
// the replica whose host state is stateDir/replica.state and whose
// sandbox-side state directory is remoteState (SetStateDir changes it
// later), its .git directories locked read-only. Errors: those of
// SourceOf (sandboxapi.ErrInvalidArgument), SaveSpec and Open.
func OpenSpec(spec sandbox.RuntimeSpec, stateDir, remoteState string, git *gitx.Runner, log *slog.Logger) (*Replica, error) {
	src, err := SourceOf(spec)
	if err != nil {
		return nil, err
	}
	if err := SaveSpec(stateDir, spec); err != nil {
		return nil, err
	}
	return Open(Options{
		Source:    src,
		Remote:    Layout{Workdir: spec.Workdir, StateDir: remoteState},
		StateFile: filepath.Join(stateDir, "replica.state"),
		Git:       git,
		LockGit:   true,
		Logger:    log,
	})
}
