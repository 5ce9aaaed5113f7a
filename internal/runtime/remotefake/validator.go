// Package remotefake holds what the faithful stand-ins of the remote
// backends (daytona/daytonafake, e2b/e2bfake) share: validation of every
// request and response against the backend's published OpenAPI document
// (kin-openapi), the ledger of spec violations, request counts and injected
// faults, and the Docker containers their sandboxes run in
// (CONTRIBUTING.md "Test": a stand-in validates every request and response
// against the published specification and runs commands for real).
package remotefake

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// Validator checks requests and responses against one OpenAPI document.
type Validator struct {
	// opaque: operation ids whose response bodies are not decoded (only
	// their status, headers and media type are checked): SkipResponseBody.
	opaque map[string]bool

	name   string
	router routers.Router
	// errorBody is the backend's error body: the schema of an error
	// response whose status its operation does not document.
	errorBody *openapi3.Schema
}

// NewValidator returns the validator of doc, named name in its messages.
// Routes are matched on the path alone (doc's servers are dropped: the fake
// is the server); examples are not checked (published documents carry
// examples that do not match their own schemas).
//
// Error responses are checked like the others: one whose status its
// operation documents against that documentation; one whose status it does
// not (the published documents list few of the errors their servers
// answer, e.g. E2B's create documents no 404 and no 429) against
// errorBody, the backend's error body as its server writes it, which then
// must be JSON. With errorBody nil such a response is a violation, as any
// undocumented status is. Errors: the router's.
func NewValidator(name string, doc *openapi3.T, errorBody *openapi3.Schema) (*Validator, error) {
	doc.Servers = nil
	r, err := legacy.NewRouter(doc, openapi3.DisableExamplesValidation())
	if err != nil {
		return nil, err
	}
	return &Validator{name: name, router: r, errorBody: errorBody}, nil
}

var validationOptions = &openapi3filter.Options{
	// The fakes check keys and tokens themselves (401 like the backend);
	// here only the shape of the request matters.
	AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
	MultiError:         true,
}

// CheckRequest validates req (whose URL path is the document's path) and
// returns its route, path parameters and the input CheckResponse needs.
// The body is read and restored. Errors: no operation of the document
// matches (no route returned), or the request violates it (the route is
// returned).
func (v *Validator) CheckRequest(ctx context.Context, req *http.Request) (*routers.Route, map[string]string, *openapi3filter.RequestValidationInput, error) {
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
		return route, params, nil, fmt.Errorf("%s: request %s %s%s violates the spec: %w", v.name, req.Method, req.URL.Path, opID(route), err)
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	return route, params, in, nil
}

// CheckResponse validates a recorded response to the request of in: its
// status must be one the operation documents, its headers and body their
// schemas, or an error status the operation does not document, its body
// the backend's error body (NewValidator). Errors: the violation.
func (v *Validator) CheckResponse(ctx context.Context, in *openapi3filter.RequestValidationInput, rec *httptest.ResponseRecorder) error {
	if rec.Code >= 400 && v.errorBody != nil && in.Route != nil && in.Route.Operation != nil {
		if rs := in.Route.Operation.Responses; rs != nil && rs.Status(rec.Code) == nil && rs.Default() == nil {
			if err := checkErrorBody(v.errorBody, rec); err != nil {
				return fmt.Errorf("%s: error response %d to %s %s%s is not the backend's error body: %w", v.name, rec.Code, in.Request.Method, in.Request.URL.Path, opID(in.Route), err)
			}
			return nil
		}
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: rec.Code, Header: rec.Header(),
		Body:    io.NopCloser(bytes.NewReader(rec.Body.Bytes())),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true, ExcludeResponseBody: v.isOpaque(in)},
	}
	err := openapi3filter.ValidateResponse(ctx, out)
	if err == nil && out.Options.ExcludeResponseBody {
		err = checkMediaType(in.Route.Operation, rec)
	}
	if err != nil {
		return fmt.Errorf("%s: response %d to %s %s%s violates the spec: %w", v.name, rec.Code, in.Request.Method, in.Request.URL.Path, opID(in.Route), err)
	}
	return nil
}

// checkErrorBody checks an undocumented error response against the
// backend's error body: JSON, matching schema.
func checkErrorBody(schema *openapi3.Schema, rec *httptest.ResponseRecorder) error {
	mt, _, err := mime.ParseMediaType(rec.Header().Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return fmt.Errorf("content type %q, not application/json", rec.Header().Get("Content-Type"))
	}
	var body any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return schema.VisitJSON(body, openapi3.MultiErrors())
}

// opID is " (operationId)" of a route, or "" when it has none.
func opID(route *routers.Route) string {
	if route == nil || route.Operation == nil || route.Operation.OperationID == "" {
		return ""
	}
	return " (" + route.Operation.OperationID + ")"
}

// SkipResponseBody stops decoding the response bodies of the operations
// named by their ids (their status, headers and media type are still
// checked): for a body the document describes with a schema kin-openapi
// cannot decode, such as a multipart/form-data response whose schema is an
// object of additionalProperties, which the backend's answers never match
// in kin-openapi's reading (the fake's own tests check those bodies).
// Call it before serving.
func (v *Validator) SkipResponseBody(operationIDs ...string) {
	if v.opaque == nil {
		v.opaque = map[string]bool{}
	}
	for _, id := range operationIDs {
		v.opaque[id] = true
	}
}

// isOpaque tells whether the response to the request of in is not decoded
// (SkipResponseBody).
func (v *Validator) isOpaque(in *openapi3filter.RequestValidationInput) bool {
	return in.Route != nil && in.Route.Operation != nil && v.opaque[in.Route.Operation.OperationID]
}

// checkMediaType checks that rec's Content-Type is one op documents for
// rec's status (any, when it documents no content).
func checkMediaType(op *openapi3.Operation, rec *httptest.ResponseRecorder) error {
	resp := op.Responses.Status(rec.Code)
	if resp == nil {
		resp = op.Responses.Default()
	}
	if resp == nil || resp.Value == nil || len(resp.Value.Content) == 0 {
		return nil
	}
	if ct := rec.Header().Get("Content-Type"); resp.Value.Content.Get(ct) == nil {
		return fmt.Errorf("response Content-Type %q is not documented", ct)
	}
	return nil
}
