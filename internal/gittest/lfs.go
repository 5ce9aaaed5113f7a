package gittest

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
)

// LFS is a Git LFS server (the batch API, "basic" transfer adapter, download
// only) for every repository a Server serves, following the Git LFS
// specification (docs/api/batch.md and basic-transfers.md of git-lfs):
//
//	POST <repo>/info/lfs/objects/batch   application/vnd.git-lfs+json
//	     {"operation":"download","transfers":["basic"],"objects":[{"oid","size"}],…}
//	  → {"transfer":"basic","objects":[{"oid","size","authenticated":true,
//	       "actions":{"download":{"href","header":{"Authorization":…},"expires_in"}}}]}
//	     (an unknown object gets "error":{"code":404,…})
//	GET  /lfs-objects/<oid>   the object's bytes, with the action's Authorization
//
// The batch endpoint sits behind the server's basic auth like every
// repository URL; object downloads carry their own short-lived token from
// the batch response instead (as code hosts hand out storage URLs), so a
// client must use what the batch API returns. Every request is validated
// against the specification: a malformed one is answered 422 and counted in
// Invalid (a test asserts it stays 0). Safe for concurrent use.
type LFS struct {
	mu      sync.Mutex
	objects map[string][]byte // oid → content
	token   string

	batches   atomic.Int64
	downloads atomic.Int64
	invalid   atomic.Int64
	lastErr   atomic.Value // string
}

// lfsServer is LFS as the Server's request router sees it.
type lfsServer = LFS

// lfsMediaType is the Git LFS media type (batch.md "Requests").
const lfsMediaType = "application/vnd.git-lfs+json"

var oidPat = regexp.MustCompile(`^[0-9a-f]{64}$`)

// EnableLFS starts serving the Git LFS API on s and returns its object store.
func (s *Server) EnableLFS() *LFS {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	l := &LFS{objects: map[string][]byte{}, token: "RemoteAuth " + hex.EncodeToString(b)}
	s.mu.Lock()
	s.lfs = l
	s.mu.Unlock()
	return l
}

// Add stores content as an LFS object and returns its pointer file, as
// `git lfs clean` would write it (spec.md "The pointer").
func (l *LFS) Add(content []byte) string {
	sum := sha256.Sum256(content)
	oid := hex.EncodeToString(sum[:])
	l.mu.Lock()
	l.objects[oid] = append([]byte(nil), content...)
	l.mu.Unlock()
	return fmt.Sprintf("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", oid, len(content))
}

// BatchRequests counts valid batch API requests.
func (l *LFS) BatchRequests() int64 { return l.batches.Load() }

// Downloads counts objects served.
func (l *LFS) Downloads() int64 { return l.downloads.Load() }

// Invalid counts requests that broke the specification; LastInvalid says why.
func (l *LFS) Invalid() int64 { return l.invalid.Load() }

// LastInvalid describes the last request that broke the specification.
func (l *LFS) LastInvalid() string { s, _ := l.lastErr.Load().(string); return s }

// objectsPath is the download path prefix, outside every repository.
const objectsPath = "/lfs-objects/"

// public reports whether r needs no basic auth (object downloads carry
// the batch response's token instead).
func (l *LFS) public(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, objectsPath) }

// serve answers LFS requests; it reports false for any other request.
func (l *LFS) serve(w http.ResponseWriter, r *http.Request) bool {
	switch {
	case strings.HasSuffix(r.URL.Path, "/info/lfs/objects/batch"):
		l.batch(w, r)
		return true
	case strings.HasPrefix(r.URL.Path, objectsPath):
		l.download(w, r)
		return true
	case strings.Contains(r.URL.Path, "/info/lfs/"):
		// Locks and verify endpoints are not offered: 404 per batch.md.
		l.fail(w, http.StatusNotFound, "not offered by this server")
		return true
	}
	return false
}

func (l *LFS) bad(w http.ResponseWriter, why string) {
	l.invalid.Add(1)
	l.lastErr.Store(why)
	l.fail(w, http.StatusUnprocessableEntity, why)
}

func (l *LFS) fail(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", lfsMediaType)
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": msg})
}

type batchObject struct {
	OID  string `json:"oid"`
	Size int64  `json:"size"`
}

type batchRequest struct {
	Operation string        `json:"operation"`
	Transfers []string      `json:"transfers,omitempty"`
	Ref       *struct{}     `json:"ref,omitempty"`
	Objects   []batchObject `json:"objects"`
	HashAlgo  string        `json:"hash_algo,omitempty"`
}

func (l *LFS) batch(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		l.bad(w, "batch: method "+r.Method+", want POST")
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != lfsMediaType {
		l.bad(w, "batch: Content-Type "+r.Header.Get("Content-Type"))
		return
	}
	if !strings.Contains(r.Header.Get("Accept"), lfsMediaType) {
		l.bad(w, "batch: Accept "+r.Header.Get("Accept"))
		return
	}
	var req batchRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		l.bad(w, "batch: body: "+err.Error())
		return
	}
	if req.Operation != "download" && req.Operation != "upload" {
		l.bad(w, "batch: operation "+req.Operation)
		return
	}
	if len(req.Transfers) > 0 && !contains(req.Transfers, "basic") {
		l.bad(w, "batch: no basic transfer offered")
		return
	}
	if req.HashAlgo != "" && req.HashAlgo != "sha256" {
		l.bad(w, "batch: hash_algo "+req.HashAlgo)
		return
	}
	if len(req.Objects) == 0 {
		l.bad(w, "batch: no objects")
		return
	}
	if req.Operation == "upload" {
		l.fail(w, http.StatusForbidden, "uploads are not accepted by this server")
		return
	}
	l.batches.Add(1)
	base := "http://" + r.Host
	type action struct {
		Href      string            `json:"href"`
		Header    map[string]string `json:"header"`
		ExpiresIn int               `json:"expires_in"`
	}
	type objErr struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	type respObject struct {
		OID           string            `json:"oid"`
		Size          int64             `json:"size"`
		Authenticated bool              `json:"authenticated,omitempty"`
		Actions       map[string]action `json:"actions,omitempty"`
		Error         *objErr           `json:"error,omitempty"`
	}
	out := struct {
		Transfer string       `json:"transfer"`
		Objects  []respObject `json:"objects"`
		HashAlgo string       `json:"hash_algo"`
	}{Transfer: "basic", HashAlgo: "sha256"}
	for _, o := range req.Objects {
		if !oidPat.MatchString(o.OID) || o.Size < 0 {
			l.bad(w, fmt.Sprintf("batch: object %q size %d", o.OID, o.Size))
			return
		}
		l.mu.Lock()
		content, ok := l.objects[o.OID]
		l.mu.Unlock()
		switch {
		case !ok:
			out.Objects = append(out.Objects, respObject{OID: o.OID, Size: o.Size, Error: &objErr{Code: 404, Message: "Object does not exist"}})
		case int64(len(content)) != o.Size:
			out.Objects = append(out.Objects, respObject{OID: o.OID, Size: o.Size, Error: &objErr{Code: 422, Message: "size mismatch"}})
		default:
			out.Objects = append(out.Objects, respObject{OID: o.OID, Size: o.Size, Authenticated: true,
				Actions: map[string]action{"download": {Href: base + objectsPath + o.OID, Header: map[string]string{"Authorization": l.token}, ExpiresIn: 3600}}})
		}
	}
	w.Header().Set("Content-Type", lfsMediaType)
	_ = json.NewEncoder(w).Encode(out)
}

func (l *LFS) download(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		l.bad(w, "download: method "+r.Method)
		return
	}
	if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte(l.token)) != 1 {
		l.fail(w, http.StatusUnauthorized, "the batch response's Authorization header is required")
		return
	}
	oid := strings.TrimPrefix(r.URL.Path, objectsPath)
	l.mu.Lock()
	content, ok := l.objects[oid]
	l.mu.Unlock()
	if !ok {
		l.fail(w, http.StatusNotFound, "Object does not exist")
		return
	}
	l.downloads.Add(1)
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(content)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
