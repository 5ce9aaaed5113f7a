package replica

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func (f *fixture) write(name, content string) {
	f.t.Helper()
	require.NoError(f.t, os.MkdirAll(filepath.Dir(filepath.Join(f.wt, name)), 0o755))
	require.NoError(f.t, os.WriteFile(filepath.Join(f.wt, name), []byte(content), 0o644))
}

func conflictsOf(cs []Conflict) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Path+" -> "+c.Copy)
	}
	sort.Strings(out)
	return out
}

// Both sides changed files between passes (the replica's change not yet
// collected: a result that never reached the host, a change made outside a
// command): when the host's change goes up, the replica's is kept beside it
// and the pass reports each conflict; a change made the same on both
// sides, or a file both deleted, is none.
func TestConflictWhenBothSidesChangedBetweenPasses(t *testing.T) {
	f := newFixture(t, false)
	for _, n := range []string{"edit.txt", "same.txt", "del-sandbox.txt", "del-host.txt", "del-both.txt", "sub/deep.txt"} {
		f.write(n, "base "+n+"\n")
	}
	f.sync()
	f.sh(`echo sandbox > edit.txt && echo same > same.txt && rm del-sandbox.txt del-both.txt && echo sandbox > del-host.txt &&
		echo sandbox > sub/deep.txt && echo taken > sub/deep.txt.remote-conflict`)
	f.write("edit.txt", "host\n")
	f.write("same.txt", "same\n")
	f.write("del-sandbox.txt", "host edit\n")
	require.NoError(t, os.Remove(filepath.Join(f.wt, "del-host.txt")))
	require.NoError(t, os.Remove(filepath.Join(f.wt, "del-both.txt")))
	f.write("sub/deep.txt", "host\n")

	rep := f.sync()
	require.Equal(t, []string{"del-host.txt -> del-host.txt.remote-conflict", "del-sandbox.txt -> ",
		"edit.txt -> edit.txt.remote-conflict", "sub/deep.txt -> sub/deep.txt.remote-conflict-2"}, conflictsOf(rep.Conflicts))
	// The host's versions stay; the sandbox's came back beside them.
	require.Equal(t, "host\n", read(t, filepath.Join(f.wt, "edit.txt")))
	require.Equal(t, "sandbox\n", read(t, filepath.Join(f.wt, "edit.txt.remote-conflict")))
	require.Equal(t, "host edit\n", read(t, filepath.Join(f.wt, "del-sandbox.txt")))
	require.NoFileExists(t, filepath.Join(f.wt, "del-host.txt"))
	require.Equal(t, "sandbox\n", read(t, filepath.Join(f.wt, "del-host.txt.remote-conflict")))
	require.Equal(t, "sandbox\n", read(t, filepath.Join(f.wt, "sub/deep.txt.remote-conflict-2")))
	require.Equal(t, "taken\n", read(t, filepath.Join(f.wt, "sub/deep.txt.remote-conflict")), "a name the sandbox used is not overwritten")
	require.Equal(t, "same\n", read(t, filepath.Join(f.wt, "same.txt")))
	// The replica holds the same now.
	require.Equal(t, "host\n", read(t, filepath.Join(f.remote, "edit.txt")))
	require.Equal(t, "host edit\n", read(t, filepath.Join(f.remote, "del-sandbox.txt")))
	require.NoFileExists(t, filepath.Join(f.remote, "del-host.txt"))
	require.Len(t, f.rep.Status().Conflicts, 4)

	// Settled: nothing moves on the next pass; removing a copy closes its conflict.
	rep = f.sync()
	require.Empty(t, rep.Conflicts)
	require.Zero(t, rep.Changed+rep.Deleted)
	require.NoError(t, os.Remove(filepath.Join(f.wt, "edit.txt.remote-conflict")))
	f.sync()
	require.NoFileExists(t, filepath.Join(f.remote, "edit.txt.remote-conflict"))
	require.Equal(t, []string{"del-host.txt -> del-host.txt.remote-conflict", "del-sandbox.txt -> ",
		"sub/deep.txt -> sub/deep.txt.remote-conflict-2"}, conflictsOf(f.rep.Status().Conflicts))
}

// The host changed files while a command changed them in the replica:
// when the command's changes come back, the host's versions stay and the
// sandbox's are written beside them; then both sides hold the same.
func TestConflictWhenTheHostChangesDuringACommand(t *testing.T) {
	f := newFixture(t, false)
	for _, n := range []string{"edit.txt", "del-sandbox.txt", "del-host.txt", "only-sandbox.txt"} {
		f.write(n, "base "+n+"\n")
	}
	f.sync()
	ctx := context.Background()
	p, err := f.rep.Begin(ctx)
	require.NoError(t, err)
	defer p.Close()
	// While the command runs:
	f.write("edit.txt", "host\n")
	f.write("del-sandbox.txt", "host edit\n")
	require.NoError(t, os.Remove(filepath.Join(f.wt, "del-host.txt")))
	out, rep, err := p.run(ctx, f.tr, `cd "$W" && echo sandbox > edit.txt && rm del-sandbox.txt && echo sandbox > del-host.txt && echo sandbox > only-sandbox.txt`)
	require.NoError(t, err)
	require.Equal(t, Applied, out)
	require.Equal(t, []string{"del-host.txt -> del-host.txt.remote-conflict", "del-sandbox.txt -> ", "edit.txt -> edit.txt.remote-conflict"},
		conflictsOf(rep.Conflicts))
	require.Equal(t, "host\n", read(t, filepath.Join(f.wt, "edit.txt")))
	require.Equal(t, "sandbox\n", read(t, filepath.Join(f.wt, "edit.txt.remote-conflict")))
	require.Equal(t, "host edit\n", read(t, filepath.Join(f.wt, "del-sandbox.txt")))
	require.NoFileExists(t, filepath.Join(f.wt, "del-host.txt"))
	require.Equal(t, "sandbox\n", read(t, filepath.Join(f.wt, "del-host.txt.remote-conflict")))
	require.Equal(t, "sandbox\n", read(t, filepath.Join(f.wt, "only-sandbox.txt")), "a change on one side only is no conflict")

	// The next pass takes the host's versions up, with no new conflict.
	rep = f.sync()
	require.Empty(t, rep.Conflicts)
	require.Equal(t, "host\n", read(t, filepath.Join(f.remote, "edit.txt")))
	require.Equal(t, "sandbox\n", read(t, filepath.Join(f.remote, "edit.txt.remote-conflict")))
	require.Equal(t, "host edit\n", read(t, filepath.Join(f.remote, "del-sandbox.txt")))
	require.NoFileExists(t, filepath.Join(f.remote, "del-host.txt"))
	rep = f.sync()
	require.Zero(t, rep.Changed+rep.Deleted)
}

// A result naming a conflict copy that is not one is refused (the remote
// is hostile).
func TestParseConflictsRefusesOtherNames(t *testing.T) {
	cs, err := parseConflicts([]byte("a/b\x00a/b.remote-conflict-3\x00c\x00\x00"), nil)
	require.NoError(t, err)
	require.Equal(t, []Conflict{{Path: "a/b", Copy: "a/b.remote-conflict-3"}, {Path: "c"}}, cs)
	for _, bad := range []string{"a\x00b\x00", "a\x00a.remote-conflict-1\x00", "a\x00a.remote-conflict-02\x00", "../x\x00\x00",
		"a\x00a.remote-conflictx\x00", "a\x00"} {
		_, err := parseConflicts([]byte(bad), nil)
		require.Error(t, err, "%q", bad)
	}
}

// A file the host turned into a directory while the sandbox wrote it: the
// sandbox's version is kept beside it and the host's directory survives
// the next passes.
func TestConflictFileBecameDirectory(t *testing.T) {
	f := newFixture(t, false)
	f.write("f", "base f\n")
	f.sync()
	ctx := context.Background()
	p, err := f.rep.Begin(ctx)
	require.NoError(t, err)
	defer p.Close()
	require.NoError(t, os.Remove(filepath.Join(f.wt, "f")))
	f.write("f/inner", "host inner\n")
	_, _, err = p.run(ctx, f.tr, `cd "$W" && echo sandbox-precious > f`)
	require.NoError(t, err)
	require.Equal(t, "sandbox-precious\n", read(t, filepath.Join(f.wt, "f.remote-conflict")))
	f.sync()
	f.sync()
	require.Equal(t, "host inner\n", read(t, filepath.Join(f.wt, "f/inner")), "the host's directory survives")
	require.Equal(t, "host inner\n", read(t, filepath.Join(f.remote, "f/inner")))
	require.Equal(t, "sandbox-precious\n", read(t, filepath.Join(f.wt, "f.remote-conflict")))
}

// A conflict on a name too long to take the conflict suffix, both ways
// (found when the command's change comes back, and when the host's goes
// up): the copy's name keeps the first 200 bytes of the file's name, and
// nothing hangs or is lost.
func TestConflictOnALongName(t *testing.T) {
	f := newFixture(t, false)
	long := strings.Repeat("l", 245)
	short := strings.Repeat("l", 200) + ConflictSuffix
	f.write("d/"+long, "base\n")
	f.write(long, "base\n")
	f.sync()
	ctx := context.Background()
	p, err := f.rep.Begin(ctx)
	require.NoError(t, err)
	defer p.Close()
	f.write("d/"+long, "host\n")
	done := make(chan struct{})
	var rep Report
	go func() {
		defer close(done)
		_, rep, err = p.run(ctx, f.tr, `cd "$W" && echo sandbox > d/`+long)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the pass hangs")
	}
	require.NoError(t, err)
	require.Equal(t, []string{"d/" + long + " -> d/" + short}, conflictsOf(rep.Conflicts))
	require.Equal(t, "host\n", read(t, filepath.Join(f.wt, "d", long)))
	require.Equal(t, "sandbox\n", read(t, filepath.Join(f.wt, "d", short)))

	// Between passes, the other way.
	f.sh(`echo sandbox > ` + long)
	f.write(long, "host\n")
	rep = f.sync()
	require.Equal(t, []string{long + " -> " + short}, conflictsOf(rep.Conflicts))
	require.Equal(t, "host\n", read(t, filepath.Join(f.wt, long)))
	require.Equal(t, "sandbox\n", read(t, filepath.Join(f.wt, short)))
	require.Equal(t, "host\n", read(t, filepath.Join(f.remote, long)))
}
