package gitx

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Stale git lock files (docs/SECURITY.md "Crash, disk and lock safety"). git
// creates "<file>.lock" with O_CREAT|O_EXCL before changing <file> and
// renames it into place (or deletes it) when done; a git process killed in
// between (an agent's command killed on timeout, a worker SIGKILLed during a
// commit: host-side git dies with the worker, Pdeathsig) leaves the lock
// behind and every later git call that needs <file> fails with "Unable to
// create '<file>.lock': File exists". git records no owner in a lock file, so
// "stale" is decided from what can be observed, and the lock is removed (and
// the call retried once) only when no process visible in /proc has it open
// and either
//
//   - no live git process could be holding it: none runs with its working
//     directory inside the repository (the call's directory, GIT_DIR,
//     GIT_WORK_TREE, the common directory and every linked worktree it
//     registers) — the case after a crash, cleared on the first retry; or
//   - it has not been modified for StaleLockAge (git writes the new content
//     into the lock file itself, so a lock being written stays young): a git
//     process that closed the lock but still owns it (an editor or a hook
//     running) is given that long.
//
// Anything else stays ErrRepoLocked naming the path (Classify).

// lockRoots are the directories a lock file named by git's error may be
// removed from: the call's directory, its GIT_DIR, GIT_COMMON_DIR, and the
// common directory a linked worktree's GIT_DIR points to (commondir).
func lockRoots(dir string, env []string) []string {
	roots := []string{dir}
	var gitDir string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GIT_DIR="); ok {
			gitDir = v
		}
		if v, ok := strings.CutPrefix(kv, "GIT_COMMON_DIR="); ok {
			roots = append(roots, v)
		}
	}
	if gitDir != "" {
		if !filepath.IsAbs(gitDir) {
			gitDir = filepath.Join(dir, gitDir)
		}
		roots = append(roots, gitDir)
		if b, err := os.ReadFile(filepath.Join(gitDir, "commondir")); err == nil {
			cd := strings.TrimSpace(string(b))
			if !filepath.IsAbs(cd) {
				cd = filepath.Join(gitDir, cd)
			}
			roots = append(roots, cd)
		}
	}
	return roots
}

// removeStaleLock removes the lock file path (as named by git's error) when
// it is stale and lies inside one of the call's repository directories;
// it reports whether it did.
func (r *Runner) removeStaleLock(path, dir string, env []string) bool {
	if r.staleAge < 0 || !filepath.IsAbs(path) || filepath.Clean(path) != path || !strings.HasSuffix(path, ".lock") {
		return false
	}
	inside := false
	for _, root := range lockRoots(dir, env) {
		root = filepath.Clean(root)
		if rel, err := filepath.Rel(root, path); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
			inside = true
			break
		}
	}
	if !inside {
		return false
	}
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	if openByAnyProcess(path) {
		return false
	}
	age := time.Since(fi.ModTime())
	if age < r.staleAge && gitRunsIn(repoDirs(dir, env)) {
		return false
	}
	if err := os.Remove(path); err != nil {
		return false
	}
	r.log.Warn("gitx: removed a stale git lock file left by a dead process", "path", path, "age", age.Round(time.Second))
	return true
}

// repoDirs are the directories a git process working on the call's
// repository runs in: lockRoots, GIT_WORK_TREE, and the work tree of every
// linked worktree registered in the common directory
// (<common>/worktrees/<name>/gitdir names "<work tree>/.git").
func repoDirs(dir string, env []string) []string {
	dirs := lockRoots(dir, env)
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GIT_WORK_TREE="); ok && v != "" {
			dirs = append(dirs, v)
		}
	}
	for _, root := range append([]string(nil), dirs...) {
		entries, err := os.ReadDir(filepath.Join(root, "worktrees"))
		if err != nil {
			continue
		}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(root, "worktrees", e.Name(), "gitdir"))
			if err != nil {
				continue
			}
			if wt := filepath.Dir(strings.TrimSpace(string(b))); filepath.IsAbs(wt) {
				dirs = append(dirs, wt)
			}
		}
	}
	return dirs
}

// gitRunsIn reports whether a live git process (its command name starts
// with "git": git, git-remote-https, git-upload-pack, …) visible in /proc
// has its working directory inside one of dirs — or whether that cannot be
// told (/proc unreadable, a git process whose working directory cannot be
// read): then it answers true, the safe answer.
func gitRunsIn(dirs []string) bool {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	clean := make([]string, 0, len(dirs))
	for _, d := range dirs {
		if d != "" {
			clean = append(clean, filepath.Clean(d))
		}
	}
	self := strconv.Itoa(os.Getpid())
	for _, p := range procs {
		name := p.Name()
		if name[0] < '0' || name[0] > '9' || name == self {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", name, "comm"))
		if err != nil || !strings.HasPrefix(string(comm), "git") {
			continue // gone, or not git
		}
		cwd, err := os.Readlink(filepath.Join("/proc", name, "cwd"))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // exited meanwhile
			}
			return true
		}
		for _, d := range clean {
			if cwd == d || strings.HasPrefix(cwd, d+string(filepath.Separator)) {
				return true
			}
		}
	}
	return false
}

// openByAnyProcess reports whether a process visible in /proc has path open
// (or whether that cannot be told: then it answers true, the safe answer).
func openByAnyProcess(path string) bool {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, p := range procs {
		if p.Name()[0] < '0' || p.Name()[0] > '9' {
			continue
		}
		fdDir := filepath.Join("/proc", p.Name(), "fd")
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue // gone, or not ours to read (a kernel thread)
		}
		for _, fd := range fds {
			if target, err := os.Readlink(filepath.Join(fdDir, fd.Name())); err == nil && target == path {
				return true
			}
		}
	}
	return false
}
