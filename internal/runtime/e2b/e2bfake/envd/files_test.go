package main

import (
	"bytes"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"os/user"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A multipart upload without a path query writes each part at its whole
// filename, directories included (envd's CustomPart.FileNameWithPath), a
// relative one below the user's home: the SDKs' files.write of several
// files names each part by its path.
func TestUploadPartsKeepTheirPaths(t *testing.T) {
	cur, err := user.Current()
	require.NoError(t, err)
	u := *cur
	u.HomeDir = t.TempDir()
	abs := filepath.Join(t.TempDir(), "deep", "a.txt")
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for name, data := range map[string]string{abs: "a", "rel/b.txt": "b"} {
		w, err := mw.CreateFormFile("file", name)
		require.NoError(t, err)
		_, _ = w.Write([]byte(data))
	}
	require.NoError(t, mw.Close())
	req := httptest.NewRequest(http.MethodPost, "/files", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	rec := httptest.NewRecorder()
	(&server{}).upload(rec, req, &u)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var written []entry
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &written))
	require.ElementsMatch(t, []entry{
		{Path: abs, Name: "a.txt", Type: "file"},
		{Path: filepath.Join(u.HomeDir, "rel", "b.txt"), Name: "b.txt", Type: "file"},
	}, written)
	got, err := os.ReadFile(abs)
	require.NoError(t, err)
	require.Equal(t, "a", string(got))
	got, err = os.ReadFile(filepath.Join(u.HomeDir, "rel", "b.txt"))
	require.NoError(t, err)
	require.Equal(t, "b", string(got))
}
