package fake

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// The parts of a bulk download are named like the daemon's
// (download_files.go, multipartContentDisposition at v0.190.0): the SDKs
// match each part to the path asked by its filename.
func TestContentDisposition(t *testing.T) {
	require.Equal(t, `form-data; name="file"; filename="/home/daytona/a b.txt"; filename*=utf-8''%2Fhome%2Fdaytona%2Fa%20b.txt`,
		contentDisposition("file", "/home/daytona/a b.txt"))
	require.Equal(t, "form-data; name=\"error\"; filename=\"/x/\\\"q\\\"\\\\_\xe9\"; filename*=utf-8''%2Fx%2F%22q%22%5C%E2%82%AC%C3%A9",
		contentDisposition("error", "/x/\"q\"\\€é"), "quotes escaped, Latin-1 as its byte, beyond it replaced; all percent-encoded in filename*")
	require.Equal(t, `form-data; name="file"; filename="/a_b"; filename*=utf-8''%2Fa%0A%09b`, contentDisposition("file", "/a\n\tb"),
		"CR and LF removed, other control characters replaced")
}

func TestDownloadError(t *testing.T) {
	for _, tc := range []struct {
		err          error
		status       int
		code, prefix string
	}{
		{nil, 0, "", ""},
		{errNoFile, http.StatusNotFound, "FILE_NOT_FOUND", "file not found: /p"},
		{errIsDir, http.StatusBadRequest, "INVALID_FILE_PATH", "invalid file path: path points to a directory: /p"},
		{errPermission, http.StatusForbidden, "FILE_ACCESS_DENIED", "permission denied: /p"},
		{errors.New("boom"), http.StatusInternalServerError, "FILE_READ_FAILED", "failed to open file: boom"},
	} {
		status, code, msg := downloadError("/p", tc.err)
		require.Equal(t, tc.status, status, "%v", tc.err)
		require.Equal(t, tc.code, code)
		require.Equal(t, tc.prefix, msg)
	}
	require.Equal(t, "/home/daytona/rel", daemonPath("rel"))
	require.Equal(t, "/abs", daemonPath("/abs"))
}

// The toolbox's error body admits the middleware's shape and the bulk
// handlers' own two, nothing else.
func TestToolboxErrorBodyShapes(t *testing.T) {
	for _, ok := range []string{
		`{"statusCode":404,"message":"file not found","timestamp":"2026-01-01T00:00:00Z","path":"/files"}`,
		`{"errors":["a: permission denied"],"files":[{"path":"b","bytes":2}]}`,
		`{"error":"request body must be {\"paths\": [ ... ]} and non-empty"}`,
	} {
		var v any
		require.NoError(t, json.Unmarshal([]byte(ok), &v))
		require.NoError(t, toolboxErrorBody.VisitJSON(v), ok)
	}
	for _, bad := range []string{`{"message":"x"}`, `{"errors":"x"}`, `{"error":3}`, `"oops"`} {
		var v any
		require.NoError(t, json.Unmarshal([]byte(bad), &v))
		require.Error(t, toolboxErrorBody.VisitJSON(v), bad)
	}
}
