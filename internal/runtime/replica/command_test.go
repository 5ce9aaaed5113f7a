package replica

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func writeOut(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	return dir
}

func TestCommandResultJoinsHeadAndTail(t *testing.T) {
	out := writeOut(t, map[string]string{
		"exit": "3\n", "o.head": "abc", "o.tail": "xyz", "o.count": "10\n",
		"e.head": "err", "e.count": "3\n", "start": "1000000000\n", "end": "1250000000\n",
	})
	var chunks []sandboxapi.ExecChunk
	st := NewStream(func(c sandboxapi.ExecChunk) { chunks = append(chunks, c) })
	st.Feed("stdout", []byte("ab"))
	res, err := CommandResult("kind", out, st, time.Hour)
	require.NoError(t, err)
	require.Equal(t, 3, res.ExitCode)
	require.Equal(t, int64(10), res.StdoutBytes)
	require.Equal(t, int64(3), res.StderrBytes)
	require.True(t, res.Truncated)
	require.Equal(t, int64(250), res.DurationMS)
	require.Equal(t, []byte("err"), res.Stderr)
	require.True(t, strings.HasPrefix(string(res.Stdout), "abc"), "%q", res.Stdout)
	require.True(t, strings.HasSuffix(string(res.Stdout), "xyz"), "%q", res.Stdout)
	// The chunks handed over are the streamed bytes, then the rest of the result.
	var so, se []byte
	for _, c := range chunks {
		if c.Stream == "stdout" {
			so = append(so, c.Data...)
		} else {
			se = append(se, c.Data...)
		}
	}
	require.Equal(t, res.Stdout, so)
	require.Equal(t, res.Stderr, se)
	o, e := st.Offsets()
	require.Equal(t, int64(len(res.Stdout)), o)
	require.Equal(t, int64(len(res.Stderr)), e)
}

func TestCommandResultTimedOutAndDurationFallback(t *testing.T) {
	out := writeOut(t, map[string]string{"exit": "143\n", "timedout": "1\n", "o.head": "x", "o.count": "1"})
	res, err := CommandResult("kind", out, nil, 1500*time.Millisecond)
	require.NoError(t, err)
	require.True(t, res.TimedOut)
	require.Equal(t, 124, res.ExitCode)
	require.False(t, res.Truncated)
	require.Equal(t, int64(1500), res.DurationMS)
	require.Equal(t, []byte("x"), res.Stdout)
}

func TestCommandResultWithoutExitIsUnavailable(t *testing.T) {
	out := writeOut(t, map[string]string{"o.head": "x"})
	_, err := CommandResult("daytona", out, nil, 0)
	require.ErrorIs(t, err, sandboxapi.ErrRuntimeUnavailable)
	require.Contains(t, err.Error(), "daytona: the command left no exit status")
}

func TestStreamWithoutOnChunkHandsNothing(t *testing.T) {
	var nilStream *Stream
	require.False(t, nilStream.Streaming())
	st := NewStream(nil)
	st.Live([]byte("a"), []byte("b"))
	o, e := st.Offsets()
	require.Zero(t, o)
	require.Zero(t, e)
}

func TestCommandLibLiveHeadGoesToFd5And6Only(t *testing.T) {
	quiet, live := CommandLib(false), CommandLib(true)
	require.NotContains(t, quiet, ">&5")
	require.NotContains(t, quiet, "5>&-")
	require.Contains(t, quiet, `$H -c "$X_HEAD" > "$XO/o.head"`)
	require.Contains(t, live, `$H -c "$X_HEAD" | tee "$XO/o.head" >&5`)
	require.Contains(t, live, `$H -c "$X_HEAD" | tee "$XO/e.head" >&6`)
	// The command and its watchdog never inherit the live descriptors.
	require.Contains(t, live, `( cd "$d" && x_exec ) < "$in" > "$X/of" 2> "$X/ef" 5>&- 6>&- &`)
	require.Equal(t, 2, strings.Count(live, "5>&- 6>&-"))
	require.NotContains(t, live, "@")
	require.NotContains(t, quiet, "@")
}
