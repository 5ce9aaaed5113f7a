package runtimetest

import (
	"maps"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// hostMounts: a provider that reports HostMounts shares a host directory
// mounted at its own path with the runtime live, both ways (what the
// dependency caches rely on, docs/RUNTIMES.md "Dependency caches"); one that
// does not is skipped.
func (s *suite) hostMounts(t *testing.T) {
	env := s.newEnv(t)
	if !env.Provider.Capabilities().HostMounts {
		t.Skip("the provider does not report HostMounts")
	}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "from-host"), []byte("host\n"), 0o644))
	if env.HostDir != "" {
		// Owned like the worktree, as the worker makes a cache directory.
		if fi, err := os.Stat(env.HostDir); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
				require.NoError(t, os.Chown(dir, int(st.Uid), int(st.Gid)))
			}
		}
	}
	ctx, _, rt := s.create(t, env, func(spec *sandbox.RuntimeSpec) {
		spec.Mounts = append(spec.Mounts, sandbox.Mount{Source: dir, Target: dir, Writable: true})
		spec.Env = maps.Clone(spec.Env)
		if spec.Env == nil {
			spec.Env = map[string]string{}
		}
		spec.Env["CACHE_DIR"] = dir
	})
	res, err := rt.Exec(ctx, sandboxapi.ExecRequest{Cmd: sh(`cat "$CACHE_DIR/from-host" && echo runtime > "$CACHE_DIR/from-runtime"`), TimeoutS: 30})
	require.NoError(t, err)
	requireExit(t, res, 0)
	assert.Equal(t, "host\n", string(res.Stdout))
	b, err := os.ReadFile(filepath.Join(dir, "from-runtime"))
	require.NoError(t, err, "the runtime's write is on the host")
	assert.Equal(t, "runtime\n", string(b))
}
