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
	"runtime/debug"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// The two generated client modules whose api/openapi.yaml documents the fake
// validates against: the same version the adapter is built with.
const (
	APIModule     = "github.com/daytonaio/daytona/libs/api-client-go"
	ToolboxModule = "github.com/daytonaio/daytona/libs/toolbox-api-client-go"
	// SpecVersion is the version of both modules (go.mod pins it).
	SpecVersion = "v0.190.0"
)

// SpecPath returns the path of module's api/openapi.yaml in the Go module
// cache (GOMODCACHE, else `go env GOMODCACHE`), for the version this binary
// was built with (SpecVersion when the build info does not say).
func SpecPath(module string) (string, error) {
	version := SpecVersion
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == module {
				version = d.Version
				if d.Replace != nil {
					version = d.Replace.Version
				}
			}
		}
	}
	cache := os.Getenv("GOMODCACHE")
	if cache == "" {
		out, err := exec.Command("go", "env", "GOMODCACHE").Output()
		if err != nil {
			return "", fmt.Errorf("daytonafake: cannot find the Go module cache (set GOMODCACHE): %w", err)
		}
		cache = strings.TrimSpace(string(out))
	}
	p := filepath.Join(cache, escapeModule(module)+"@"+version, "api", "openapi.yaml")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("daytonafake: %s is missing (go mod download %s@%s): %w", p, module, version, err)
	}
	return p, nil
}

// escapeModule applies the module cache's case encoding (!x for X).
func escapeModule(m string) string {
	var b strings.Builder
	for _, r := range m {
		if r >= 'A' && r <= 'Z' {
			b.WriteByte('!')
			b.WriteRune(r + ('a' - 'A'))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// validator checks requests and responses of one OpenAPI document.
type validator struct {
	name   string
	router routers.Router
}

func loadValidator(name, file string) (*validator, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(file)
	if err != nil {
		return nil, fmt.Errorf("daytonafake: load %s: %w", file, err)
	}
	// Routes are matched on the path below the fake's own prefix.
	doc.Servers = nil
	// The published documents carry examples that do not match their own
	// schemas (e.g. CompletionItem.documentation): examples are not checked.
	r, err := legacy.NewRouter(doc, openapi3.DisableExamplesValidation())
	if err != nil {
		return nil, fmt.Errorf("daytonafake: router for %s: %w", file, err)
	}
	return &validator{name: name, router: r}, nil
}

var validationOptions = &openapi3filter.Options{
	// The fake checks the API key itself (401 like Daytona); here only the
	// shape of the request matters.
	AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
	MultiError:         true,
}

// checkRequest validates req (whose URL path is the spec path) and returns
// the route. The body is read and restored.
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
		return route, params, nil, fmt.Errorf("%s: request %s %s (%s) violates the spec: %w", v.name, req.Method, req.URL.Path, route.Operation.OperationID, err)
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	return route, params, in, nil
}

// checkResponse validates a recorded response against the route.
func (v *validator) checkResponse(ctx context.Context, in *openapi3filter.RequestValidationInput, rec *httptest.ResponseRecorder) error {
	if rec.Code >= 400 {
		// Error statuses are not described by the documents (Daytona's error
		// bodies are {statusCode, message, error}); nothing to check.
		return nil
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: rec.Code, Header: rec.Header(),
		Body:    io.NopCloser(bytes.NewReader(rec.Body.Bytes())),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		return fmt.Errorf("%s: response %d to %s (%s) violates the spec: %w", v.name, rec.Code, in.Request.URL.Path, in.Route.Operation.OperationID, err)
	}
	return nil
}
