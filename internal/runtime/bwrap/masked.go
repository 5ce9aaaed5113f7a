package bwrap

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// maxMasked bounds the paths notWorldReadable returns (each is three bwrap
// arguments on every command); past it a root worker's provider refuses to
// start rather than leave the rest readable.
const maxMasked = 4096

var (
	maskedMu    sync.Mutex
	maskedCache = map[string][]string{}
)

// notWorldReadable walks the read-only paths (symbolic links not followed)
// and returns every directory another user could not enter or list (mode
// without o+rx; not descended) and every regular file another user could not
// read (without o+r), at most maxMasked (truncated reports more). The walk
// runs once per set of paths in a process (the result is cached): a file
// made root-only after the worker started is not masked until it restarts.
func notWorldReadable(roots []string) (paths []string, truncated bool) {
	key := strings.Join(roots, "\x00")
	maskedMu.Lock()
	defer maskedMu.Unlock()
	if v, ok := maskedCache[key]; ok {
		return v, len(v) >= maxMasked
	}
	out := []string{}
	for _, root := range roots {
		fi, err := os.Lstat(root)
		if err != nil || !fi.IsDir() {
			continue
		}
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || len(out) >= maxMasked {
				if d != nil && d.IsDir() && path != root {
					return fs.SkipDir
				}
				return nil
			}
			switch {
			case d.IsDir():
				if info, err := d.Info(); err == nil && info.Mode().Perm()&0o005 != 0o005 {
					out = append(out, path)
					return fs.SkipDir
				}
			case d.Type().IsRegular():
				if info, err := d.Info(); err == nil && info.Mode().Perm()&0o004 == 0 {
					out = append(out, path)
				}
			}
			return nil
		})
	}
	maskedCache[key] = out
	return out, len(out) >= maxMasked
}
