package daemon

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor"
)

func TestAdmitLocked(t *testing.T) {
	s := &server{maxProcs: 2, procs: map[string]*proc{
		"a": {},                                  // a live background process
		"b": {fg: true},                          // a foreground command: not counted
		"c": {info: supervisor.Info{Exec: true}}, // an exec: not counted
		"d": {treeDone: true},                    // ended with its whole tree: not counted
	}}
	require.Nil(t, s.admitLocked(&supervisor.Spec{}), "one live background process of two")
	s.procs["e"] = &proc{}
	e := s.admitLocked(&supervisor.Spec{})
	require.NotNil(t, e)
	require.Equal(t, supervisor.ErrLimit, e.Kind)
	require.Nil(t, s.admitLocked(&supervisor.Spec{Foreground: true}), "the limit is on background processes")
	require.Nil(t, s.admitLocked(&supervisor.Spec{Exec: true}), "an exec is not a background process")
	s.stopping = true
	e = s.admitLocked(&supervisor.Spec{Foreground: true})
	require.NotNil(t, e)
	require.Equal(t, supervisor.ErrState, e.Kind, "nothing starts while stopping")
}

func TestBufferSizes(t *testing.T) {
	for _, tc := range []struct {
		spec           supervisor.Spec
		capacity, head int
	}{
		{supervisor.Spec{}, 1000, 0},
		{supervisor.Spec{HeadBytes: 100}, 1000, 100},
		{supervisor.Spec{HeadBytes: 5000}, 1000, 1000},
		{supervisor.Spec{HeadBytes: -1}, 1000, 0},
		{supervisor.Spec{Lossless: true, HeadBytes: 10}, 2000, 10},
		{supervisor.Spec{Foreground: true, HeadBytes: 100}, foregroundWindow, 0},
		{supervisor.Spec{Foreground: true, Lossless: true}, foregroundWindow, 0},
	} {
		c, h := bufferSizes(&tc.spec, 1000)
		require.Equal(t, tc.capacity, c, "%+v", tc.spec)
		require.Equal(t, tc.head, h, "%+v", tc.spec)
	}
}
