package replica

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"

	"strconv"
	"strings"
	"time"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// ConflictSuffix ends the name a replica's version of a conflicted file is
// kept under, beside it (<path>.remote-conflict, then -2, -3, …).
const ConflictSuffix = ".remote-conflict"

// MaxConflicts bounds the conflicts a replica's state remembers.
const MaxConflicts = 50

// conflictCopyKept is how long Status lists a conflict whose replica
// version was a deletion (no copy to point at).
const conflictCopyKept = 24 * time.Hour

// Conflict is one file that changed both in the workspace and in the replica
// since they last agreed (docs/API.md "Remote runtimes"). The workspace's
// version stays at Path — its content, or its deletion; the replica's
// version is kept beside it at Copy, a new file that syncs like any other;
// Copy is "" when the replica's version was a deletion.
type Conflict struct {
	Path string
	Copy string
	// At is when the host learned of it.
	At time.Time
}

// Notice is the conflict as a command's stderr says it (the paths quoted:
// a name may hold a newline or an escape).
func (c Conflict) Notice() string {
	if c.Copy == "" {
		return fmt.Sprintf("sandbox: sync conflict: %q changed in the workspace and was deleted in the sandbox; the workspace's version stays", c.Path)
	}
	return fmt.Sprintf("sandbox: sync conflict: %q changed both in the workspace and in the sandbox; the workspace's version stays, the sandbox's is at %q", c.Path, c.Copy)
}

// maxCopyBase bounds, in bytes, the part of a file's name its conflict
// copy keeps, so that the copy's name stays within the file system's 255
// bytes (rp_guard clips the same way).
const maxCopyBase = 200

// copyStem is what a conflict copy of fp is named from: fp with its last
// element clipped to maxCopyBase bytes, then ConflictSuffix.
func copyStem(fp string) string {
	dir, base := path.Split(fp)
	if len(base) > maxCopyBase {
		base = base[:maxCopyBase]
	}
	return dir + base + ConflictSuffix
}

// isConflictCopy reports whether cp is a name rp_guard or conflictCopy
// gives the replica's version of fp: copyStem(fp), optionally followed by
// "-" and a number from 2.
func isConflictCopy(fp, cp string) bool {
	rest, ok := strings.CutPrefix(cp, copyStem(fp))
	if !ok {
		return false
	}
	if rest == "" {
		return true
	}
	n, err := strconv.Atoi(strings.TrimPrefix(rest, "-"))
	return strings.HasPrefix(rest, "-") && err == nil && n >= 2 && strconv.Itoa(n) == rest[1:]
}

// parseConflicts reads the result's "conflicts" file ("<path>\0<copy>\0"
// pairs, copy empty for a deletion; missing when rp_guard had nothing to
// compare). Errors: a path that is not valid or a copy that is not a
// conflict name of its path (the remote is hostile).
func parseConflicts(b []byte, err error) ([]Conflict, error) {
	if err != nil || len(b) == 0 {
		return nil, nil
	}
	f := strings.Split(string(b), "\x00")
	if f[len(f)-1] == "" {
		f = f[:len(f)-1]
	}
	if len(f)%2 != 0 {
		return nil, errors.New("odd number of fields")
	}
	var out []Conflict
	for i := 0; i < len(f); i += 2 {
		fp, cp := f[i], f[i+1]
		if err := validPath(fp); err != nil {
			return nil, err
		}
		if cp != "" && (validPath(cp) != nil || !isConflictCopy(fp, cp)) {
			return nil, pathErr(cp, "not a conflict copy of "+sandboxClip(fp))
		}
		out = append(out, Conflict{Path: fp, Copy: cp})
	}
	return out, nil
}

// maxConflictCopies bounds the names conflictCopy tries.
const maxConflictCopies = 100

// conflictCopy returns the first conflict name of fp that is free in the
// worktree and among taken (the paths the pass writes), or "" when none
// is: a name that cannot be looked up (too long, below something that is
// no longer a directory, escaping through a symbolic link) or
// maxConflictCopies names taken. The caller then keeps the replica's
// version in the replica and says so.
func conflictCopy(root *os.Root, fp string, taken map[string]diffRecord) string {
	for n := 1; n <= maxConflictCopies; n++ {
		cp := copyStem(fp)
		if n > 1 {
			cp += "-" + strconv.Itoa(n)
		}
		if _, busy := taken[cp]; busy {
			continue
		}
		_, err := root.Lstat(cp)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return cp
		case err != nil:
			return ""
		}
	}
	return ""
}

// hostChanged reports whether the host's fp differs from what Begin saw
// (p.host): created, deleted, or of another mode or content since.
func (p *Pass) hostChanged(root *os.Root, fp string) bool {
	begin, had := p.host[fp]
	fi, err := root.Lstat(fp)
	exists := err == nil && gitMode(fi) != 0
	switch {
	case !had || !exists:
		return had != exists
	case sameStat(begin.entry, fi):
		return false
	}
	blob, err := hashFile(root, fp, fi)
	return err != nil || blob != begin.Blob || gitMode(fi) != begin.Mode
}

// remember adds conflicts to the state's list, the oldest dropped past
// MaxConflicts. Called with r.mu held.
func (r *Replica) remember(cs []Conflict) {
	r.st.Conflicts = append(r.st.Conflicts, cs...)
	if n := len(r.st.Conflicts); n > MaxConflicts {
		r.st.Conflicts = append([]Conflict(nil), r.st.Conflicts[n-MaxConflicts:]...)
	}
	for _, c := range cs {
		r.log.Warn("replica sync conflict", "worktree", r.src.WorkTree, "path", c.Path, "copy", c.Copy)
	}
}

// openConflicts returns the remembered conflicts still open: those whose
// copy is still in the worktree, and deletions from the last
// conflictCopyKept. Called with r.mu held.
func (r *Replica) openConflicts(now time.Time) []Conflict {
	var out []Conflict
	var root *os.Root
	for _, c := range r.st.Conflicts {
		if c.Copy == "" {
			if now.Sub(c.At) < conflictCopyKept {
				out = append(out, c)
			}
			continue
		}
		if root == nil {
			var err error
			if root, err = os.OpenRoot(r.src.WorkTree); err != nil {
				return out
			}
			defer root.Close()
		}
		if _, err := root.Lstat(c.Copy); err == nil {
			out = append(out, c)
		}
	}
	return out
}

// APIConflicts returns cs as the wire's records (RuntimeReplica.Conflicts);
// nil for none.
func APIConflicts(cs []Conflict) []sandboxapi.ReplicaConflict {
	var out []sandboxapi.ReplicaConflict
	for _, c := range cs {
		out = append(out, sandboxapi.ReplicaConflict{Path: c.Path, SandboxCopy: c.Copy, At: c.At})
	}
	return out
}

// nulList is paths, each ended by a NUL byte.
func nulList(paths []string) []byte {
	var b strings.Builder
	for _, p := range paths {
		b.WriteString(p)
		b.WriteByte(0)
	}
	return []byte(b.String())
}
