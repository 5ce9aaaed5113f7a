package fake

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/sandboxcore/sandboxcore/internal/runtime/remotefake"
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
	cache, err := moduleCache()
	if err != nil {
		return "", err
	}
	p := filepath.Join(cache, escapeModule(module)+"@"+version, "api", "openapi.yaml")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("daytonafake: %s is missing (go mod download %s@%s): %w", p, module, version, err)
	}
	return p, nil
}

// moduleCache is the Go module cache: GOMODCACHE, else `go env GOMODCACHE`
// (retried once: a go command can fail for a moment while another one
// rewrites its configuration), else the default $GOPATH/pkg/mod or
// $HOME/go/pkg/mod when that directory exists.
func moduleCache() (string, error) {
	if c := os.Getenv("GOMODCACHE"); c != "" {
		return c, nil
	}
	var errs []error
	for range 2 {
		cmd := exec.Command("go", "env", "GOMODCACHE")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if c := strings.TrimSpace(string(out)); err == nil && c != "" {
			return c, nil
		}
		errs = append(errs, fmt.Errorf("go env GOMODCACHE: %v: %s", err, strings.TrimSpace(stderr.String())))
	}
	for _, root := range []string{os.Getenv("GOPATH"), filepath.Join(os.Getenv("HOME"), "go")} {
		if first, _, _ := strings.Cut(root, string(os.PathListSeparator)); first != "" {
			if c := filepath.Join(first, "pkg", "mod"); isDir(c) {
				return c, nil
			}
		}
	}
	return "", fmt.Errorf("daytonafake: cannot find the Go module cache (set GOMODCACHE): %w", errors.Join(errs...))
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
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

// loadValidator loads the OpenAPI document file and returns its validator.
// Error responses are checked like the others: against the operation's
// documentation of their status, or, for a status it does not document
// (neither document describes the errors of the operations the adapter
// calls), against errorBody, the body Daytona's server writes for every
// error (apiErrorBody, toolboxErrorBody).
func loadValidator(name, file string, errorBody *openapi3.Schema) (*remotefake.Validator, error) {
	doc, err := openapi3.NewLoader().LoadFromFile(file)
	if err != nil {
		return nil, fmt.Errorf("daytonafake: load %s: %w", file, err)
	}
	v, err := remotefake.NewValidator(name, doc, errorBody)
	if err != nil {
		return nil, fmt.Errorf("daytonafake: router for %s: %w", file, err)
	}
	return v, nil
}

// apiErrorBody is the API's error body: what its AllExceptionsFilter writes
// for every error, {path, timestamp, statusCode, error, message}
// (apps/api/src/filters/all-exceptions.filter.ts:62-87 of daytonaio/daytona
// v0.190.0; writeError).
var apiErrorBody = openapi3.NewObjectSchema().
	WithProperty("path", openapi3.NewStringSchema()).
	WithProperty("timestamp", openapi3.NewDateTimeSchema()).
	WithProperty("statusCode", openapi3.NewIntegerSchema()).
	WithProperty("error", openapi3.NewStringSchema()).
	WithProperty("message", openapi3.NewStringSchema()).
	WithRequired([]string{"path", "timestamp", "statusCode", "error", "message"})

// toolboxErrorBody is the error body of the toolbox plane, the proxy's and
// the daemon's alike: both answer errors through common-go's error
// middleware, {statusCode, message, code, timestamp, path, method}, code
// and method omitted when empty (libs/common-go/pkg/errors/http.go:17-24
// and middleware.go:18-155 of daytonaio/daytona v0.190.0, used by
// apps/daemon/pkg/toolbox/server.go:149 and apps/proxy/pkg/proxy/proxy.go:161;
// writeError).
//
// Two handlers answer their own errors, bypassing the middleware, and are
// the other two shapes: the bulk upload's {"errors": [...], "files": [...]}
// and the bulk download's {"error": "..."} (apps/daemon/pkg/toolbox/fs/
// upload_files.go and download_files.go of v0.190.0; toolbox_bulk.go).
var toolboxErrorBody = openapi3.NewAnyOfSchema(
	openapi3.NewObjectSchema().
		WithProperty("statusCode", openapi3.NewIntegerSchema()).
		WithProperty("message", openapi3.NewStringSchema()).
		WithProperty("code", openapi3.NewStringSchema()).
		WithProperty("timestamp", openapi3.NewDateTimeSchema()).
		WithProperty("path", openapi3.NewStringSchema()).
		WithProperty("method", openapi3.NewStringSchema()).
		WithRequired([]string{"statusCode", "message", "timestamp", "path"}),
	openapi3.NewObjectSchema().
		WithProperty("errors", openapi3.NewArraySchema().WithItems(openapi3.NewStringSchema())).
		WithProperty("files", openapi3.NewArraySchema().WithItems(openapi3.NewObjectSchema())).
		WithRequired([]string{"errors"}),
	openapi3.NewObjectSchema().
		WithProperty("error", openapi3.NewStringSchema()).
		WithRequired([]string{"error"}),
)
