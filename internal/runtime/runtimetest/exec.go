package runtimetest

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func (s *suite) exitCodes(t *testing.T) {
	ctx, env, rt := s.setup(t, nil)
	requireExit(t, mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: []string{"true"}}), 0)
	requireExit(t, mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: sh("exit 3")}), 3)

	res := mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: []string{"runtimetest-no-such-command-xyz", "arg"}})
	requireExit(t, res, 127)
	require.NotEmpty(t, res.Stderr, "a missing command explains itself on stderr")
	requireExit(t, mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: []string{"./no-such-file"}}), 127)

	require.NoError(t, env.Files.WriteFile("noexec.sh", []byte("#!/bin/sh\necho hi\n"), 0o644))
	requireExit(t, mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: []string{"./noexec.sh"}}), 126)
	require.NoError(t, env.Files.WriteFile("exec.sh", []byte("#!/bin/sh\necho hi \"$1\"\n"), 0o755))
	res = mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: []string{"./exec.sh", "there"}})
	requireExit(t, res, 0)
	require.Equal(t, "hi there\n", string(res.Stdout))

	res = mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: sh("kill -9 $$")})
	requireExit(t, res, 128+9)
	require.False(t, res.TimedOut)

	res = mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: []string{"sleep", "1"}})
	require.GreaterOrEqual(t, res.DurationMS, int64(900), "DurationMS")
}

func (s *suite) separateStreams(t *testing.T) {
	ctx, _, rt := s.setup(t, nil)
	res := mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: sh("echo out; echo err >&2; exit 1")})
	requireExit(t, res, 1)
	require.Equal(t, "out\n", string(res.Stdout))
	require.Equal(t, "err\n", string(res.Stderr))
	require.Equal(t, int64(4), res.StdoutBytes)
	require.Equal(t, int64(4), res.StderrBytes)
	require.False(t, res.Truncated)
	require.False(t, res.TimedOut)

	// Argv is passed verbatim: no shell interprets it.
	res = mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: []string{"printf", "%s|", "a b", "$HOME", "*", "'q'"}})
	requireExit(t, res, 0)
	require.Equal(t, "a b|$HOME|*|'q'|", string(res.Stdout))
}

func (s *suite) stdin(t *testing.T) {
	ctx, _, rt := s.setup(t, nil)
	// Larger than a pipe buffer, with NUL and non-UTF-8 bytes.
	in := bytes.Repeat([]byte("line\x00\xff\n"), 20000)
	res := mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: []string{"cat"}, Stdin: in, MaxOutputBytes: sandboxapi.MaxOutputBytesLimit})
	requireExit(t, res, 0)
	require.True(t, bytes.Equal(in, res.Stdout), "stdin round trip (got %d bytes, want %d)", len(res.Stdout), len(in))

	// Without Stdin the command reads an immediate EOF (/dev/null).
	start := time.Now()
	res = mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: sh("cat; echo done"), TimeoutS: 10})
	requireExit(t, res, 0)
	require.Equal(t, "done\n", string(res.Stdout))
	require.Less(t, time.Since(start), 5*time.Second)

	// A command that ignores its stdin still finishes.
	res = mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: []string{"true"}, Stdin: bytes.Repeat([]byte("x"), sandboxapi.MaxStdinBytes)})
	requireExit(t, res, 0)
}

func (s *suite) cwd(t *testing.T) {
	ctx, env, rt := s.setup(t, nil)
	res := mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: []string{"pwd"}})
	requireExit(t, res, 0)
	want := []string{env.Spec.Workdir}
	if real, err := filepath.EvalSymlinks(env.Spec.Workdir); err == nil {
		want = append(want, real)
	}
	require.Contains(t, want, strings.TrimSuffix(string(res.Stdout), "\n"), "default cwd is the workdir")

	require.NoError(t, env.Files.MkdirAll("sub/deeper"))
	res = mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: sh("echo here > marker"), Cwd: "sub/deeper"})
	requireExit(t, res, 0)
	require.True(t, env.Files.Exists("sub/deeper/marker"))

	// A symlink inside the workspace that leads out of it is refused as a cwd.
	outside := t.TempDir()
	require.NoError(t, env.Files.Symlink("..", "up"))
	require.NoError(t, env.Files.Symlink(outside, "out"))
	require.NoError(t, env.Files.Symlink("sub", "insidelink"))
	for _, cwd := range []string{"up", "out", "sub/../up", "../", "..", "/", "/tmp", "missing-dir", "noexec-file"} {
		if cwd == "noexec-file" {
			require.NoError(t, env.Files.WriteFile(cwd, nil, 0o644))
		}
		_, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: sh("echo escaped > escaped-marker"), Cwd: cwd, TimeoutS: 10})
		require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, "cwd %q", cwd)
	}
	require.False(t, env.Files.Exists("../escaped-marker"))
	require.NoFileExists(t, filepath.Join(outside, "escaped-marker"))
	require.False(t, env.Files.Exists("escaped-marker"))

	// A symlink that stays inside is fine.
	res = mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: sh("echo ok > via-link"), Cwd: "insidelink"})
	requireExit(t, res, 0)
	require.True(t, env.Files.Exists("sub/via-link"))
}

func (s *suite) badInput(t *testing.T) {
	ctx, env, rt := s.setup(t, nil)
	touch := sh("touch ran")
	maxTimeoutS := int(sandboxapi.MaxExecTimeout / time.Second)
	cases := map[string]sandboxapi.ExecRequest{
		"nil cmd":              {},
		"empty cmd":            {Cmd: []string{}},
		"empty argv0":          {Cmd: []string{"", "x"}},
		"NUL in argv":          {Cmd: sh("touch ran\x00")},
		"NUL in argv0":         {Cmd: []string{"sh\x00", "-c", "touch ran"}},
		"env key with =":       {Cmd: touch, Env: map[string]string{"A=B": "x"}},
		"empty env key":        {Cmd: touch, Env: map[string]string{"": "x"}},
		"NUL in env key":       {Cmd: touch, Env: map[string]string{"A\x00": "x"}},
		"NUL in env value":     {Cmd: touch, Env: map[string]string{"A": "x\x00y"}},
		"negative timeout":     {Cmd: touch, TimeoutS: -1},
		"timeout above max":    {Cmd: touch, TimeoutS: maxTimeoutS + 1},
		"negative output cap":  {Cmd: touch, MaxOutputBytes: -1},
		"output cap above max": {Cmd: touch, MaxOutputBytes: sandboxapi.MaxOutputBytesLimit + 1},
		"stdin too large":      {Cmd: touch, Stdin: make([]byte, sandboxapi.MaxStdinBytes+1)},
		"cwd dotdot":           {Cmd: touch, Cwd: "../x"},
		"cwd inner dotdot":     {Cmd: touch, Cwd: "a/../../b"},
		"cwd absolute":         {Cmd: touch, Cwd: "/tmp"},
		"cwd control char":     {Cmd: touch, Cwd: "a\x01b"},
	}
	for name, req := range cases {
		_, err := rt.Exec(ctx, req)
		require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, name)
		_, err = rt.ExecStream(ctx, req, func(sandboxapi.ExecChunk) {})
		require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument, name+" (ExecStream)")
	}
	require.False(t, env.Files.Exists("ran"), "nothing may run on bad input")
	// The limits themselves are accepted.
	res := mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: touch, TimeoutS: maxTimeoutS, MaxOutputBytes: sandboxapi.MaxOutputBytesLimit, Stdin: make([]byte, sandboxapi.MaxStdinBytes)})
	requireExit(t, res, 0)
	require.True(t, env.Files.Exists("ran"))
}

func (s *suite) outputCaps(t *testing.T) {
	ctx, _, rt := s.setup(t, nil)
	const limit = 64 << 10

	res := mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: []string{"printf", "abc"}, MaxOutputBytes: limit})
	requireExit(t, res, 0)
	require.Equal(t, "abc", string(res.Stdout))
	require.False(t, res.Truncated)
	require.Equal(t, int64(3), res.StdoutBytes)

	res = mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: sh(fmt.Sprintf(`head -c %d /dev/zero | tr '\0' b`, limit)), MaxOutputBytes: limit})
	requireExit(t, res, 0)
	require.False(t, res.Truncated, "output of exactly the cap is not truncated")
	require.Equal(t, strings.Repeat("b", limit), string(res.Stdout))

	const big = 50_000_000
	start := time.Now()
	res = mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: sh(fmt.Sprintf(`head -c %d /dev/zero | tr '\0' a`, big)), MaxOutputBytes: limit})
	t.Logf("50 MB of output took %v", time.Since(start))
	requireExit(t, res, 0)
	require.True(t, res.Truncated)
	require.Equal(t, int64(big), res.StdoutBytes)
	require.LessOrEqual(t, len(res.Stdout), limit+100, "kept output is bounded by the cap plus a marker")
	require.GreaterOrEqual(t, len(res.Stdout), limit, "head and tail together fill the cap")
	require.True(t, bytes.HasPrefix(res.Stdout, bytes.Repeat([]byte("a"), limit/4)), "head kept")
	require.True(t, bytes.HasSuffix(res.Stdout, bytes.Repeat([]byte("a"), limit/4)), "tail kept")
	require.Contains(t, string(res.Stdout), "truncated", "a marker shows where bytes were dropped")
	require.Empty(t, res.Stderr)

	res = mustExec(t, ctx, rt, sandboxapi.ExecRequest{Cmd: sh(`echo first >&2; head -c 300000 /dev/zero | tr '\0' e >&2; echo last >&2; echo out`), MaxOutputBytes: limit})
	requireExit(t, res, 0)
	require.True(t, res.Truncated)
	require.Equal(t, int64(300000+len("first\n")+len("last\n")), res.StderrBytes)
	require.LessOrEqual(t, len(res.Stderr), limit+100)
	require.True(t, bytes.HasPrefix(res.Stderr, []byte("first\n")))
	require.True(t, bytes.HasSuffix(res.Stderr, []byte("eeelast\n")))
	require.Equal(t, "out\n", string(res.Stdout), "each stream has its own cap")
}

func (s *suite) execStream(t *testing.T) {
	ctx, _, rt := s.setup(t, nil)
	var (
		mu       sync.Mutex
		chunks   []sandboxapi.ExecChunk
		firstAt  time.Duration
		inside   atomic.Int32
		overlaps atomic.Int32
	)
	start := time.Now()
	res, err := rt.ExecStream(ctx, sandboxapi.ExecRequest{Cmd: sh("echo a; echo e >&2; sleep 2; echo b"), TimeoutS: 30}, func(c sandboxapi.ExecChunk) {
		if inside.Add(1) > 1 {
			overlaps.Add(1)
		}
		defer inside.Add(-1)
		mu.Lock()
		defer mu.Unlock()
		if len(chunks) == 0 {
			firstAt = time.Since(start)
		}
		chunks = append(chunks, c)
	})
	endAt := time.Since(start)
	require.NoError(t, err)
	requireExit(t, res, 0)
	require.Equal(t, "a\nb\n", string(res.Stdout))
	require.Equal(t, "e\n", string(res.Stderr))
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, chunks)
	// Measured from the end, not the start: starting the command may be
	// slow on a loaded machine, but its first line must come while it
	// still sleeps (2 s), not with its end.
	require.Greater(t, endAt-firstAt, time.Second, "the first chunk must arrive before the command ends (first at %v, end at %v)", firstAt, endAt)
	require.Zero(t, overlaps.Load(), "onChunk calls must be serialized")
	var out, errOut []byte
	for _, c := range chunks {
		switch c.Stream {
		case "stdout":
			out = append(out, c.Data...)
		case "stderr":
			errOut = append(errOut, c.Data...)
		default:
			t.Fatalf("chunk with stream %q", c.Stream)
		}
	}
	require.Equal(t, "a\nb\n", string(out), "stdout chunks add up to the result")
	require.Equal(t, "e\n", string(errOut), "stderr chunks add up to the result")
}

// concurrentExecs: three execs on one runtime run at the same time. Each
// command records when its sleep began and ended (the runtime's clock);
// they overlap when the latest start comes before the earliest end, which
// no serialization could produce whatever each exec's overhead.
func (s *suite) concurrentExecs(t *testing.T) {
	ctx, _, rt := s.setup(t, nil)
	// Each command prints the times it started and ended its sleep; they
	// ran concurrently when every one started before any ended, however
	// slow the machine or the backend's round trips are.
	var wg sync.WaitGroup
	results := make([]sandboxapi.ExecResult, 3)
	errs := make([]error, 3)
	for i := range results {
		wg.Go(func() {
			results[i], errs[i] = rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: sh("date +%s%N; sleep 2; date +%s%N; echo $0-" + strconv.Itoa(i)), TimeoutS: 60})
		})
	}
	wg.Wait()
	var latestStart, earliestEnd int64 = 0, math.MaxInt64
	for i := range results {
		require.NoError(t, errs[i])
		requireExit(t, results[i], 0)
		lines := strings.Split(strings.TrimSpace(string(results[i].Stdout)), "\n")
		require.Len(t, lines, 3, "stdout %q", results[i].Stdout)
		require.Equal(t, "sh-"+strconv.Itoa(i), lines[2])
		startNS, err := strconv.ParseInt(lines[0], 10, 64)
		require.NoError(t, err)
		endNS, err := strconv.ParseInt(lines[1], 10, 64)
		require.NoError(t, err)
		latestStart, earliestEnd = max(latestStart, startNS), min(earliestEnd, endNS)
	}
	require.Less(t, latestStart, earliestEnd, "execs on one runtime run concurrently: every one started before any finished")
}
