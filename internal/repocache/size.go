package repocache

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// recordedSize is the mirror size recorded by the last measurement (0 when
// none is recorded).
func (c *Cache) recordedSize(bare string) int64 {
	b, err := os.ReadFile(filepath.Join(bare, SizeMarker))
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// mirrorSize returns the recorded size of a mirror, measuring (and recording)
// it when asked or when nothing is recorded. Errors wrap ErrInsufficientDisk
// or ErrRepoCacheUnavailable.
func (c *Cache) mirrorSize(bare string, remeasure bool) (int64, error) {
	marker := filepath.Join(bare, SizeMarker)
	if !remeasure {
		if b, err := os.ReadFile(marker); err == nil {
			if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n >= 0 {
				return n, nil
			}
		}
	}
	size, err := dirSize(bare)
	if err != nil {
		return 0, fsError(err, "size of "+bare)
	}
	if err := writeFileSync(marker, strconv.FormatInt(size, 10)+"\n"); err != nil {
		c.log.Warn("repocache: record mirror size", "path", marker, "error", err)
	}
	return size, nil
}

// dirSize sums the sizes of the regular files under dir (symlinks not followed), in bytes.
func dirSize(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // a file removed by a concurrent git process
			}
			return err
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				total += fi.Size()
			}
		}
		return nil
	})
	return total, err
}
