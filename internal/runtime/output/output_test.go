package output

import (
	"bytes"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// reference computes the expected Bytes() for data and limit directly.
func reference(data []byte, limit int) []byte {
	if len(data) <= limit {
		return append([]byte{}, data...)
	}
	h := limit / 2
	t := limit - h
	out := append([]byte{}, data[:h]...)
	out = append(out, Marker(int64(len(data)-limit))...)
	return append(out, data[len(data)-t:]...)
}

func TestCappedMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, limit := range []int{0, 1, 2, 3, 7, 16, 100, 1024} {
		for _, size := range []int{0, 1, limit - 1, limit, limit + 1, 2 * limit, 10*limit + 3, 5000} {
			if size < 0 {
				continue
			}
			data := make([]byte, size)
			for i := range data {
				data[i] = byte('a' + rng.IntN(26))
			}
			c := NewCapped(limit)
			// Write in random-sized pieces.
			for rest := data; len(rest) > 0; {
				k := 1 + rng.IntN(min(len(rest), 2*limit+5))
				n, err := c.Write(rest[:k])
				require.NoError(t, err)
				require.Equal(t, k, n)
				rest = rest[k:]
			}
			want := reference(data, limit)
			require.Equal(t, string(want), string(c.Bytes()), "limit=%d size=%d", limit, size)
			require.Equal(t, int64(size), c.Total())
			require.Equal(t, size > limit, c.Truncated())
			require.LessOrEqual(t, len(c.Bytes()), limit+MaxMarkerLen)
		}
	}
}

func TestCappedNegativeLimit(t *testing.T) {
	c := NewCapped(-5)
	_, _ = c.Write([]byte("abc"))
	require.Equal(t, 0, c.Limit())
	require.True(t, c.Truncated())
	require.Equal(t, Marker(3), string(c.Bytes()))
}

func TestMarkerLength(t *testing.T) {
	require.LessOrEqual(t, len(Marker(math.MaxInt64)), MaxMarkerLen)
}

func TestCappedBoundedMemory(t *testing.T) {
	const limit = 64 << 10
	c := NewCapped(limit)
	chunk := bytes.Repeat([]byte("x"), 32<<10)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range (50 << 20) / len(chunk) {
		_, _ = c.Write(chunk)
	}
	runtime.ReadMemStats(&after)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "writing 50 MiB must not allocate more than the cap")
	require.Equal(t, int64(50<<20), c.Total())
	require.True(t, c.Truncated())
}
