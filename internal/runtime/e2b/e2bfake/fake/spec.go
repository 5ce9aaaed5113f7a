package fake

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/sandboxcore/sandboxcore/internal/runtime/e2b/spec"
)

// validator checks requests and responses of one OpenAPI document.
type validator struct {
	name   string
	router routers.Router
}

func loadValidators() (*validator, *validator, error) {
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

func newValidator(name string, doc []byte) (*validator, error) {
	loader := openapi3.NewLoader()
	d, err := loader.LoadFromData(doc)
	if err != nil {
		return nil, fmt.Errorf("e2bfake: load the %s document: %w", name, err)
	}
	// Routes are matched on the path alone (the fake is the server).
	d.Servers = nil
	r, err := legacy.NewRouter(d, openapi3.DisableExamplesValidation())
	if err != nil {
		return nil, fmt.Errorf("e2bfake: router for the %s document: %w", name, err)
	}
	return &validator{name: name, router: r}, nil
}

var validationOptions = &openapi3filter.Options{
	// The fake checks the key and token itself (401 like E2B); here only the
	// shape of the request matters.
	AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
	MultiError:         true,
}

// checkRequest validates req and returns its route. The body is read and restored.
func (v *validator) checkRequest(ctx context.Context, req *http.Request) (*routers.Route, map[string]string, *openapi3filter.RequestValidationInput, error) {
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: no operation %s %s in the spec: %w", v.name, req.Method, req.URL.Path, err)
	}
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: validationOptions}
	if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
		return route, params, nil, fmt.Errorf("%s: request %s %s violates the spec: %w", v.name, req.Method, req.URL.Path, err)
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	return route, params, in, nil
}

// checkResponse validates a recorded response (its status must be one the
// operation documents).
func (v *validator) checkResponse(ctx context.Context, in *openapi3filter.RequestValidationInput, rec *httptest.ResponseRecorder) error {
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: rec.Code, Header: rec.Header(),
		Body:    io.NopCloser(bytes.NewReader(rec.Body.Bytes())),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		return fmt.Errorf("%s: response %d to %s %s violates the spec: %w", v.name, rec.Code, in.Request.Method, in.Request.URL.Path, err)
	}
	return nil
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
