package credentials

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"syscall"
	"time"

	"github.com/sandboxcore/sandboxcore/internal/wire"
)

// maxCredentialsFileBytes bounds a credentials file.
const maxCredentialsFileBytes = 1 << 20

// fileStamp identifies one version of a file: a rewrite in place (size or
// modification time change) or an atomic replacement (new inode, e.g. a
// Kubernetes secret's symlink swap) gives a new stamp.
type fileStamp struct {
	modTime time.Time
	size    int64
	dev     uint64
	ino     uint64
}

func stampOf(fi fs.FileInfo) fileStamp {
	s := fileStamp{modTime: fi.ModTime(), size: fi.Size()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.dev, s.ino = uint64(st.Dev), st.Ino
	}
	return s
}

// watchedJSON holds the parsed content of one JSON file, re-read whenever the
// file's stamp changes (it is stat'ed on every use; the file is read only when
// it changed). The caller serializes access.
type watchedJSON[T any] struct {
	stamp   fileStamp
	present bool
	data    T
}

// load returns the current content of path; ok is false when the file does
// not exist. Errors name the path, never the content.
func (w *watchedJSON[T]) load(path string) (data T, ok bool, err error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		var zero T
		w.present, w.data, w.stamp = false, zero, fileStamp{}
		return zero, false, nil
	}
	if err != nil {
		return data, false, fmt.Errorf("credentials file %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return data, false, fmt.Errorf("credentials file %s: not a regular file", path)
	}
	if fi.Size() > maxCredentialsFileBytes {
		return data, false, fmt.Errorf("credentials file %s: larger than %d bytes", path, maxCredentialsFileBytes)
	}
	st := stampOf(fi)
	if w.present && st == w.stamp {
		return w.data, true, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return data, false, fmt.Errorf("credentials file %s: %w", path, err)
	}
	var parsed T
	if err := json.Unmarshal(raw, &parsed); err != nil {
		// Never echo the content (or json's excerpt of it): it holds secrets.
		return data, false, fmt.Errorf("credentials file %s: malformed JSON", path)
	}
	if key, dup := wire.DuplicateKey(raw, reflect.TypeOf(parsed)); dup {
		// Two entries for one key: which credential applies must not be
		// decided by their order. The key path is not a secret.
		return data, false, fmt.Errorf("credentials file %s: duplicate key %q", path, key)
	}
	w.present, w.data, w.stamp = true, parsed, st
	return parsed, true, nil
}
