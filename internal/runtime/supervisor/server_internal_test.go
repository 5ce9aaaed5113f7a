package supervisor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestAdmitLocked(t *testing.T) {
	s := &server{maxProcs: 2, procs: map[string]*proc{
		"a": {},                       // a live background process
		"b": {fg: true},               // a foreground command: not counted
		"c": {info: Info{Exec: true}}, // an exec: not counted
		"d": {treeDone: true},         // ended with its whole tree: not counted
	}}
	require.Nil(t, s.admitLocked(&Spec{}), "one live background process of two")
	s.procs["e"] = &proc{}
	e := s.admitLocked(&Spec{})
	require.NotNil(t, e)
	require.Equal(t, ErrLimit, e.Kind)
	require.Nil(t, s.admitLocked(&Spec{Foreground: true}), "the limit is on background processes")
	require.Nil(t, s.admitLocked(&Spec{Exec: true}), "an exec is not a background process")
	s.stopping = true
	e = s.admitLocked(&Spec{Foreground: true})
	require.NotNil(t, e)
	require.Equal(t, ErrState, e.Kind, "nothing starts while stopping")
}

func TestBufferSizes(t *testing.T) {
	for _, tc := range []struct {
		spec           Spec
		capacity, head int
	}{
		{Spec{}, 1000, 0},
		{Spec{HeadBytes: 100}, 1000, 100},
		{Spec{HeadBytes: 5000}, 1000, 1000},
		{Spec{HeadBytes: -1}, 1000, 0},
		{Spec{Lossless: true, HeadBytes: 10}, 2000, 10},
		{Spec{Foreground: true, HeadBytes: 100}, foregroundWindow, 0},
		{Spec{Foreground: true, Lossless: true}, foregroundWindow, 0},
	} {
		c, h := bufferSizes(&tc.spec, 1000)
		require.Equal(t, tc.capacity, c, "%+v", tc.spec)
		require.Equal(t, tc.head, h, "%+v", tc.spec)
	}
}

func TestParseServe(t *testing.T) {
	o, err := parseServe([]string{"--ctl-fd", "3", "--runtime", "rt-1", "--cgroup", "v2", "--cgroup-fds", "7,8", "--idle-exit", "15m"})
	require.NoError(t, err)
	require.Equal(t, 3, o.ctlFD)
	require.Equal(t, "rt-1", o.runtime)
	require.Equal(t, []int{7, 8}, o.cgFDs)
	require.Equal(t, 15*time.Minute, o.idleExit)
	require.Equal(t, DefaultBufferBytes, o.buffer)
	require.Equal(t, "proc-", o.idPrefix)

	o, err = parseServe([]string{"--listen-abstract", "sbx", "--cgroup-fds", "x"})
	require.NoError(t, err, "--cgroup-fds is read only with --cgroup v1 or v2")
	require.Nil(t, o.cgFDs)

	for _, args := range [][]string{
		nil,
		{"--ctl-fd", "3", "--listen-abstract", "sbx"},
		{"--bogus"},
	} {
		_, err := parseServe(args)
		require.ErrorContains(t, err, "one of --ctl-fd or --listen-abstract is required", "%q", args)
	}
	_, err = parseServe([]string{"--ctl-fd", "3", "--cgroup", "v1", "--cgroup-fds", "7,x"})
	require.ErrorContains(t, err, "--cgroup-fds")
}

func TestChunksLocked(t *testing.T) {
	p := &proc{changed: make(chan struct{})}
	p.bufs[0], p.bufs[1] = newRing(1<<10, 0), newRing(1<<10, 0)
	p.bufs[0].write([]byte("stdout bytes"))
	p.bufs[1].write([]byte("err"))
	p.open = [2]bool{true, true}

	resp, data := p.chunksLocked([2]int64{0, 0}, 6, 0)
	require.Equal(t, "stdout"+"err", string(data), "at most max bytes per stream")
	require.Equal(t, 6, resp.Chunks[0].Len)
	require.Equal(t, 3, resp.Chunks[1].Len)
	require.False(t, resp.Chunks[0].EOF || resp.Chunks[1].EOF, "open streams of a running process")

	resp, data = p.chunksLocked([2]int64{7, 0}, 100, 7)
	require.Equal(t, "bytes"+"er", string(data), "maxTotal bounds both together")
	require.Equal(t, int64(7), resp.Chunks[0].Offset)

	resp, data = p.chunksLocked([2]int64{NoStream, 0}, 100, 0)
	require.Equal(t, "err", string(data))
	require.Equal(t, int64(12), resp.Chunks[0].Offset, "a stream not read is reported at its end")
	require.Zero(t, resp.Chunks[0].Len)

	// Ended, streams closed, tree gone: EOF once everything is read.
	p.open = [2]bool{}
	p.info.Exited, p.treeDone = true, true
	resp, _ = p.chunksLocked([2]int64{0, 1}, 100, 0)
	require.True(t, resp.Chunks[0].EOF)
	require.True(t, resp.Chunks[1].EOF)
	resp, _ = p.chunksLocked([2]int64{0, 0}, 4, 0)
	require.False(t, resp.Chunks[0].EOF, "bytes left after this chunk")
	p.treeDone = false
	resp, _ = p.chunksLocked([2]int64{0, 0}, 100, 0)
	require.False(t, resp.Chunks[0].EOF, "a child still running may write")
}

func TestAckLocked(t *testing.T) {
	p := &proc{changed: make(chan struct{}), lossless: true}
	p.bufs[0] = newRing(1<<10, 0)
	p.bufs[0].write([]byte("0123456789"))
	before := p.changed
	p.ackLocked([2]int64{4, NoStream})
	require.Equal(t, int64(4), p.acked[0])
	require.Zero(t, p.acked[1], "no second stream")
	require.False(t, p.lastRead.IsZero(), "a lossless process records its last read")
	select {
	case <-before:
	default:
		t.Fatal("a waiting pump is woken")
	}
	p.ackLocked([2]int64{99, 0})
	require.Equal(t, int64(10), p.acked[0], "never past what exists")
	p.ackLocked([2]int64{2, 0})
	require.Equal(t, int64(10), p.acked[0], "never backwards")
}
