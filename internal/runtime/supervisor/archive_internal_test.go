package supervisor

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Every archived process is kept once, in the order added, and the file a
// restarted worker loads holds the same (an aliasing slice listed one
// process twice and lost another).
func TestArchiveKeepsEachProcessOnceInOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "archive.json")
	a := LoadArchive(path)
	var ids []string // the background ones (List leaves execs out)
	for _, f := range []Final{
		{Info: Info{ID: "p1"}}, {Info: Info{ID: "x1", Exec: true}}, {Info: Info{ID: "p2"}}, {Info: Info{ID: "p3"}},
	} {
		assert.NoError(t, a.Add([]Final{f}))
		if !f.Info.Exec {
			ids = append(ids, f.Info.ID)
		}
	}
	listed := func(a *Archive) []string {
		var out []string
		for _, i := range a.List() {
			out = append(out, i.ID)
		}
		return out
	}
	assert.Equal(t, ids, listed(a))
	assert.Equal(t, ids, listed(LoadArchive(path)))
	_, ok := a.Read("x1", 0, 0, 0)
	assert.True(t, ok, "the exec is kept too")
}
