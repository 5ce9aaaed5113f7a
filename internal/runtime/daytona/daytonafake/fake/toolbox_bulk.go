package fake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"path"
	"strconv"
	"strings"
	"time"
)

// The toolbox's bulk file endpoints, which Daytona's own SDKs use for every
// upload and download (FileSystem.uploadFile and downloadFile call them with
// one file), with the semantics of the daemon's handlers at v0.190.0
// (apps/daemon/pkg/toolbox/fs/upload_files.go and download_files.go).

// daemonWorkDir is the toolbox daemon's working directory: the image's
// WORKDIR, else the sandbox user's home (the runner sets
// DAYTONA_USER_HOME_AS_WORKDIR, apps/runner/pkg/docker/container_configs.go,
// and the daemon changes to the home, apps/daemon/cmd/daemon/main.go, at
// v0.190.0). The sandboxes' image (.ci/test-image.sh) has no WORKDIR.
const daemonWorkDir = SandboxHome

// daemonPath is p as the daemon opens it: relative to its working directory.
func daemonPath(p string) string {
	if strings.HasPrefix(p, "/") {
		return p
	}
	return path.Join(daemonWorkDir, p)
}

// bulkUploadFile is one written file of POST /files/bulk-upload.
type bulkUploadFile struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

// uploadFiles serves POST /files/bulk-upload (UploadFiles): a multipart
// form of files[i].path fields, each followed by its files[i].file part.
// Every file is written even when another fails; the answer lists those
// written ({"files": [...]}, 200), with {"errors": [...]} and 400 when any
// failed (upload_files.go, UploadFiles).
func (s *Server) uploadFiles(ctx context.Context, c *call, cid string) {
	reader, err := c.r.MultipartReader()
	if err != nil {
		c.json(http.StatusBadRequest, map[string]any{"errors": []string{"invalid multipart form"}})
		return
	}
	dests := map[string]string{}
	errs := []string{}
	files := []bulkUploadFile{}
	for {
		part, err := reader.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("reading part: %v", err))
			break
		}
		name := part.FormName()
		idx := strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(name, "files["), "].path"), "].file")
		switch {
		case strings.HasSuffix(name, ".path"):
			data, err := io.ReadAll(part)
			if err != nil {
				errs = append(errs, fmt.Sprintf("path[%s]: %v", idx, err))
				continue
			}
			dest := strings.TrimSpace(string(data))
			if dest == "" {
				errs = append(errs, fmt.Sprintf("path[%s]: empty path", idx))
				continue
			}
			dests[idx] = dest
		case strings.HasSuffix(name, ".file"):
			dest, ok := dests[idx]
			if !ok {
				errs = append(errs, fmt.Sprintf("file[%s]: missing .path metadata", idx))
				continue
			}
			data, err := io.ReadAll(part)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s: write: %v", dest, err))
				continue
			}
			if err := s.eng.writeFile(ctx, cid, daemonPath(dest), data); err != nil {
				errs = append(errs, fmt.Sprintf("%s: create: %v", dest, err))
				continue
			}
			files = append(files, bulkUploadFile{Path: dest, Bytes: int64(len(data))})
		}
	}
	if len(errs) > 0 {
		c.json(http.StatusBadRequest, map[string]any{"errors": errs, "files": files})
		return
	}
	c.json(http.StatusOK, map[string]any{"files": files})
}

// downloadBoundary is the daemon's multipart boundary (download_files.go).
const downloadBoundary = "DAYTONA-FILE-BOUNDARY"

// downloadFiles serves POST /files/bulk-download (DownloadFiles): 200 with a
// multipart/form-data body holding, in the order asked, a part named
// "file" per file read (its Content-Type by extension, Content-Length) or
// a part named "error" with the daemon's ErrorResponse JSON; each part's
// filename is the path as asked (DownloadFiles, openDownloadFile,
// classifyPathStatError).
func (s *Server) downloadFiles(ctx context.Context, c *call, cid string) {
	var req struct {
		Paths []string `json:"paths"`
	}
	if err := json.NewDecoder(c.r.Body).Decode(&req); err != nil || len(req.Paths) == 0 {
		c.json(http.StatusBadRequest, map[string]any{"error": `request body must be {"paths": [ ... ]} and non-empty`})
		return
	}
	c.w.Header().Set("Content-Type", "multipart/form-data; boundary="+downloadBoundary)
	c.w.WriteHeader(http.StatusOK)
	mw := multipart.NewWriter(c.w)
	_ = mw.SetBoundary(downloadBoundary)
	for _, p := range req.Paths {
		var data []byte
		status, code, msg := http.StatusBadRequest, "INVALID_FILE_PATH", "invalid file path: path is empty"
		if p != "" {
			var err error
			data, err = s.eng.readFile(ctx, cid, daemonPath(p), 4<<30)
			status, code, msg = downloadError(p, err)
		}
		if status != 0 {
			body, _ := json.Marshal(map[string]any{
				"statusCode": status, "message": msg, "code": code,
				"timestamp": time.Now().UTC().Format(time.RFC3339Nano), "path": p, "method": c.r.Method,
			})
			h := textproto.MIMEHeader{}
			h.Set("Content-Type", "application/json; charset=utf-8")
			h.Set("Content-Disposition", contentDisposition("error", p))
			if w, err := mw.CreatePart(h); err == nil {
				_, _ = w.Write(body)
			}
			continue
		}
		ctype := mime.TypeByExtension(path.Ext(p))
		if ctype == "" {
			ctype = "application/octet-stream"
		}
		h := textproto.MIMEHeader{}
		h.Set("Content-Type", ctype)
		h.Set("Content-Disposition", contentDisposition("file", p))
		h.Set("Content-Length", strconv.Itoa(len(data)))
		w, err := mw.CreatePart(h)
		if err != nil {
			return
		}
		_, _ = w.Write(data)
	}
	_ = mw.Close()
}

// downloadError classifies a failed read as the daemon does
// (classifyPathStatError, classifyOpenFileError): status 0 when err is nil.
func downloadError(p string, err error) (int, string, string) {
	switch {
	case err == nil:
		return 0, "", ""
	case errors.Is(err, errNoFile):
		return http.StatusNotFound, "FILE_NOT_FOUND", "file not found: " + p
	case errors.Is(err, errIsDir):
		return http.StatusBadRequest, "INVALID_FILE_PATH", "invalid file path: path points to a directory: " + p
	case errors.Is(err, errPermission):
		return http.StatusForbidden, "FILE_ACCESS_DENIED", "permission denied: " + p
	}
	return http.StatusInternalServerError, "FILE_READ_FAILED", fmt.Sprintf("failed to open file: %v", err)
}

// contentDisposition is the daemon's multipartContentDisposition: the path
// as a Latin-1 filename and as an RFC 5987 filename*.
func contentDisposition(form, p string) string {
	latin1 := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\r", "", "\n", "", "\x00", "").Replace(p)
	var b, enc strings.Builder
	for _, r := range latin1 {
		if r > 0xff || r < 0x20 || r == 0x7f {
			b.WriteByte('_')
		} else {
			b.WriteByte(byte(r))
		}
	}
	for _, c := range []byte(p) {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$&+-.^_`|~", c) >= 0 {
			enc.WriteByte(c)
		} else {
			fmt.Fprintf(&enc, "%%%02X", c)
		}
	}
	return fmt.Sprintf(`form-data; name="%s"; filename="%s"; filename*=utf-8''%s`, form, b.String(), enc.String())
}
