package daemon

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/runtime/supervisor"
)

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

	resp, data = p.chunksLocked([2]int64{supervisor.NoStream, 0}, 100, 0)
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
	p.ackLocked([2]int64{4, supervisor.NoStream})
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
