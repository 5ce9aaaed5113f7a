package fake

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/sandboxcore/sandboxcore/internal/runtime/e2b/spec"
	"github.com/sandboxcore/sandboxcore/internal/runtime/remotefake"
)

// loadValidators returns the validators of the control plane's document
// and of envd's. Error responses are checked like the others: against the
// operation's documentation of their status, or, for the statuses it does
// not document (E2B's create documents no 404 and no 429, its timeout no
// 400 and no 409, yet the server answers each), against the document's own
// Error schema, the body E2B writes for every error
// (packages/shared/pkg/apierrors/apierrors.go:32-44 of e2b-dev/infra).
func loadValidators() (*remotefake.Validator, *remotefake.Validator, error) {
	api, err := newValidator("e2b api", spec.OpenAPI)
	if err != nil {
		return nil, nil, err
	}
	envd, err := newValidator("envd", spec.EnvdOpenAPI)
	if err != nil {
		return nil, nil, err
	}
	return api, envd, nil
}

func newValidator(name string, data []byte) (*remotefake.Validator, error) {
	d, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("e2bfake: load the %s document: %w", name, err)
	}
	errRef := d.Components.Schemas["Error"]
	if errRef == nil || errRef.Value == nil {
		return nil, fmt.Errorf("e2bfake: the %s document has no Error schema", name)
	}
	v, err := remotefake.NewValidator(name, d, errRef.Value)
	if err != nil {
		return nil, fmt.Errorf("e2bfake: router for the %s document: %w", name, err)
	}
	return v, nil
}

var (
	buildOnce sync.Once
	buildBin  []byte
	buildErr  error
)

// buildEnvd builds the envd stand-in (the command ../envd) for Linux,
// statically, once per process, and writes it into dir. It needs the Go
// toolchain and this source tree (the fake is a development and test tool).
func buildEnvd(dir string) (string, error) {
	buildOnce.Do(func() {
		_, self, _, ok := runtime.Caller(0)
		if !ok {
			buildErr = fmt.Errorf("e2bfake: cannot locate the envd source")
			return
		}
		src := filepath.Join(filepath.Dir(self), "..", "envd")
		out := filepath.Join(dir, "envd.build")
		cmd := exec.Command("go", "build", "-trimpath", "-o", out, ".")
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if b, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("e2bfake: build envd in %s: %v: %s", src, err, b)
			return
		}
		buildBin, buildErr = os.ReadFile(out)
		_ = os.Remove(out)
	})
	if buildErr != nil {
		return "", buildErr
	}
	p := filepath.Join(dir, "envd")
	if err := os.WriteFile(p, buildBin, 0o755); err != nil {
		return "", err
	}
	return p, nil
}
