package sandbox

import (
	"bytes"
	"strconv"
	"strings"
)

// LFSPointer is a parsed Git LFS pointer file (the Git LFS specification,
// spec.md "The pointer"): what a repository using LFS commits instead of a
// large file's content.
type LFSPointer struct {
	// OID is the content's SHA-256, lowercase hex.
	OID string
	// Size is the content's size in bytes.
	Size int64
}

// MaxLFSPointerBytes is the largest pointer file the specification allows.
const MaxLFSPointerBytes = 1024

// ParseLFSPointer reports whether data is a Git LFS pointer file and
// returns it: at most MaxLFSPointerBytes, lines "key value\n" with "version
// https://git-lfs.github.com/spec/v1" first, then keys in order, among them
// "oid sha256:<64 hex>" and "size <decimal>". Anything else is no pointer.
func ParseLFSPointer(data []byte) (LFSPointer, bool) {
	if len(data) == 0 || len(data) > MaxLFSPointerBytes || !bytes.HasSuffix(data, []byte("\n")) {
		return LFSPointer{}, false
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) < 3 || lines[0] != "version https://git-lfs.github.com/spec/v1" {
		return LFSPointer{}, false
	}
	var p LFSPointer
	prev := ""
	for _, l := range lines[1:] {
		k, v, ok := strings.Cut(l, " ")
		if !ok || k == "" || k <= prev {
			return LFSPointer{}, false // keys are sorted and unique
		}
		prev = k
		switch k {
		case "oid":
			hex, ok := strings.CutPrefix(v, "sha256:")
			if !ok || len(hex) != 64 || strings.Trim(hex, "0123456789abcdef") != "" {
				return LFSPointer{}, false
			}
			p.OID = hex
		case "size":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 || strconv.FormatInt(n, 10) != v {
				return LFSPointer{}, false
			}
			p.Size = n
		}
	}
	if p.OID == "" || !strings.Contains(string(data), "\nsize ") {
		return LFSPointer{}, false
	}
	return p, true
}
