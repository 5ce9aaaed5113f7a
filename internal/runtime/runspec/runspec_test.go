package runspec_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/runtime/runspec"
	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// requireInvalid asserts err is an ErrInvalidArgument whose message
// contains want and no formatting residue.
func requireInvalid(t *testing.T, err error, want string) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	require.Equal(t, sandboxapi.ErrInvalidArgument, sandboxapi.KindOf(err))
	require.Contains(t, err.Error(), want)
	require.NotContains(t, err.Error(), "%!")
}

func TestValidateExecRequest(t *testing.T) {
	require.NoError(t, runspec.ValidateExec(sandboxapi.ExecRequest{Cmd: []string{"true"}}))
	require.NoError(t, runspec.ValidateExec(sandboxapi.ExecRequest{Cmd: []string{"true"}, Cwd: "a/b", TimeoutS: 7200, MaxOutputBytes: sandboxapi.MaxOutputBytesLimit}))
	err := runspec.ValidateExec(sandboxapi.ExecRequest{Cmd: []string{"true"}, Cwd: "../x"})
	require.ErrorIs(t, err, sandboxapi.ErrInvalidArgument)
	require.Equal(t, sandboxapi.ErrInvalidArgument, sandboxapi.KindOf(err))
	require.NotContains(t, err.Error(), "%!")
}

func TestValidateExecHostile(t *testing.T) {
	ok := func() sandboxapi.ExecRequest {
		return sandboxapi.ExecRequest{Cmd: []string{"sh", "-c", "true"}, Cwd: "sub", Env: map[string]string{"A": "b"}}
	}
	// A huge argument is not the adapter's to refuse (the kernel's ARG_MAX
	// is, as a result): only its NUL bytes are.
	huge := ok()
	huge.Cmd = append(huge.Cmd, strings.Repeat("x", 1<<20))
	require.NoError(t, runspec.ValidateExec(huge))
	maxed := ok()
	maxed.Stdin = make([]byte, sandboxapi.MaxStdinBytes)
	maxed.Network = sandboxapi.NetworkNone
	require.NoError(t, runspec.ValidateExec(maxed))

	for name, tc := range map[string]struct {
		mut  func(*sandboxapi.ExecRequest)
		want string
	}{
		"nil cmd":             {func(r *sandboxapi.ExecRequest) { r.Cmd = nil }, "exec: cmd is empty"},
		"empty cmd[0]":        {func(r *sandboxapi.ExecRequest) { r.Cmd = []string{"", "x"} }, "exec: cmd[0] is empty"},
		"NUL in cmd[0]":       {func(r *sandboxapi.ExecRequest) { r.Cmd[0] = "sh\x00evil" }, "cmd[0] contains a NUL byte"},
		"NUL in a later arg":  {func(r *sandboxapi.ExecRequest) { r.Cmd[2] = "true\x00; rm -rf /" }, "cmd[2] contains a NUL byte"},
		"absolute cwd":        {func(r *sandboxapi.ExecRequest) { r.Cwd = "/etc" }, "exec: cwd:"},
		"escaping cwd":        {func(r *sandboxapi.ExecRequest) { r.Cwd = "a/../../etc" }, "exec: cwd:"},
		"NUL in cwd":          {func(r *sandboxapi.ExecRequest) { r.Cwd = "a\x00b" }, "exec: cwd:"},
		"empty env name":      {func(r *sandboxapi.ExecRequest) { r.Env[""] = "x" }, "empty variable name"},
		"'=' in env name":     {func(r *sandboxapi.ExecRequest) { r.Env["PATH=/evil:"] = "x" }, "contains '=' or NUL"},
		"NUL in env name":     {func(r *sandboxapi.ExecRequest) { r.Env["A\x00B"] = "x" }, "contains '=' or NUL"},
		"NUL in env value":    {func(r *sandboxapi.ExecRequest) { r.Env["LD_PRELOAD"] = "a\x00b" }, `value of "LD_PRELOAD" contains a NUL byte`},
		"negative timeout":    {func(r *sandboxapi.ExecRequest) { r.TimeoutS = -1 }, "timeout_s -1 is negative"},
		"timeout too long":    {func(r *sandboxapi.ExecRequest) { r.TimeoutS = int(sandboxapi.MaxExecTimeout/time.Second) + 1 }, "exceeds the maximum"},
		"timeout overflowing": {func(r *sandboxapi.ExecRequest) { r.TimeoutS = 1 << 40 }, "exceeds the maximum"},
		"negative output":     {func(r *sandboxapi.ExecRequest) { r.MaxOutputBytes = -1 }, "max_output_bytes -1 is negative"},
		"output too large":    {func(r *sandboxapi.ExecRequest) { r.MaxOutputBytes = sandboxapi.MaxOutputBytesLimit + 1 }, "max_output_bytes"},
		"stdin too large":     {func(r *sandboxapi.ExecRequest) { r.Stdin = make([]byte, sandboxapi.MaxStdinBytes+1) }, "stdin is"},
		"unknown network":     {func(r *sandboxapi.ExecRequest) { r.Network = "host" }, `network "host": want none, limited or default`},
	} {
		t.Run(name, func(t *testing.T) {
			r := ok()
			tc.mut(&r)
			requireInvalid(t, runspec.ValidateExec(r), tc.want)
		})
	}
}

func TestValidateEnvClipsLongNames(t *testing.T) {
	err := runspec.ValidateEnv(map[string]string{strings.Repeat("N", 4096) + "=": "v"})
	requireInvalid(t, err, "contains '=' or NUL")
	require.Less(t, len(err.Error()), 300, "the name is clipped in the message")
	require.NoError(t, runspec.ValidateEnv(nil))
	require.NoError(t, runspec.ValidateEnv(map[string]string{"EMPTY": "", "UNICODE_ÿ": "é"}))
}

func TestValidateCmdNamesItsOperation(t *testing.T) {
	requireInvalid(t, runspec.ValidateCmd("process_start", []string{}), "process_start: cmd is empty")
	requireInvalid(t, runspec.ValidateCmd("process_start", []string{"a", "b\x00"}), "process_start: cmd[1] contains a NUL byte")
	require.NoError(t, runspec.ValidateCmd("process_start", []string{"a", ""}), "an empty later argument is an argument")
}

func TestTargetRules(t *testing.T) {
	for p, want := range map[string][2]bool{ // {BelowRoot, OutsideSystem}
		"/workspace":      {true, true},
		"/srv/repo/.bare": {true, true},
		"/":               {false, false},
		"":                {false, false},
		"workspace":       {false, false},
		"/workspace/":     {false, false},
		"/a/../workspace": {false, false},
		"/a/./b":          {false, false},
		"//a":             {false, false},
		"/tmp":            {true, false},
		"/tmp/x":          {true, true},
		"/proc":           {true, false},
		"/proc/self/root": {true, false},
		"/dev":            {true, false},
		"/dev/shm":        {true, false},
		"/devices":        {true, true},
		"/process":        {true, true},
	} {
		require.Equal(t, want[0], runspec.BelowRoot.Allowed(p), "BelowRoot %q", p)
		require.Equal(t, want[1], runspec.OutsideSystem.Allowed(p), "OutsideSystem %q", p)
	}
	spec := sandbox.RuntimeSpec{ID: "rt-1", Workdir: "/proc/1"}
	requireInvalid(t, runspec.CheckWorkdir(spec, runspec.OutsideSystem), `runtime rt-1: workdir "/proc/1" is not an absolute clean path outside /, /tmp, /proc and /dev`)
	require.NoError(t, runspec.CheckWorkdir(spec, runspec.BelowRoot))
}

// fixture is a workdir, a repo cache directory, a file and a symlink to
// the workdir, all in one temporary directory.
type fixture struct{ work, cache, file, link string }

func newFixture(t *testing.T) fixture {
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	f := fixture{work: filepath.Join(base, "work"), cache: filepath.Join(base, "cache"), file: filepath.Join(base, "file"), link: filepath.Join(base, "link")}
	require.NoError(t, os.Mkdir(f.work, 0o755))
	require.NoError(t, os.Mkdir(f.cache, 0o755))
	require.NoError(t, os.WriteFile(f.file, []byte("x"), 0o644))
	require.NoError(t, os.Symlink(f.work, f.link))
	return f
}

func TestResolveMounts(t *testing.T) {
	f := newFixture(t)
	spec := sandbox.RuntimeSpec{ID: "rt-1", Workdir: "/workspace", Mounts: []sandbox.Mount{
		{Source: f.link, Target: "/workspace", Writable: true},
		{Source: f.cache, Target: f.cache},
	}}
	ms, err := runspec.ResolveMounts(spec, runspec.OutsideSystem)
	require.NoError(t, err)
	require.Equal(t, f.work, ms.Root, "the workdir source's symlinks are resolved")
	require.NotNil(t, ms.Owner)
	require.Equal(t, uint32(os.Getuid()), ms.Owner.Uid)
	require.Equal(t, []runspec.Bind{
		{Source: f.work, Target: "/workspace", Writable: true},
		{Source: f.cache, Target: f.cache},
	}, ms.Binds)

	// A mount on its own source keeps the host's layout, symlinks resolved.
	spec.Mounts[1] = sandbox.Mount{Source: f.link, Target: f.link}
	ms, err = runspec.ResolveMounts(spec, runspec.BelowRoot)
	require.NoError(t, err)
	require.Equal(t, runspec.Bind{Source: f.work, Target: f.work}, ms.Binds[1])
}

func TestResolveMountsHostile(t *testing.T) {
	f := newFixture(t)
	work := sandbox.Mount{Source: f.work, Target: "/workspace", Writable: true}
	for name, tc := range map[string]struct {
		mounts []sandbox.Mount
		rule   runspec.TargetRule
		want   string
	}{
		"relative source":     {[]sandbox.Mount{{Source: "work", Target: "/workspace"}}, runspec.BelowRoot, "the source must be absolute"},
		"escaping source":     {[]sandbox.Mount{work, {Source: "../../etc", Target: "/etc2"}}, runspec.BelowRoot, "the source must be absolute"},
		"relative target":     {[]sandbox.Mount{work, {Source: f.cache, Target: "cache"}}, runspec.BelowRoot, "an absolute clean path below /"},
		"escaping target":     {[]sandbox.Mount{work, {Source: f.cache, Target: "/workspace/../etc"}}, runspec.BelowRoot, "an absolute clean path below /"},
		"root target":         {[]sandbox.Mount{work, {Source: f.cache, Target: "/"}}, runspec.BelowRoot, "the target an absolute clean path below /"},
		"proc target":         {[]sandbox.Mount{work, {Source: f.cache, Target: "/proc/sys"}}, runspec.OutsideSystem, "outside /, /tmp, /proc and /dev"},
		"tmp target":          {[]sandbox.Mount{work, {Source: f.cache, Target: "/tmp"}}, runspec.OutsideSystem, "outside /, /tmp, /proc and /dev"},
		"two on one target":   {[]sandbox.Mount{work, {Source: f.cache, Target: "/workspace"}}, runspec.BelowRoot, `two mounts on "/workspace"`},
		"missing source":      {[]sandbox.Mount{work, {Source: f.work + "-gone", Target: "/gone"}}, runspec.BelowRoot, "no such file or directory"},
		"NUL in source":       {[]sandbox.Mount{work, {Source: f.cache + "\x00x", Target: "/c"}}, runspec.BelowRoot, "mount source"},
		"workdir is a file":   {[]sandbox.Mount{{Source: f.file, Target: "/workspace"}}, runspec.BelowRoot, "is not a directory"},
		"no mount on workdir": {[]sandbox.Mount{{Source: f.cache, Target: "/cache"}}, runspec.BelowRoot, `need exactly one mount with target "/workspace"`},
		"no mounts at all":    {nil, runspec.BelowRoot, "need exactly one mount"},
	} {
		t.Run(name, func(t *testing.T) {
			spec := sandbox.RuntimeSpec{ID: "rt-1", Workdir: "/workspace", Mounts: tc.mounts}
			_, err := runspec.ResolveMounts(spec, tc.rule)
			requireInvalid(t, err, tc.want)
			require.Contains(t, err.Error(), "runtime rt-1: ")
			if name == "missing source" {
				require.Equal(t, 1, strings.Count(err.Error(), f.work), "the lookup error does not repeat the host path")
			}
		})
	}
}

func TestResolveWorkdir(t *testing.T) {
	f := newFixture(t)
	spec := sandbox.RuntimeSpec{ID: "rt-1", Workdir: "/workspace", Mounts: []sandbox.Mount{
		{Source: f.link, Target: "/workspace"},
		{Source: "relative/and/ignored", Target: "cache"},
	}}
	root, m, err := runspec.ResolveWorkdir(spec)
	require.NoError(t, err)
	require.Equal(t, f.work, root)
	require.Equal(t, spec.Mounts[0], m)

	for name, tc := range map[string]struct {
		workdir string
		mounts  []sandbox.Mount
		want    string
	}{
		"empty workdir":   {"", spec.Mounts, "workdir is empty"},
		"no mount on it":  {"/other", spec.Mounts, `need exactly one mount with target "/other", found 0`},
		"two mounts":      {"/workspace", []sandbox.Mount{spec.Mounts[0], spec.Mounts[0]}, "found 2"},
		"relative source": {"/workspace", []sandbox.Mount{{Source: "work", Target: "/workspace"}}, "is not absolute"},
		"missing source":  {"/workspace", []sandbox.Mount{{Source: f.work + "-gone", Target: "/workspace"}}, "workdir mount source"},
		"file source":     {"/workspace", []sandbox.Mount{{Source: f.file, Target: "/workspace"}}, "not a directory"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := runspec.ResolveWorkdir(sandbox.RuntimeSpec{ID: "rt-1", Workdir: tc.workdir, Mounts: tc.mounts})
			requireInvalid(t, err, tc.want)
		})
	}
}

func TestResolveDir(t *testing.T) {
	f := newFixture(t)
	got, err := runspec.ResolveDir(f.link)
	require.NoError(t, err)
	require.Equal(t, f.work, got)
	_, err = runspec.ResolveDir(f.file)
	require.ErrorContains(t, err, "not a directory")
	_, err = runspec.ResolveDir(f.work + "-gone")
	require.Error(t, err)
	require.Equal(t, "no such file or directory", runspec.ErrText(err))
}
