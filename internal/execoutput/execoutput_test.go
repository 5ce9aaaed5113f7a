package execoutput

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

const ws = "ws-0123456789abcdef01234567"

// readAll pages through one stream of a kept output.
func readAll(t *testing.T, s *Store, id, stream string, page int) []byte {
	t.Helper()
	var out []byte
	for off := int64(0); ; {
		r, err := s.Read(ws, sandboxapi.ReadOutputInput{OutputID: id, Stream: stream, Offset: off, Limit: page})
		require.NoError(t, err)
		require.Equal(t, off, r.Offset)
		out = append(out, r.Data...)
		off += int64(len(r.Data))
		if r.EOF {
			assert.Equal(t, r.Kept, off)
			return out
		}
		require.NotEmpty(t, r.Data, "a page before EOF is never empty")
	}
}

func TestKeptOutputRoundTrip(t *testing.T) {
	s := New(t.TempDir())
	k, err := s.Begin(ws, 100)
	require.NoError(t, err)
	var want bytes.Buffer
	for i := 1; i <= 2000; i++ {
		line := fmt.Sprintf("%d\n", i)
		want.WriteString(line)
		k.Write("stdout", []byte(line))
	}
	k.Write("stderr", []byte("warn\n"))
	id, err := k.Finish(true)
	require.NoError(t, err)
	require.NoError(t, sandboxapi.ValidateOutputID(id))
	assert.Equal(t, want.Bytes(), readAll(t, s, id, "", 777))
	assert.Equal(t, []byte("warn\n"), readAll(t, s, id, "stderr", 3))
	r, err := s.Read(ws, sandboxapi.ReadOutputInput{OutputID: id, Offset: 1 << 40})
	require.NoError(t, err)
	assert.True(t, r.EOF)
	assert.Empty(t, r.Data)
	assert.Equal(t, int64(want.Len()), r.Total)

	// Output within the cap is never written.
	k2, err := s.Begin(ws, 100)
	require.NoError(t, err)
	k2.Write("stdout", []byte("small\n"))
	id2, err := k2.Finish(false)
	require.NoError(t, err)
	assert.Empty(t, id2)
	ents, err := os.ReadDir(filepath.Join(s.root, ws))
	require.NoError(t, err)
	assert.Len(t, ents, 3, "only the first output's files")

	// Unknown and malformed ids are typed errors.
	_, err = s.Read(ws, sandboxapi.ReadOutputInput{OutputID: "out-" + fmt.Sprintf("%032x", 7)})
	require.ErrorIs(t, err, sandboxapi.ErrNotFound)
	_, err = s.Read(ws, sandboxapi.ReadOutputInput{OutputID: "../../etc/passwd"})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	_, err = s.Read("../x", sandboxapi.ReadOutputInput{OutputID: id})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	_, err = s.Read(ws, sandboxapi.ReadOutputInput{OutputID: id, Stream: "both"})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)

	require.NoError(t, s.RemoveWorkspace(ws))
	_, err = s.Read(ws, sandboxapi.ReadOutputInput{OutputID: id})
	require.ErrorIs(t, err, sandboxapi.ErrNotFound)
}

func TestWorkspaceBoundDropsOldestFirst(t *testing.T) {
	s := New(t.TempDir())
	s.maxWorkspace = 2500 // three outputs of 1000 bytes do not fit
	var ids []string
	for i := 0; i < 3; i++ {
		k, err := s.Begin(ws, 10)
		require.NoError(t, err)
		k.Write("stdout", bytes.Repeat([]byte{'a' + byte(i)}, 1000))
		id, err := k.Finish(true)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	_, err := s.Read(ws, sandboxapi.ReadOutputInput{OutputID: ids[0]})
	require.ErrorIs(t, err, sandboxapi.ErrNotFound, "the oldest is dropped")
	for _, id := range ids[1:] {
		r, err := s.Read(ws, sandboxapi.ReadOutputInput{OutputID: id, Limit: 2000})
		require.NoError(t, err)
		assert.Len(t, r.Data, 1000)
	}
}
