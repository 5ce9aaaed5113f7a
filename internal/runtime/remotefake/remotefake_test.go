package remotefake

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/stretchr/testify/require"
)

const testDoc = `openapi: 3.0.3
info: {title: t, version: "1"}
servers: [{url: "https://api.example.com/v1"}]
paths:
  /things/{id}:
    get:
      operationId: getThing
      parameters:
        - {name: id, in: path, required: true, schema: {type: string, pattern: "^[a-z]+$"}}
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema: {type: object, required: [id], properties: {id: {type: string}}}
`

// testErrorBody is the test backend's error body {code, message}.
var testErrorBody = openapi3.NewObjectSchema().
	WithProperty("code", openapi3.NewIntegerSchema()).
	WithProperty("message", openapi3.NewStringSchema()).
	WithRequired([]string{"code", "message"})

func testValidator(t *testing.T, errorBody *openapi3.Schema) *Validator {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData([]byte(testDoc))
	require.NoError(t, err)
	v, err := NewValidator("test", doc, errorBody)
	require.NoError(t, err)
	return v
}

func writeTestError(w http.ResponseWriter, _ *http.Request, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"code": status, "message": msg})
}

// A multipart response documented as an object of additionalProperties
// (Daytona's DownloadFiles): kin-openapi cannot decode the backend's answer
// into it, so its body is skipped; the media type is still checked.
const multipartDoc = `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /files:
    post:
      operationId: DownloadFiles
      responses:
        "200":
          description: ok
          content:
            multipart/form-data:
              schema: {type: object, additionalProperties: {type: object}}
`

func TestValidatorSkipResponseBody(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData([]byte(multipartDoc))
	require.NoError(t, err)
	r, err := legacy.NewRouter(doc, openapi3.DisableExamplesValidation())
	require.NoError(t, err)
	v := &Validator{name: "test", router: r} // NewValidator's, with no other option
	req := httptest.NewRequest(http.MethodPost, "/files", nil)
	_, _, in, err := v.CheckRequest(req.Context(), req)
	require.NoError(t, err)
	answer := func(ct string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		rec.Header().Set("Content-Type", ct)
		rec.WriteHeader(200)
		rec.WriteString("--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/a\"\r\n\r\ndata\r\n--B--\r\n")
		return rec
	}
	require.ErrorContains(t, v.CheckResponse(req.Context(), in, answer("multipart/form-data; boundary=B")), "part file: undefined",
		"kin-openapi's reading of the schema")
	v.SkipResponseBody("DownloadFiles")
	require.NoError(t, v.CheckResponse(req.Context(), in, answer("multipart/form-data; boundary=B")))
	require.ErrorContains(t, v.CheckResponse(req.Context(), in, answer("application/json")), `response Content-Type "application/json" is not documented`)
}

func TestValidatorRequests(t *testing.T) {
	v := testValidator(t, nil)
	req := httptest.NewRequest(http.MethodGet, "/things/abc", nil)
	route, params, in, err := v.CheckRequest(req.Context(), req)
	require.NoError(t, err)
	require.Equal(t, "getThing", route.Operation.OperationID)
	require.Equal(t, "abc", params["id"])
	require.NotNil(t, in)

	bad := httptest.NewRequest(http.MethodGet, "/things/ABC", nil)
	route, _, _, err = v.CheckRequest(bad.Context(), bad)
	require.NotNil(t, route)
	require.ErrorContains(t, err, "test: request GET /things/ABC (getThing) violates the spec")

	missing := httptest.NewRequest(http.MethodPost, "/nothing", nil)
	route, _, _, err = v.CheckRequest(missing.Context(), missing)
	require.Nil(t, route)
	require.ErrorContains(t, err, "test: no operation POST /nothing in the spec")
}

func TestValidatorResponses(t *testing.T) {
	for _, errorBody := range []*openapi3.Schema{nil, testErrorBody} {
		v := testValidator(t, errorBody)
		req := httptest.NewRequest(http.MethodGet, "/things/abc", nil)
		_, _, in, err := v.CheckRequest(req.Context(), req)
		require.NoError(t, err)
		good := httptest.NewRecorder()
		good.Header().Set("Content-Type", "application/json")
		good.WriteHeader(200)
		good.WriteString(`{"id":"abc"}`)
		require.NoError(t, v.CheckResponse(req.Context(), in, good))
		wrong := httptest.NewRecorder()
		wrong.Header().Set("Content-Type", "application/json")
		wrong.WriteHeader(200)
		wrong.WriteString(`{"name":"abc"}`)
		require.ErrorContains(t, v.CheckResponse(req.Context(), in, wrong), "test: response 200 to GET /things/abc (getThing) violates the spec")
		undocumented := httptest.NewRecorder()
		writeTestError(undocumented, req, 404, "no such thing")
		err = v.CheckResponse(req.Context(), in, undocumented)
		if errorBody != nil {
			require.NoError(t, err, "an undocumented error status with the backend's error body")
		} else {
			require.Error(t, err, "an undocumented status is a violation")
		}
		for _, bad := range []string{`{"error":"no such thing"}`, `no such thing`} {
			other := httptest.NewRecorder()
			other.Header().Set("Content-Type", "application/json")
			other.WriteHeader(404)
			other.WriteString(bad)
			require.Error(t, v.CheckResponse(req.Context(), in, other), "%s is not the error body", bad)
		}
		ok := httptest.NewRecorder()
		ok.WriteHeader(204)
		require.Error(t, v.CheckResponse(req.Context(), in, ok), "an undocumented success status is a violation")
	}
}

func TestLedgerFaultsMatchCountAndExpire(t *testing.T) {
	l := NewLedger("testfake", slog.Default(), writeTestError)
	l.Inject(Fault{Operation: "getThing", Status: 503, Times: 2})
	l.Inject(Fault{Status: 500})
	require.Equal(t, 503, l.TakeFault("getThing").Status)
	require.Equal(t, 500, l.TakeFault("other").Status, "the catch-all matches another operation")
	require.Equal(t, 503, l.TakeFault("getThing").Status)
	require.Nil(t, l.TakeFault("getThing"), "both faults are spent")
	require.Equal(t, map[string]int{"getThing": 3, "other": 1}, l.Requests())
	l.Inject(Fault{Status: 500, Times: 5})
	l.ClearFaults()
	require.Nil(t, l.TakeFault("x"))
}

func TestLedgerApply(t *testing.T) {
	l := NewLedger("testfake", slog.Default(), writeTestError)
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	w := httptest.NewRecorder()
	require.False(t, l.Apply(w, r, nil))
	require.False(t, l.Apply(w, r, &Fault{Delay: time.Millisecond}), "a delay alone lets the request through")
	require.True(t, l.Apply(w, r, &Fault{Status: 429, Header: map[string]string{"Retry-After": "3"}}))
	require.Equal(t, 429, w.Code)
	require.Equal(t, "3", w.Header().Get("Retry-After"))
	require.JSONEq(t, `{"code":429,"message":"Too Many Requests"}`, w.Body.String())
	w = httptest.NewRecorder()
	require.True(t, l.Apply(w, r, &Fault{Status: 409, Body: `{"id":"x","message":"busy","code":409}`}))
	require.Equal(t, 409, w.Code)
	require.Equal(t, "application/json", w.Header().Get("Content-Type"))
	require.Equal(t, `{"id":"x","message":"busy","code":409}`, w.Body.String(), "the body as it is")
}

func TestLedgerCheckRequestAndReply(t *testing.T) {
	l := NewLedger("testfake", slog.Default(), writeTestError)
	v := testValidator(t, nil)
	w := httptest.NewRecorder()
	_, _, _, ok := l.CheckRequest(w, httptest.NewRequest(http.MethodGet, "/things/ABC", nil), v)
	require.False(t, ok)
	require.Equal(t, 400, w.Code)
	require.Len(t, l.Violations(), 1)

	r := httptest.NewRequest(http.MethodGet, "/things/abc", nil)
	_, _, in, ok := l.CheckRequest(httptest.NewRecorder(), r, v)
	require.True(t, ok)
	rec := httptest.NewRecorder()
	rec.Header().Set("Content-Type", "application/json")
	rec.WriteHeader(200)
	rec.WriteString(`{"id":"abc"}`)
	w = httptest.NewRecorder()
	l.Reply(w, v, in, rec, nil)
	require.Equal(t, 200, w.Code)
	require.Equal(t, `{"id":"abc"}`, w.Body.String())
	require.Equal(t, "application/json", w.Header().Get("Content-Type"))

	bad := httptest.NewRecorder()
	bad.Header().Set("Content-Type", "application/json")
	bad.WriteHeader(200)
	bad.WriteString(`{}`)
	w = httptest.NewRecorder()
	l.Reply(w, v, in, bad, nil)
	require.Equal(t, 500, w.Code)
	require.True(t, strings.Contains(w.Body.String(), "testfake: test: response 200"), w.Body.String())
	require.Len(t, l.Violations(), 2)
}

func TestReplyDropsTheConnection(t *testing.T) {
	l := NewLedger("testfake", slog.Default(), writeTestError)
	v := testValidator(t, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _, in, ok := l.CheckRequest(w, r, v)
		if !ok {
			return
		}
		rec := httptest.NewRecorder()
		rec.Header().Set("Content-Type", "application/json")
		rec.WriteHeader(200)
		rec.WriteString(`{"id":"abc"}`)
		l.Reply(w, v, in, rec, &Fault{Drop: true})
	}))
	defer srv.Close()
	_, err := http.Get(srv.URL + "/things/abc")
	require.Error(t, err, "the answer is dropped")
	require.Empty(t, l.Violations())
}
