package workspace

import (
	"bytes"
	"compress/zlib"
	"context"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sandboxcore/sandboxcore/internal/gitx"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Patches that survive JSON (docs/API.md "diff"). A patch travels as a JSON
// string, and JSON replaces every byte that is not valid UTF-8 with U+FFFD:
// the text diff of a file holding "caf\xe9" (Latin-1) reaches the client
// as "caf\uFFFD", and `git apply` of it writes other bytes. So every file
// section of a patch that is not valid UTF-8 is re-emitted as a git binary
// patch (zlib + git's base85: pure ASCII), which git apply turns back into
// the exact bytes; sections that are valid UTF-8 (CRLF, no trailing newline
// and all) are left as git wrote them. Paths in headers are quoted by git
// (core.quotePath=true: octal escapes), so headers are ASCII.

// patchBuilder collects `git diff --full-index --binary` output section by
// section (a section starts at a line "diff --git "), converting each that
// is not valid UTF-8, and keeps as many whole sections as fit in max bytes.
type patchBuilder struct {
	ctx     context.Context
	g       gitCtx
	max     int
	out     bytes.Buffer // whole sections that fit
	cur     bytes.Buffer // the section being read (at most max+1 bytes kept)
	curSize int64        // its full size as git wrote it
	pending []byte       // an incomplete last line
	total   int64        // full size of the converted patch (oversized sections: as git wrote them)
	dropped bool         // a section did not fit
	first   []byte       // the start of the first section, when it alone is over max
	err     error
}

func newPatchBuilder(ctx context.Context, g gitCtx, max int) *patchBuilder {
	return &patchBuilder{ctx: ctx, g: g, max: max}
}

// Write splits p into lines and sections; it never fails (a conversion
// error is kept for result).
func (b *patchBuilder) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			b.pending = append(b.pending, p...)
			break
		}
		line := p[:i+1]
		p = p[i+1:]
		if len(b.pending) > 0 {
			line = append(b.pending, line...)
			b.pending = nil
		}
		b.line(line)
	}
	return n, nil
}

func (b *patchBuilder) line(line []byte) {
	if bytes.HasPrefix(line, []byte("diff --git ")) && b.curSize > 0 {
		b.finish()
	}
	b.curSize += int64(len(line))
	if room := b.max + 1 - b.cur.Len(); room > 0 {
		if len(line) > room {
			line = line[:room]
		}
		b.cur.Write(line)
	}
}

// finish ends the current section: converted when needed, kept when it fits.
func (b *patchBuilder) finish() {
	sec := b.cur.Bytes()
	size := b.curSize
	defer func() { b.cur.Reset(); b.curSize = 0 }()
	if size > int64(b.max) {
		// Too large to keep whatever its form: counted as git wrote it.
		b.total += size
		b.dropped = true
		if b.out.Len() == 0 && b.first == nil {
			b.first = append([]byte(nil), sec...)
		}
		return
	}
	if !utf8.Valid(sec) && b.err == nil {
		conv, err := b.binarySection(sec)
		if err != nil {
			b.err = err
			return
		}
		sec = conv
	}
	b.total += int64(len(sec))
	if b.out.Len()+len(sec) > b.max || b.dropped {
		b.dropped = true
		return
	}
	b.out.Write(sec)
}

// result returns the patch, whether it was cut, and its full size. When not
// even the first section fits, the patch is that section cut on a line
// boundary (and at valid UTF-8): a preview that no longer applies.
func (b *patchBuilder) result() (patch string, truncated bool, total int64, err error) {
	if len(b.pending) > 0 {
		b.line(b.pending)
		b.pending = nil
	}
	if b.curSize > 0 {
		b.finish()
	}
	if b.err != nil {
		return "", false, 0, b.err
	}
	if b.out.Len() == 0 && b.first != nil {
		p := b.first
		if len(p) > b.max {
			p = p[:b.max]
		}
		if i := bytes.LastIndexByte(p, '\n'); i >= 0 {
			p = p[:i+1]
		}
		if !utf8.Valid(p) {
			p = nil
		}
		return string(p), true, b.total, nil
	}
	return b.out.String(), b.dropped, b.total, nil
}

// binarySection rewrites one file section of a text diff as a git binary
// patch: its header lines (up to "--- ") are kept, the hunks replaced by
// "GIT binary patch" with the whole new content (literal) and the whole old
// content (the reverse literal), read from the blobs the "index" line names.
func (b *patchBuilder) binarySection(sec []byte) ([]byte, error) {
	var header bytes.Buffer
	var oldID, newID string
	for _, l := range bytes.SplitAfter(sec, []byte("\n")) {
		if bytes.HasPrefix(l, []byte("--- ")) || bytes.HasPrefix(l, []byte("@@ ")) || len(l) == 0 {
			break
		}
		if s, ok := strings.CutPrefix(string(l), "index "); ok {
			ids, _, _ := strings.Cut(strings.TrimSpace(s), " ")
			oldID, newID, _ = strings.Cut(ids, "..")
		}
		header.Write(l)
	}
	if !utf8.Valid(header.Bytes()) || !isFullID(oldID) || !isFullID(newID) {
		return nil, sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "git diff: cannot re-encode a section as a binary patch (header %q)", sandboxapi.Clip(header.String(), 200))
	}
	oldData, err := b.blob(oldID)
	if err != nil {
		return nil, err
	}
	newData, err := b.blob(newID)
	if err != nil {
		return nil, err
	}
	header.WriteString("GIT binary patch\n")
	if err := writeBinaryLiteral(&header, newData); err != nil {
		return nil, err
	}
	if err := writeBinaryLiteral(&header, oldData); err != nil {
		return nil, err
	}
	return header.Bytes(), nil
}

// blob returns a blob's bytes; the all-zero id (no file) is empty.
func (b *patchBuilder) blob(id string) ([]byte, error) {
	if strings.Trim(id, "0") == "" {
		return nil, nil
	}
	var buf bytes.Buffer
	if _, err := b.g.runIO(b.ctx, nil, &buf, "cat-file", "blob", id); err != nil {
		return nil, gitx.Classify(err, "git cat-file blob "+id, sandboxapi.ErrWorkspaceUnavailable)
	}
	return buf.Bytes(), nil
}

func isFullID(s string) bool { return (len(s) == 40 || len(s) == 64) && isHex(s) }

// writeBinaryLiteral writes one "literal <size>" hunk of a git binary patch
// (git's diff.c emit_binary_diff_body): the zlib-deflated data in lines of
// at most 52 bytes, each prefixed by its length ('A'..'Z' = 1..26,
// 'a'..'z' = 27..52) and base85-encoded, then an empty line.
func writeBinaryLiteral(w *bytes.Buffer, data []byte) error {
	var z bytes.Buffer
	zw, err := zlib.NewWriterLevel(&z, zlib.BestCompression)
	if err != nil {
		return err
	}
	if _, err := zw.Write(data); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	w.WriteString("literal " + strconv.Itoa(len(data)) + "\n")
	d := z.Bytes()
	for len(d) > 0 {
		n := min(52, len(d))
		if n <= 26 {
			w.WriteByte(byte('A' + n - 1))
		} else {
			w.WriteByte(byte('a' + n - 27))
		}
		encode85(w, d[:n])
		w.WriteByte('\n')
		d = d[n:]
	}
	w.WriteByte('\n')
	return nil
}

// base85 is git's alphabet (base85.c), not Ascii85's.
const base85 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~"

// encode85 writes data as git's base85: each group of 4 bytes (the last one
// padded with zeros) as 5 characters, most significant first.
func encode85(w *bytes.Buffer, data []byte) {
	for len(data) > 0 {
		var acc uint32
		for i := 0; i < 4; i++ {
			acc <<= 8
			if i < len(data) {
				acc |= uint32(data[i])
			}
		}
		var out [5]byte
		for i := 4; i >= 0; i-- {
			out[i] = base85[acc%85]
			acc /= 85
		}
		w.Write(out[:])
		if len(data) < 4 {
			break
		}
		data = data[4:]
	}
}
