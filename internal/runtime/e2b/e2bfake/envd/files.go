package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sandboxcore/sandboxcore/internal/runtime/e2b/envd/filesystem"
)

// resolve makes p absolute (relative paths are below the user's home, "~" is the home).
func resolve(u *user.User, p string) string {
	if p == "" {
		return u.HomeDir
	}
	if p == "~" || strings.HasPrefix(p, "~/") {
		p = filepath.Join(u.HomeDir, strings.TrimPrefix(p, "~"))
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(u.HomeDir, p)
	}
	return filepath.Clean(p)
}

// ensureDirs creates p's missing parents owned by the user.
func ensureDirs(u *user.User, dir string) error {
	uid, gid := ids(u)
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		missing = append(missing, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		_ = os.Chown(missing[i], int(uid), int(gid))
	}
	return nil
}

// files serves GET and POST /files (envd.yaml).
func (s *server) files(w http.ResponseWriter, r *http.Request) {
	u := userOf(r.Context())
	switch r.Method {
	case http.MethodGet:
		p := resolve(u, r.URL.Query().Get("path"))
		f, err := os.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			httpError(w, http.StatusNotFound, fmt.Sprintf("path '%s' does not exist", p))
			return
		}
		if err != nil {
			httpError(w, http.StatusInternalServerError, fmt.Sprintf("error opening file '%s': %v", p, err))
			return
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.IsDir() {
			httpError(w, http.StatusBadRequest, fmt.Sprintf("path '%s' is a directory", p))
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.Copy(w, f)
	case http.MethodPost:
		s.upload(w, r, u)
	default:
		httpError(w, http.StatusMethodNotAllowed, "method not allowed")
	}
}

type entry struct {
	Path string `json:"path"`
	Name string `json:"name"`
	Type string `json:"type"`
}

func (s *server) upload(w http.ResponseWriter, r *http.Request, u *user.User) {
	target := r.URL.Query().Get("path")
	var written []entry
	write := func(dst string, src io.Reader) (int, string) {
		if err := ensureDirs(u, filepath.Dir(dst)); err != nil {
			return statusOf(err), fmt.Sprintf("error creating directories for '%s': %v", dst, err)
		}
		f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return statusOf(err), fmt.Sprintf("error opening file '%s': %v", dst, err)
		}
		_, err = io.Copy(f, src)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return statusOf(err), fmt.Sprintf("error writing file '%s': %v", dst, err)
		}
		uid, gid := ids(u)
		_ = os.Chown(dst, int(uid), int(gid))
		written = append(written, entry{Path: dst, Name: filepath.Base(dst), Type: "file"})
		return 0, ""
	}
	ct := r.Header.Get("Content-Type")
	if strings.HasPrefix(ct, "application/octet-stream") {
		if target == "" {
			httpError(w, http.StatusBadRequest, "the path parameter is required with application/octet-stream")
			return
		}
		if code, msg := write(resolve(u, target), r.Body); code != 0 {
			httpError(w, code, msg)
			return
		}
	} else {
		mr, err := r.MultipartReader()
		if err != nil {
			httpError(w, http.StatusBadRequest, "error parsing multipart form: "+err.Error())
			return
		}
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				httpError(w, http.StatusBadRequest, "error reading multipart form: "+err.Error())
				return
			}
			if part.FormName() != "file" {
				continue
			}
			dst := resolve(u, target)
			if target == "" {
				// The part's whole filename, directories included (not
				// FileName's base name), as envd's resolvePath takes it
				// (CustomPart.FileNameWithPath, packages/envd/internal/
				// utils/multipart.go of e2b-dev/infra): the SDKs' files.write
				// of several files names each part by its path.
				_, params, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
				name, ok := params["filename"]
				if !ok {
					httpError(w, http.StatusBadRequest, "error getting multipart custom part file name: filename not found in Content-Disposition header")
					return
				}
				dst = resolve(u, name)
			}
			if code, msg := write(dst, part); code != 0 {
				httpError(w, code, msg)
				return
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(written)
}

// statusOf: a full disk is 507, as envd answers.
func statusOf(err error) int {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return http.StatusInsufficientStorage
	}
	if errors.Is(err, fs.ErrPermission) {
		return http.StatusUnauthorized
	}
	return http.StatusInternalServerError
}

type filesystemService struct{ s *server }

func entryInfo(p string) (*filesystem.EntryInfo, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("path '%s' does not exist", p))
		}
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	e := &filesystem.EntryInfo{Name: fi.Name(), Path: p, Size: fi.Size(), Mode: uint32(fi.Mode().Perm()),
		Permissions: fi.Mode().String(), ModifiedTime: timestamppb.New(fi.ModTime())}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Type = filesystem.FileType_FILE_TYPE_SYMLINK
		if t, err := os.Readlink(p); err == nil {
			e.SymlinkTarget = &t
		}
	case fi.IsDir():
		e.Type = filesystem.FileType_FILE_TYPE_DIRECTORY
	default:
		e.Type = filesystem.FileType_FILE_TYPE_FILE
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if o, err := user.LookupId(fmt.Sprint(st.Uid)); err == nil {
			e.Owner = o.Username
		}
		if g, err := user.LookupGroupId(fmt.Sprint(st.Gid)); err == nil {
			e.Group = g.Name
		}
	}
	return e, nil
}

func (f *filesystemService) Stat(ctx context.Context, req *connect.Request[filesystem.StatRequest]) (*connect.Response[filesystem.StatResponse], error) {
	e, err := entryInfo(resolve(userOf(ctx), req.Msg.GetPath()))
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystem.StatResponse{Entry: e}), nil
}

func (f *filesystemService) MakeDir(ctx context.Context, req *connect.Request[filesystem.MakeDirRequest]) (*connect.Response[filesystem.MakeDirResponse], error) {
	u := userOf(ctx)
	p := resolve(u, req.Msg.GetPath())
	if fi, err := os.Stat(p); err == nil {
		if fi.IsDir() {
			return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("directory '%s' already exists", p))
		}
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path '%s' already exists and is not a directory", p))
	}
	if err := ensureDirs(u, p); err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	e, err := entryInfo(p)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystem.MakeDirResponse{Entry: e}), nil
}

func (f *filesystemService) Move(ctx context.Context, req *connect.Request[filesystem.MoveRequest]) (*connect.Response[filesystem.MoveResponse], error) {
	u := userOf(ctx)
	src, dst := resolve(u, req.Msg.GetSource()), resolve(u, req.Msg.GetDestination())
	if err := ensureDirs(u, filepath.Dir(dst)); err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	if err := os.Rename(src, dst); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, connect.NewError(connect.CodeNotFound, err)
		}
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	e, err := entryInfo(dst)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&filesystem.MoveResponse{Entry: e}), nil
}

func (f *filesystemService) ListDir(ctx context.Context, req *connect.Request[filesystem.ListDirRequest]) (*connect.Response[filesystem.ListDirResponse], error) {
	root := resolve(userOf(ctx), req.Msg.GetPath())
	depth := int(req.Msg.GetDepth())
	if depth <= 0 {
		depth = 1
	}
	if _, err := entryInfo(root); err != nil {
		return nil, err
	}
	out := &filesystem.ListDirResponse{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		level := strings.Count(rel, string(filepath.Separator)) + 1
		if e, err := entryInfo(p); err == nil {
			out.Entries = append(out.Entries, e)
		}
		if d.IsDir() && level >= depth {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	return connect.NewResponse(out), nil
}

func (f *filesystemService) Remove(ctx context.Context, req *connect.Request[filesystem.RemoveRequest]) (*connect.Response[filesystem.RemoveResponse], error) {
	p := resolve(userOf(ctx), req.Msg.GetPath())
	if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("path '%s' does not exist", p))
	}
	if err := os.RemoveAll(p); err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	return connect.NewResponse(&filesystem.RemoveResponse{}), nil
}

var errNoWatch = connect.NewError(connect.CodeUnimplemented, errors.New("directory watchers are not supported by this envd"))

func (f *filesystemService) WatchDir(context.Context, *connect.Request[filesystem.WatchDirRequest], *connect.ServerStream[filesystem.WatchDirResponse]) error {
	return errNoWatch
}

func (f *filesystemService) CreateWatcher(context.Context, *connect.Request[filesystem.CreateWatcherRequest]) (*connect.Response[filesystem.CreateWatcherResponse], error) {
	return nil, errNoWatch
}

func (f *filesystemService) GetWatcherEvents(context.Context, *connect.Request[filesystem.GetWatcherEventsRequest]) (*connect.Response[filesystem.GetWatcherEventsResponse], error) {
	return nil, errNoWatch
}

func (f *filesystemService) RemoveWatcher(context.Context, *connect.Request[filesystem.RemoveWatcherRequest]) (*connect.Response[filesystem.RemoveWatcherResponse], error) {
	return nil, errNoWatch
}
