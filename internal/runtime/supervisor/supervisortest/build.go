// Package supervisortest builds the sandbox-supervisor binary for tests
// (the runtimes need it on disk; a test binary is not it).
package supervisortest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

var (
	once  sync.Once
	built string
	fail  string
)

// Binary returns the path of a sandbox-supervisor built (statically, as
// `make build` does) from this module, once per test process, into a
// directory under os.TempDir() named after the module's location and
// replaced atomically (concurrent test processes share it). A failed build
// fails the test.
func Binary(t testing.TB) string {
	t.Helper()
	p, err := Build()
	if err != nil {
		t.Fatalf("supervisortest: %v", err)
	}
	return p
}

// Build is Binary for a TestMain: it returns the path or why the build failed.
func Build() (string, error) {
	once.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", "..", ".."))
		sum := sha256.Sum256([]byte(root))
		dir := filepath.Join(os.TempDir(), "sandboxcore-supervisor-"+hex.EncodeToString(sum[:6]))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fail = err.Error()
			return
		}
		tmp, err := os.CreateTemp(dir, ".build-")
		if err != nil {
			fail = err.Error()
			return
		}
		_ = tmp.Close()
		cmd := exec.Command("go", "build", "-o", tmp.Name(), "./supervisor")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			_ = os.Remove(tmp.Name())
			fail = "go build ./supervisor: " + err.Error() + ": " + strings.TrimSpace(string(out))
			return
		}
		final := filepath.Join(dir, "sandbox-supervisor")
		if err := os.Rename(tmp.Name(), final); err != nil {
			fail = err.Error()
			return
		}
		built = final
	})
	if built == "" {
		return "", errors.New(fail)
	}
	return built, nil
}
